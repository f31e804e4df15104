// trainkit/checkpoint/write.hpp — writing one checkpoint crash-safely, then pruning old ones.
//
// The protocol (docs/formats_checkpoint.md): write tensors.bin and then manifest.json into the
// hidden `.tmp.step_N`, fsync both and the directory, rename it to `step_N`, fsync the parent.
// A crash at any point leaves either no `step_N` or a complete one, so resume never sees half a
// checkpoint. Only after the rename are checkpoints beyond the newest `keep_last` removed, each
// first renamed to a hidden name so a crash mid-deletion cannot leave a listed, half-deleted
// directory. A save that fails removes its own temporary directory before the error leaves
// `write_checkpoint`, so a full disk does not stay full of trainkit's wreck; the wrecks of
// processes that died mid-save (`.tmp.step_N`, `.tmp.delete.step_N`, `.tmp.replaced.step_N`,
// only these names) are removed before every save and when a checkpointer is constructed
// (`prepare_checkpoint_dir`, which also checks that the directory can be written, so a directory
// that cannot be written fails before step 1 rather than at the first save). `write_checkpoint` is
// a free function so the synchronous checkpointer and the asynchronous one (which runs it on a
// worker thread over a host snapshot) share it.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <future>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "trainkit/checkpoint/concepts.hpp"
#include "trainkit/checkpoint/detail/chunked_writer.hpp"
#include "trainkit/checkpoint/detail/dir_lock.hpp"
#include "trainkit/checkpoint/detail/posix_file.hpp"
#include "trainkit/checkpoint/format.hpp"
#include "trainkit/checkpoint/list.hpp"
#include "trainkit/core/crc32c.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/utf8.hpp"

namespace trainkit::checkpoint {

namespace detail {

// A name or meta string that is not valid UTF-8 would make a manifest no reader accepts
// (core/utf8.hpp).
inline void check_utf8(std::string_view s, const std::string& what) {
  if (const auto at = find_invalid_utf8(s))
    throw config_error(what + " is not valid UTF-8 (byte " + std::to_string(*at) + ": '" +
                       escaped_for_message(s) +
                       "'); checkpoint manifests are JSON, whose strings must be UTF-8");
}

// Rejects states that cannot be written: device tensors (need the CUDA checkpointer), duplicate
// or empty names, null data, and names or meta strings that are not UTF-8.
inline void check_saveable(const checkpoint_state& state) {
  for (const auto& [key, value] : state.meta) {
    check_utf8(key, "checkpoint meta key '" + escaped_for_message(key) + "'");
    check_utf8(value, "checkpoint meta \"" + key + "\" value");
  }
  std::set<std::string> names;
  for (const auto& t : state.tensors) {
    check_utf8(t.name, "checkpoint tensor name '" + escaped_for_message(t.name) + "'");
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

// When the tensors lie in one block-aligned buffer exactly where tensors.bin puts them (the
// asynchronous checkpointer's staging area is laid out so), that buffer is the file's image:
// returns its start, else nullptr. The padding between tensors is then written as it is in the
// buffer (readers never look at it; staging memory starts zeroed and is only written at the
// tensors' places).
inline const std::byte* file_image(const checkpoint_state& state, const manifest& m) {
  const std::byte* base = nullptr;
  for (std::size_t i = 0; i < state.tensors.size(); ++i) {
    if (m.tensors[i].bytes == 0) continue;
    const auto* at = static_cast<const std::byte*>(state.tensors[i].data);
    if (base == nullptr) base = at - m.tensors[i].offset;
    if (at != base + m.tensors[i].offset) return nullptr;
  }
  if (base == nullptr || reinterpret_cast<std::uintptr_t>(base) % chunked_writer::block != 0)
    return nullptr;
  return base;
}

// Writes the tensors at 64-byte aligned offsets (in aligned chunks, past the page cache where the
// file system allows: chunked_writer.hpp) and returns the manifest describing them. The
// CRCs are computed on a second thread while this one writes: both only read the tensors, and
// CRC-32C at ~1 GB/s would otherwise add about a third to a save that writes at disk speed.
// (With both launch flags libstdc++ falls back to computing them in `get()` if no thread can be
// started, rather than throwing std::system_error.)
inline manifest write_tensors_file(const std::filesystem::path& file,
                                   const checkpoint_state& state) {
  std::future<std::vector<std::uint32_t>> crcs =
      std::async(std::launch::async | std::launch::deferred, [&state] {
        std::vector<std::uint32_t> out;
        for (const auto& t : state.tensors) out.push_back(crc32c(t.data, t.bytes()));
        return out;
      });
  manifest m;
  m.step = state.step;
  m.meta = state.meta;
  chunked_writer out(file);  // O_DIRECT where the file system takes it (chunked_writer.hpp)
  std::uint64_t offset = 0;
  for (const auto& t : state.tensors) {
    const std::uint64_t aligned =
        (offset + tensor_alignment - 1) / tensor_alignment * tensor_alignment;
    m.tensors.push_back({t.name, t.type, t.shape, aligned, t.bytes(), 0});
    offset = aligned + t.bytes();
  }
  if (const std::byte* image = file_image(state, m)) {
    out.append_in_place(image, std::size_t(offset));  // one write, straight from the image
  } else {
    std::uint64_t at = 0;
    for (std::size_t i = 0; i < state.tensors.size(); ++i) {
      out.append_zeros(std::size_t(m.tensors[i].offset - at));
      out.append(state.tensors[i].data, m.tensors[i].bytes);
      at = m.tensors[i].offset + m.tensors[i].bytes;
    }
  }
  out.finish();
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

/// The temporary names trainkit itself creates in a checkpoint directory, and nothing else:
/// `.tmp.step_N` (a save in progress), `.tmp.delete.step_N` (a pruned checkpoint being deleted),
/// `.tmp.replaced.step_N` (the previous copy of a step being re-saved) and `.tmp.probe.<pid>`
/// (the writability probe). Returns the kind ("step", "delete", "replaced", "probe") or empty.
inline std::string_view temporary_kind(std::string_view name) {
  if (name.substr(0, temporary_prefix.size()) != temporary_prefix) return {};
  const std::string_view rest = name.substr(temporary_prefix.size());
  if (parse_step_dir_name(rest)) return "step";
  for (const std::string_view kind : {"delete", "replaced"}) {
    if (rest.size() > kind.size() && rest.substr(0, kind.size()) == kind &&
        rest[kind.size()] == '.' && parse_step_dir_name(rest.substr(kind.size() + 1)))
      return kind;
  }
  constexpr std::string_view probe = "probe.";
  if (rest.size() > probe.size() && rest.substr(0, probe.size()) == probe &&
      rest.substr(probe.size()).find_first_not_of("0123456789") == std::string_view::npos)
    return "probe";
  return {};
}

/// Removes the temporary folders (and probe files) crashed or failed saves left in `dir`; see
/// `temporary_kind` for the names. A `.tmp.replaced.step_N` whose `step_N` is missing is the only
/// copy of that step (the crash came between moving it aside and renaming the new one in), so it
/// is renamed back instead. A temporary folder whose writer is alive — another process (or
/// checkpointer) saving or pruning in `dir` right now, which holds a lock on it (dir_lock.hpp) —
/// is left alone. Returns the names removed or restored; a missing `dir` has none.
inline std::vector<std::string> remove_stale_temporaries(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> done;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return done;
  std::vector<fs::path> stale;  // collected first: deleting while iterating may skip entries
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (!temporary_kind(it->path().filename().string()).empty()) stale.push_back(it->path());
  if (ec) detail::throw_io("cannot list checkpoint directory", dir, ec);
  std::sort(stale.begin(), stale.end());
  for (const fs::path& p : stale) {
    const std::string name = p.filename().string();
    // Held while it is removed: a writer that locks it after that finds it gone (still_at).
    const std::optional<detail::dir_lock> unused = detail::dir_lock::try_lock(p);
    if (!unused) continue;  // its writer is alive
    if (temporary_kind(name) == "replaced") {
      const fs::path original =
          dir / name.substr(temporary_prefix.size() + std::string_view("replaced.").size());
      if (!fs::exists(original, ec)) {
        detail::rename_path(p, original);
        done.push_back(name + " (restored as " + original.filename().string() + ")");
        continue;
      }
    }
    detail::remove_tree(p);
    done.push_back(name);
  }
  return done;
}

/// Checks before training that checkpoints can be written to `dir`: `dir`, or (when it does not
/// exist yet) its nearest existing parent, must be a directory in which a file can be created.
/// Creates nothing that outlives the call (the probe file is removed). io_error naming the
/// directory and the reason otherwise.
inline void check_checkpoint_dir_writable(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path at = dir.empty() ? fs::path(".") : dir;
  while (!fs::exists(at, ec)) {
    if (ec) detail::throw_io("cannot access checkpoint directory", at, ec);
    const fs::path parent = at.parent_path();
    if (parent.empty() || parent == at) {
      at = ".";
      break;
    }
    at = parent;
  }
  if (!fs::is_directory(at, ec))
    throw io_error("checkpoint directory '" + dir.string() + "': '" + at.string() +
                   "' exists and is not a directory");
  const fs::path probe =
      at / (std::string(temporary_prefix) + "probe." + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw io_error("checkpoint directory '" + dir.string() + "' is not writable ('" + at.string() +
                   "': " + std::strerror(errno) + ")");
  const bool wrote = ::write(fd, "x", 1) == 1;
  const int err = errno;
  ::close(fd);
  ::unlink(probe.c_str());
  if (!wrote)
    throw io_error("checkpoint directory '" + dir.string() + "' is not writable ('" + at.string() +
                   "': " + std::strerror(err) + ")");
}

/// What a checkpointer does when it is constructed: remove the wrecks of earlier crashed runs
/// (returned, for a warning) and check that `dir` is writable.
inline std::vector<std::string> prepare_checkpoint_dir(const std::filesystem::path& dir) {
  check_checkpoint_dir_writable(dir);
  return remove_stale_temporaries(dir);
}

/// Removes complete checkpoints in `dir` beyond the newest `keep_last` (0 keeps all), never the
/// one for `protected_step`, and the temporaries of crashed saves (remove_stale_temporaries;
/// saves are serial, so none can still be in progress).
inline void prune_checkpoints(const std::filesystem::path& dir, int keep_last,
                              std::uint64_t protected_step) {
  namespace fs = std::filesystem;
  remove_stale_temporaries(dir);
  if (keep_last <= 0) return;

  std::vector<checkpoint_entry> all = list_checkpoints(dir);
  std::sort(all.begin(), all.end(),
            [](const checkpoint_entry& a, const checkpoint_entry& b) { return a.step > b.step; });
  for (std::size_t i = 0; i < all.size(); ++i) {
    const checkpoint_entry& c = all[i];
    if (i < std::size_t(keep_last) || c.step == protected_step) continue;
    // Hide it first: a crash while deleting must not leave a listed, half-deleted checkpoint.
    // Locked first, so that under its hidden name it is known to be in use (the lock stays with
    // the directory across the rename).
    const fs::path doomed =
        dir / (std::string(temporary_prefix) + "delete." + c.path.filename().string());
    if (!detail::dir_lock::try_lock(doomed)) continue;  // another process is deleting it already
    detail::remove_tree(doomed);
    const std::optional<detail::dir_lock> deleting = detail::dir_lock::try_lock(c.path);
    if (!deleting) continue;  // another process is pruning (or replacing) it
    detail::rename_path(c.path, doomed);
    detail::remove_tree(doomed);
  }
}

/// Creates the temporary directory of a save and locks it (dir_lock.hpp). Stale temporaries have
/// just been removed, so one that exists already belongs to a live process saving the same step
/// into the same directory: io_error. Retries when a cleanup removed it before the lock was taken.
inline detail::dir_lock create_locked_temporary(const std::filesystem::path& temp_path) {
  namespace fs = std::filesystem;
  for (int attempt = 0;; ++attempt) {
    std::error_code ec;
    if (!fs::create_directory(temp_path, ec)) {
      if (ec) detail::throw_io("cannot create checkpoint directory", temp_path, ec);
      throw io_error("cannot save into '" + temp_path.parent_path().string() + "': '" +
                     temp_path.filename().string() +
                     "' is in use by another process saving the same step there right now");
    }
    detail::dir_lock lock = detail::dir_lock::lock(temp_path);
    if (lock.still_at(temp_path)) return lock;
    if (attempt == 3)
      throw io_error("cannot save into '" + temp_path.string() +
                     "': it keeps being removed by another process");
  }
}

namespace detail {

/// Renames the complete temporary `dir/.tmp.<name>` to `dir/<name>` and makes the rename durable.
/// Re-saving a step (a restarted run) replaces the old directory: move it aside, rename the new
/// one in, and only then delete the old one, so some copy of the step exists at every moment.
inline void commit_temporary(const std::filesystem::path& dir, const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path final_path = dir / name;
  const fs::path temp_path = dir / (std::string(temporary_prefix) + name);
  const fs::path replaced = dir / (std::string(temporary_prefix) + "replaced." + name);
  std::error_code ec;
  const bool replacing = fs::exists(final_path, ec);
  std::optional<dir_lock> replacing_lock;  // keeps the old copy ours under its new name
  if (replacing) {
    remove_tree(replaced);
    replacing_lock = dir_lock::lock(final_path);
    rename_path(final_path, replaced);
  }
  rename_path(temp_path, final_path);
  fsync_directory(dir);
  if (replacing) remove_tree(replaced);
}

}  // namespace detail

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

  remove_stale_temporaries(dir);  // crashed saves' wrecks hold space this save may need

  const std::string name = step_dir_name(state.step);
  const fs::path final_path = dir / name;
  const fs::path temp_path = dir / (std::string(temporary_prefix) + name);
  const detail::dir_lock writing = create_locked_temporary(temp_path);
  try {
    manifest m = detail::write_tensors_file(temp_path / tensors_file_name, state);
    // The manifest goes last: inside the temp dir its presence means tensors.bin is complete.
    detail::write_text_file(temp_path / manifest_file_name, manifest_to_json(m));
    detail::fsync_directory(temp_path);
  } catch (...) {
    std::error_code ignored;  // the write's error is the one to report
    fs::remove_all(temp_path, ignored);
    throw;
  }

  detail::commit_temporary(dir, name);
  prune_checkpoints(dir, keep_last, state.step);
  return final_path;
}

}  // namespace trainkit::checkpoint
