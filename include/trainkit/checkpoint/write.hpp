// trainkit/checkpoint/write.hpp — writing one checkpoint crash-safely, then pruning old ones.
//
// The protocol (docs/formats_checkpoint.md): write tensors.bin and then manifest.json into the
// hidden `.tmp.step_N`, fsync both and the directory, rename it to `step_N`, fsync the parent.
// A crash at any point leaves either no `step_N` or a complete one, so resume never sees half a
// checkpoint. Only after the rename are checkpoints beyond the newest `keep_last` removed, each
// first renamed to a hidden name so a crash mid-deletion cannot leave a listed, half-deleted
// directory. `write_checkpoint` is a free function so the synchronous checkpointer and the
// asynchronous one (which runs it on a worker thread over a host snapshot) share it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <future>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "trainkit/checkpoint/concepts.hpp"
#include "trainkit/checkpoint/detail/posix_file.hpp"
#include "trainkit/checkpoint/format.hpp"
#include "trainkit/checkpoint/list.hpp"
#include "trainkit/core/crc32c.hpp"
#include "trainkit/core/error.hpp"

namespace trainkit::checkpoint {

namespace detail {

// Rejects states that cannot be written: device tensors (need the CUDA checkpointer), duplicate
// or empty names, and null data.
inline void check_saveable(const checkpoint_state& state) {
  std::set<std::string> names;
  for (const auto& t : state.tensors) {
    if (t.on_device)
      throw config_error("checkpoint tensor '" + t.name +
                         "' is in device memory: device tensors need the CUDA checkpointer");
    if (t.name.empty()) throw config_error("checkpoint tensor with an empty name");
    if (!names.insert(t.name).second)
      throw config_error("checkpoint tensor '" + t.name + "' appears twice");
    if (t.data == nullptr && t.bytes() > 0)
      throw config_error("checkpoint tensor '" + t.name + "' has no data");
  }
}

inline void remove_tree(const std::filesystem::path& p) {
  std::error_code ec;
  std::filesystem::remove_all(p, ec);
  if (ec) throw_io("cannot remove", p, ec);
}

inline void rename_path(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::error_code ec;
  std::filesystem::rename(from, to, ec);
  if (ec)
    throw io_error("cannot rename '" + from.string() + "' to '" + to.string() +
                   "': " + ec.message());
}

// Writes the tensors at 64-byte aligned offsets and returns the manifest describing them. The
// CRCs are computed on a second thread while this one writes: both only read the tensors, and
// CRC-32C at ~1 GB/s would otherwise add about a third to a save that writes at disk speed.
// (With both launch flags libstdc++ falls back to computing them in `get()` if no thread can be
// started, rather than throwing std::system_error.)
inline manifest write_tensors_file(const std::filesystem::path& file,
                                   const checkpoint_state& state) {
  static constexpr std::byte zeros[tensor_alignment] = {};
  std::future<std::vector<std::uint32_t>> crcs =
      std::async(std::launch::async | std::launch::deferred, [&state] {
        std::vector<std::uint32_t> out;
        for (const auto& t : state.tensors) out.push_back(crc32c(t.data, t.bytes()));
        return out;
      });
  manifest m;
  m.step = state.step;
  m.meta = state.meta;
  posix_file out = posix_file::create(file);
  std::uint64_t offset = 0;
  for (const auto& t : state.tensors) {
    const std::uint64_t aligned =
        (offset + tensor_alignment - 1) / tensor_alignment * tensor_alignment;
    out.write_all(zeros, std::size_t(aligned - offset));
    const std::size_t bytes = t.bytes();
    out.write_all(t.data, bytes);
    m.tensors.push_back({t.name, t.type, t.shape, aligned, bytes, 0});
    offset = aligned + bytes;
  }
  out.sync();
  out.close();
  const std::vector<std::uint32_t> sums = crcs.get();
  for (std::size_t i = 0; i < sums.size(); ++i) m.tensors[i].crc32c = sums[i];
  return m;
}

inline void write_text_file(const std::filesystem::path& file, const std::string& text) {
  posix_file out = posix_file::create(file);
  out.write_all(text.data(), text.size());
  out.sync();
  out.close();
}

}  // namespace detail

/// Removes complete checkpoints in `dir` beyond the newest `keep_last` (0 keeps all), never the
/// one for `protected_step`, and the wrecks of crashes: `.tmp.step_N` with N < protected_step,
/// `.tmp.delete.*` and `.tmp.replaced.*` (saves are serial and in step order, so none of them can
/// still be in progress).
inline void prune_checkpoints(const std::filesystem::path& dir, int keep_last,
                              std::uint64_t protected_step) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> stale;  // collected first: deleting while iterating may skip entries
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(temporary_prefix, 0) != 0) continue;
    const std::string_view rest = std::string_view(name).substr(temporary_prefix.size());
    const auto step = parse_step_dir_name(rest);
    if ((step && *step < protected_step) || rest.rfind("delete.", 0) == 0 ||
        rest.rfind("replaced.", 0) == 0)
      stale.push_back(it->path());
  }
  if (ec) detail::throw_io("cannot list checkpoint directory", dir, ec);
  for (const auto& p : stale) detail::remove_tree(p);
  if (keep_last <= 0) return;

  std::vector<checkpoint_entry> all = list_checkpoints(dir);
  std::sort(all.begin(), all.end(),
            [](const checkpoint_entry& a, const checkpoint_entry& b) { return a.step > b.step; });
  for (std::size_t i = 0; i < all.size(); ++i) {
    const checkpoint_entry& c = all[i];
    if (i < std::size_t(keep_last) || c.step == protected_step) continue;
    // Hide it first: a crash while deleting must not leave a listed, half-deleted checkpoint.
    const fs::path doomed =
        dir / (std::string(temporary_prefix) + "delete." + c.path.filename().string());
    detail::remove_tree(doomed);
    detail::rename_path(c.path, doomed);
    detail::remove_tree(doomed);
  }
}

/// Writes `state` as `dir/step_<state.step>` (creating `dir`), replacing an existing checkpoint
/// of the same step, then prunes to the newest `keep_last` (0 keeps all). Returns the path of the
/// new checkpoint. Throws config_error for states that cannot be saved and io_error (path and
/// reason) when the file system refuses; on an error no `step_N` is left half-written.
inline std::filesystem::path write_checkpoint(const std::filesystem::path& dir,
                                              const checkpoint_state& state, int keep_last) {
  namespace fs = std::filesystem;
  if (keep_last < 0)
    throw config_error("checkpoint keep_last must be >= 0 (0 keeps all): " +
                       std::to_string(keep_last));
  detail::check_saveable(state);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) detail::throw_io("cannot create checkpoint directory", dir, ec);

  const std::string name = step_dir_name(state.step);
  const fs::path final_path = dir / name;
  const fs::path temp_path = dir / (std::string(temporary_prefix) + name);
  detail::remove_tree(temp_path);  // a leftover from a crashed save of the same step
  fs::create_directory(temp_path, ec);
  if (ec) detail::throw_io("cannot create checkpoint directory", temp_path, ec);

  manifest m = detail::write_tensors_file(temp_path / tensors_file_name, state);
  // The manifest goes last: inside the temp dir its presence means tensors.bin is complete.
  detail::write_text_file(temp_path / manifest_file_name, manifest_to_json(m));
  detail::fsync_directory(temp_path);

  // Re-saving a step (a restarted run) replaces the old directory: move it aside, rename the new
  // one in, and only then delete the old one, so some copy of the step exists at every moment.
  const fs::path replaced = dir / (std::string(temporary_prefix) + "replaced." + name);
  const bool replacing = fs::exists(final_path, ec);
  if (replacing) {
    detail::remove_tree(replaced);
    detail::rename_path(final_path, replaced);
  }
  detail::rename_path(temp_path, final_path);
  detail::fsync_directory(dir);
  if (replacing) detail::remove_tree(replaced);

  prune_checkpoints(dir, keep_last, state.step);
  return final_path;
}

}  // namespace trainkit::checkpoint
