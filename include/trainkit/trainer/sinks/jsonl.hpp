// trainkit/trainer/sinks/jsonl.hpp — the JSONL metrics file: one line per step.
//
// Each step is appended as `to_json_line` writes it (trainer/metrics.hpp; docs/architecture.md,
// "Metrics") and flushed at once, so a crashed run's file is still a valid report input; a run
// resumed after such a crash appends to the same file, first ending a line the crash cut off.
// A fresh file (not appended to, or empty) opens with the run header line (to_json_header).
#pragma once

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "trainkit/core/error.hpp"
#include "trainkit/trainer/metrics.hpp"
#include "trainkit/trainer/report.hpp"
#include "trainkit/trainer/sinks/concepts.hpp"

namespace trainkit {

class jsonl_sink {
 public:
  jsonl_sink() = default;  // writes nothing

  /// Opens `path` (truncating, or appending when `append` — used by resumed runs).
  jsonl_sink(const std::filesystem::path& path, bool append) : path_(path) {
    if (path.has_parent_path()) {
      std::error_code ec;
      std::filesystem::create_directories(path.parent_path(), ec);
    }
    const bool needs_newline = append && ends_mid_line(path);
    std::error_code size_ec;
    fresh_ = !append || !std::filesystem::exists(path, size_ec) ||
             std::filesystem::file_size(path, size_ec) == 0;
    file_.open(path, append ? std::ios::app : std::ios::trunc);
    if (!file_)
      throw io_error("cannot open metrics file " + path.string() + ": " + std::strerror(errno));
    // A crash can leave half a line; ending it keeps the resumed run's first line parseable.
    if (needs_newline) file_ << '\n';
  }

  bool is_open() const noexcept { return file_.is_open(); }
  /// Whether the file had no lines when opened: a fresh run's, which gets the run header.
  bool fresh() const noexcept { return file_.is_open() && fresh_; }

  /// Writes the run header line when the file is fresh (a resumed run's file keeps its own).
  void write_header(const run_header& h) {
    if (fresh()) write(to_json_header(h));
    fresh_ = false;
  }

  void on_step(const step_metrics& m) { write(to_json_line(m)); }
  void on_end(const run_summary&) noexcept {}  // every line is flushed as it is written

  /// Appends one line (no trailing newline in `line`) and flushes it.
  void write(const std::string& line) {
    if (!file_.is_open()) return;
    file_ << line << '\n';
    file_.flush();
    if (!file_) throw io_error("cannot write metrics file " + path_.string());
  }

 private:
  static bool ends_mid_line(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in || in.tellg() <= 0) return false;
    in.seekg(-1, std::ios::end);
    return in.get() != '\n';
  }

  std::filesystem::path path_;
  std::ofstream file_;
  bool fresh_ = false;
};

static_assert(step_sink<jsonl_sink>);

}  // namespace trainkit
