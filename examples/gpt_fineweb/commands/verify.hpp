// commands/verify.hpp — `gpt_fineweb verify DIR`: checks every checkpoint in a checkpoint
// directory.
//
// Each `step_N` directory is verified the way resume would trust it (the manifest's fields and
// its own checksum, the step against the directory name, tensors.bin's size and every tensor's
// CRC-32C; trainkit::checkpoint::verify_checkpoint) and gets one line: valid or invalid and
// why. Hidden `.tmp.*` entries (saves in progress or crashed) are counted, not checked. Nothing
// is written. Exit 0 when at least one checkpoint is valid; otherwise the caller's error path
// (one line, exit 2).
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <trainkit/checkpoint/format.hpp>
#include <trainkit/checkpoint/read.hpp>
#include <trainkit/checkpoint/write.hpp>
#include <trainkit/core/error.hpp>

#include "../command.hpp"

namespace gpt_fineweb {

struct verify_options {
  std::string dir;
};

/// Prints one line per checkpoint of `o.dir` to `out`, newest last, then a summary; returns 0
/// when one is valid. Throws config_error (exit 2) when the directory is missing or holds no
/// valid checkpoint.
inline int run_verify(const verify_options& o, std::ostream& out) {
  namespace fs = std::filesystem;
  namespace ck = trainkit::checkpoint;
  std::error_code ec;
  if (!fs::is_directory(o.dir, ec))
    throw trainkit::config_error("verify: " + o.dir + " is not a checkpoint directory");
  struct found {
    std::uint64_t step;
    fs::path path;
  };
  std::vector<found> steps;
  int temporaries = 0;
  for (fs::directory_iterator it(o.dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (const auto step = ck::parse_step_dir_name(name)) steps.push_back({*step, it->path()});
    if (!ck::temporary_kind(name).empty()) ++temporaries;
  }
  if (ec) throw trainkit::io_error("verify: cannot list " + o.dir + ": " + ec.message());
  std::sort(steps.begin(), steps.end(),
            [](const found& a, const found& b) { return a.step < b.step; });

  int valid = 0;
  std::string newest;
  for (const auto& s : steps) {
    const std::string name = s.path.filename().string();
    try {
      const ck::manifest m = ck::verify_checkpoint(s.path);
      std::uint64_t bytes = 0;
      for (const auto& t : m.tensors) bytes += t.bytes;
      out << name << "  valid    " << m.tensors.size() << " tensors, " << bytes << " bytes"
          << (m.version < 2 ? " (version 1 manifest, no manifest checksum)" : "") << "\n";
      ++valid;
      newest = name;
    } catch (const trainkit::format_error& e) {
      out << name << "  INVALID  " << e.what() << "\n";
    } catch (const trainkit::io_error& e) {
      out << name << "  INVALID  " << e.what() << "\n";
    }
  }
  out << valid << " of " << steps.size() << " checkpoints valid";
  if (valid > 0) out << "; resume would use " << newest;
  if (temporaries > 0)
    out << "; " << temporaries << " temporary entr" << (temporaries == 1 ? "y" : "ies")
        << " of interrupted saves (removed by the next run)";
  out << "\n";
  if (valid == 0)
    throw trainkit::config_error("verify: " + o.dir + " holds no valid checkpoint (" +
                                 std::to_string(steps.size()) + " checked)");
  return 0;
}

class verify_command final : public command {
 public:
  std::string_view name() const override { return "verify"; }
  std::string_view summary() const override {
    return "Check every checkpoint in a directory (CRC-32C)";
  }
  void add_options(CLI::App& app) override {
    app.add_option("dir", o_.dir, "checkpoint directory (--ckpt-dir)")->required();
  }
  int run(std::ostream& out) override { return run_verify(o_, out); }

 private:
  verify_options o_;
};

}  // namespace gpt_fineweb
