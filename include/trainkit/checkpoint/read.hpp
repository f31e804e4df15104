// trainkit/checkpoint/read.hpp — loading a checkpoint with full verification, and resuming from
// the newest one that is intact.
//
// A checkpoint is trusted only after its manifest parses, tensors.bin has exactly the size the
// manifest implies, and every tensor's CRC-32C matches. Verification reads the whole file before
// anything is copied into the caller's buffers, so a corrupt checkpoint leaves the model and
// optimizer untouched (the fallback to an older checkpoint, or a fresh start, then begins from
// clean state); the copy re-checks each CRC in case the file changed in between.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "trainkit/checkpoint/concepts.hpp"
#include "trainkit/checkpoint/detail/posix_file.hpp"
#include "trainkit/checkpoint/format.hpp"
#include "trainkit/checkpoint/list.hpp"
#include "trainkit/core/crc32c.hpp"
#include "trainkit/core/error.hpp"

namespace trainkit::checkpoint {

/// An intact checkpoint that does not fit the state it is loaded into: a requested tensor is
/// missing or has another dtype or shape. That means resuming into a different model or optimizer
/// configuration, which an older checkpoint of the same run will not fix, so `load_latest` stops
/// on it instead of falling back (and silently starting from scratch).
class checkpoint_mismatch : public format_error {
 public:
  using format_error::format_error;
};

namespace detail {

inline constexpr std::size_t read_chunk_bytes = std::size_t{8} << 20;

// CRC-32C of `bytes` bytes at `offset`, read in chunks through `buffer`.
inline std::uint32_t file_crc(posix_file& f, std::uint64_t offset, std::uint64_t bytes,
                              std::vector<std::byte>& buffer) {
  std::uint32_t crc = 0;
  while (bytes > 0) {
    const std::size_t n = std::size_t(std::min<std::uint64_t>(bytes, buffer.size()));
    f.read_all_at(buffer.data(), n, offset);
    crc = crc32c_extend(crc, buffer.data(), n);
    offset += n;
    bytes -= n;
  }
  return crc;
}

// tensors.bin has the size `m` implies and every tensor's CRC-32C matches; format_error naming
// `where` (and the tensor) otherwise.
inline void verify_tensors_file(const std::string& where, posix_file& data, const manifest& m) {
  const std::uint64_t size = data.size();
  if (size != m.data_size())
    throw format_error(where + ": " + std::string(tensors_file_name) + " is " +
                       std::to_string(size) + " bytes but the manifest describes " +
                       std::to_string(m.data_size()) +
                       (size < m.data_size() ? " (truncated)" : ""));
  std::vector<std::byte> buffer(
      std::size_t(std::min<std::uint64_t>(read_chunk_bytes, std::max<std::uint64_t>(size, 1))));
  for (const auto& e : m.tensors) {
    if (file_crc(data, e.offset, e.bytes, buffer) != e.crc32c)
      throw format_error(where + ": CRC-32C mismatch in tensor '" + e.name + "' (corrupt " +
                         std::string(tensors_file_name) + ")");
  }
}

// The manifest of checkpoint directory `ckpt`, checked against the directory's step.
inline manifest read_checkpoint_manifest(const std::filesystem::path& ckpt,
                                         const std::string& where) {
  const std::filesystem::path manifest_path = ckpt / manifest_file_name;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(manifest_path, ec))
    throw format_error(where + " has no " + std::string(manifest_file_name));
  manifest m = read_manifest(manifest_path);
  if (const auto named = parse_step_dir_name(ckpt.filename().string()); named && *named != m.step)
    throw format_error("checkpoint manifest '" + manifest_path.string() + "' says step " +
                       std::to_string(m.step) + " but its directory is step " +
                       std::to_string(*named));
  return m;
}

inline void check_loadable(const checkpoint_state& state) {
  for (const auto& t : state.tensors) {
    if (t.on_device)
      throw config_error("checkpoint tensor '" + t.name +
                         "' is in device memory: device tensors need the CUDA checkpointer");
    if (t.data == nullptr && t.bytes() > 0)
      throw config_error("checkpoint tensor '" + t.name + "' has no destination");
  }
}

}  // namespace detail

namespace detail {

/// Elements [offset, offset + count) of the tensor `name` (a whole tensor: offset 0, count its
/// numel) go to `data`; the checkpoint's tensor must have dtype `type` and shape `full_shape`.
struct load_request {
  std::string name;
  dtype type = dtype::f32;
  std::vector<std::int64_t> full_shape;
  std::uint64_t offset = 0, count = 0;  // elements
  std::byte* data = nullptr;
};

// Where a request's bytes are: a tensor of rank 0's tensors.bin, or its shards (a version 3
// checkpoint's sharded tensors, which any number of ranks can slice anew).
struct resolved_request {
  const load_request* request = nullptr;
  const manifest_entry* plain = nullptr;  // null: from the shards
};

inline std::uint64_t sharded_total(const manifest& m) {
  return m.shards.empty() ? 0 : m.shards.back().offset + m.shards.back().count;
}

// Finds each request's tensor and checks its dtype and shape (checkpoint_mismatch otherwise).
inline std::vector<resolved_request> resolve(const manifest& m,
                                             const std::vector<load_request>& requests,
                                             const std::string& where) {
  std::vector<resolved_request> out;
  for (const load_request& q : requests) {
    const manifest_entry* e = m.find(q.name);
    const bool sharded = e == nullptr && !m.shards.empty() && m.shards.front().find(q.name);
    if (sharded) e = m.shards.front().find(q.name);
    if (e == nullptr) throw checkpoint_mismatch(where + " has no tensor '" + q.name + "'");
    if (e->type != q.type)
      throw checkpoint_mismatch(where + ": tensor '" + q.name + "' is " +
                                std::string(dtype_name(e->type)) + " in the checkpoint but " +
                                std::string(dtype_name(q.type)) + " is expected");
    const std::vector<std::int64_t> shape =
        sharded ? std::vector<std::int64_t>{std::int64_t(sharded_total(m))} : e->shape;
    if (shape != q.full_shape)
      throw checkpoint_mismatch(where + ": tensor '" + q.name + "' has shape " + shape_text(shape) +
                                (sharded ? " (sharded)" : "") + " in the checkpoint but " +
                                shape_text(q.full_shape) + " is expected");
    out.push_back({&q, sharded ? nullptr : e});
  }
  return out;
}

// The shards holding some element of a sharded request.
inline std::vector<const shard_entry*> shards_needed(const manifest& m,
                                                     const std::vector<resolved_request>& rs) {
  std::vector<const shard_entry*> out;
  for (const shard_entry& sh : m.shards) {
    for (const resolved_request& r : rs) {
      const load_request& q = *r.request;
      if (r.plain == nullptr && q.count > 0 && sh.count > 0 && sh.offset < q.offset + q.count &&
          q.offset < sh.offset + sh.count) {
        out.push_back(&sh);
        break;
      }
    }
  }
  return out;
}

inline void verify_shard_file(const std::filesystem::path& ckpt, const shard_entry& sh,
                              const std::string& where) {
  posix_file data = posix_file::open_read(ckpt / sh.dir / tensors_file_name);
  manifest part;
  part.tensors = sh.tensors;
  verify_tensors_file(where + " " + sh.dir, data, part);
  data.close();
}

// Elements [first, first + n) of entry `e` of file `f` to `dest`, the whole tensor's CRC checked
// against the bytes read (a slice is read through `scratch` with the rest of its tensor).
inline void copy_elements(posix_file& f, const manifest_entry& e, std::uint64_t first,
                          std::uint64_t n, std::byte* dest, const std::string& where,
                          std::vector<std::byte>& scratch) {
  const std::size_t size = dtype_size(e.type);
  const std::byte* from = dest;
  if (first == 0 && n * size == e.bytes) {
    f.read_all_at(dest, std::size_t(e.bytes), e.offset);
  } else {
    scratch.resize(std::size_t(e.bytes));
    f.read_all_at(scratch.data(), std::size_t(e.bytes), e.offset);
    from = scratch.data();
  }
  if (crc32c(from, std::size_t(e.bytes)) != e.crc32c)
    throw format_error(where + ": tensor '" + e.name + "' changed while it was being loaded");
  if (from != dest) std::memcpy(dest, from + first * size, std::size_t(n * size));
}

// What a load reads, found and verified (every CRC of every file it reads) but not yet copied.
struct verified_load {
  std::vector<resolved_request> requests;
  std::vector<const shard_entry*> shards;
};

inline verified_load verify_requests(const std::filesystem::path& ckpt, const manifest& m,
                                     const std::vector<load_request>& requests,
                                     const std::string& where) {
  verified_load v{resolve(m, requests, where), {}};
  v.shards = shards_needed(m, v.requests);
  posix_file data = posix_file::open_read(ckpt / tensors_file_name);
  verify_tensors_file(where, data, m);
  data.close();
  for (const shard_entry* sh : v.shards) verify_shard_file(ckpt, *sh, where);
  return v;
}

// The copies of a verified load; each tensor's CRC is checked again on the bytes read.
inline void copy_requests(const std::filesystem::path& ckpt, const verified_load& v,
                          const std::string& where) {
  posix_file data = posix_file::open_read(ckpt / tensors_file_name);
  std::vector<std::byte> scratch;
  for (const resolved_request& r : v.requests) {
    const load_request& q = *r.request;
    if (r.plain != nullptr) {
      copy_elements(data, *r.plain, q.offset, q.count, q.data, where, scratch);
      continue;
    }
    const std::size_t size = dtype_size(q.type);
    for (const shard_entry* sh : v.shards) {
      const std::uint64_t lo = std::max(q.offset, sh->offset);
      const std::uint64_t hi = std::min(q.offset + q.count, sh->offset + sh->count);
      if (hi <= lo) continue;
      posix_file part = posix_file::open_read(ckpt / sh->dir / tensors_file_name);
      copy_elements(part, *sh->find(q.name), lo - sh->offset, hi - lo,
                    q.data + (lo - q.offset) * size, where + " " + sh->dir, scratch);
      part.close();
    }
  }
  data.close();
}

// Verifies every file the requests read (all CRCs), then copies: nothing is written to the
// destinations before every check has passed.
inline void load_requests(const std::filesystem::path& ckpt, const manifest& m,
                          const std::vector<load_request>& requests, const std::string& where) {
  copy_requests(ckpt, verify_requests(ckpt, m, requests, where), where);
}

inline load_request whole_tensor(const state_tensor& t) {
  return {t.name, t.type, t.shape, 0, t.numel(), t.data};
}

}  // namespace detail

/// Fills every tensor listed in `state` from the checkpoint directory `ckpt` and sets
/// `state.step` and `state.meta` from its manifest. Throws checkpoint_mismatch (a format_error)
/// naming the checkpoint, the tensor and both dtypes or shapes when a requested tensor is absent
/// or differs, and format_error naming the checkpoint (and tensor) when the manifest is missing
/// or malformed, tensors.bin has the wrong size, or a CRC does not match; io_error
/// when a file cannot be read. On any error the destination buffers are left unchanged (unless
/// the file changes during the load). Tensors in the checkpoint that `state` does not ask for
/// are verified but not loaded. From a sharded checkpoint (version 3) a requested tensor of
/// shape {N} that the shards hold is reassembled from them (a ZeRO-1 run's moments, resumed by
/// one process or a DDP run); only the shards read are verified.
inline void load_checkpoint(const std::filesystem::path& ckpt, checkpoint_state& state) {
  detail::check_loadable(state);
  const std::string where = "checkpoint '" + ckpt.string() + "'";
  const manifest m = detail::read_checkpoint_manifest(ckpt, where);
  std::vector<detail::load_request> requests;
  for (const auto& t : state.tensors) requests.push_back(detail::whole_tensor(t));
  detail::load_requests(ckpt, m, requests, where);
  state.step = m.step;
  state.meta = m.meta;
}

/// Checks the checkpoint directory `ckpt` without loading it: the manifest (fields and, for
/// version 2, its own checksum), its step against the directory name, tensors.bin's size and every
/// tensor's CRC-32C, and the same for every shard of a sharded checkpoint. Returns the manifest;
/// format_error / io_error naming the problem otherwise. Reads the whole of tensors.bin; writes
/// nothing.
inline manifest verify_checkpoint(const std::filesystem::path& ckpt) {
  const std::string where = "checkpoint '" + ckpt.string() + "'";
  manifest m = detail::read_checkpoint_manifest(ckpt, where);
  detail::posix_file data = detail::posix_file::open_read(ckpt / tensors_file_name);
  detail::verify_tensors_file(where, data, m);
  data.close();
  for (const shard_entry& sh : m.shards) detail::verify_shard_file(ckpt, sh, where);
  return m;
}

/// Loads the newest intact checkpoint under `dir` into `state`. A corrupt or unreadable one
/// (format_error or io_error) adds one line to `warnings` and the next older one is tried.
/// Returns false when there is no checkpoint or none loads. checkpoint_mismatch (the run's
/// tensors do not fit the checkpoint) and config_error (a state that cannot be loaded at all)
/// are thrown, not turned into warnings.
inline bool load_latest_checkpoint(const std::filesystem::path& dir, checkpoint_state& state,
                                   std::vector<std::string>& warnings) {
  detail::check_loadable(state);
  const std::vector<checkpoint_entry> all = list_checkpoints(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      load_checkpoint(it->path, state);
      return true;
    } catch (const checkpoint_mismatch&) {
      throw;
    } catch (const format_error& e) {
      warnings.push_back(std::string("skipping unusable checkpoint: ") + e.what());
    } catch (const io_error& e) {
      warnings.push_back(std::string("skipping unreadable checkpoint: ") + e.what());
    }
  }
  return false;
}

}  // namespace trainkit::checkpoint
