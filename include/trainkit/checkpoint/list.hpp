// trainkit/checkpoint/list.hpp — finding the complete checkpoints in a checkpoint directory.
//
// Complete means: a directory named `step_NNNNNNNN` (so never a hidden `.tmp.*` one, which is a
// save in progress or the wreck of a crashed one) that contains a manifest.json. Whether its
// contents are intact is for loading to decide (CRC checks); listing only reads names.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "trainkit/checkpoint/detail/posix_file.hpp"
#include "trainkit/checkpoint/format.hpp"

namespace trainkit::checkpoint {

struct checkpoint_entry {
  std::uint64_t step = 0;
  std::filesystem::path path;  // the step_NNNNNNNN directory

  friend bool operator==(const checkpoint_entry&, const checkpoint_entry&) = default;
};

/// Complete checkpoints under `dir`, oldest step first. A missing `dir` has none; a `dir` that
/// exists but cannot be listed (not a directory, no permission) is an io_error.
inline std::vector<checkpoint_entry> list_checkpoints(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::vector<checkpoint_entry> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    if (ec) detail::throw_io("cannot access checkpoint directory", dir, ec);
    return out;
  }
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto step = parse_step_dir_name(it->path().filename().string());
    if (!step) continue;
    std::error_code file_ec;
    if (!it->is_directory(file_ec)) continue;
    if (!fs::is_regular_file(it->path() / manifest_file_name, file_ec)) continue;
    out.push_back({*step, it->path()});
  }
  if (ec) detail::throw_io("cannot list checkpoint directory", dir, ec);
  std::sort(out.begin(), out.end(),
            [](const checkpoint_entry& a, const checkpoint_entry& b) { return a.step < b.step; });
  return out;
}

}  // namespace trainkit::checkpoint
