// trainkit/trainer/metrics.hpp — one step's measurements and the JSONL metrics file.
//
// Each optimizer step appends one JSON object per line (docs/architecture.md, "Metrics"). The phase
// fields are the parts of `dt_ms` during which the loop was *blocked* on that phase; together with
// `other_ms` they add up to `dt_ms` exactly, so a reader can tell where the time went. Lines are
// flushed as they are written, so a crashed run's file is still a valid report input.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "trainkit/core/error.hpp"
#include "trainkit/trainer/step_metrics.hpp"

namespace trainkit {

namespace detail {

inline void append_json_number(std::string& out, const char* key, double v, const char* fmt) {
  out += '"';
  out += key;
  out += "\":";
  if (!std::isfinite(v)) {
    out += "null";  // JSON has no NaN/Inf
    return;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  out += buf;
}

}  // namespace detail

/// One JSON object (no trailing newline) with DESIGN.md's field names.
inline std::string to_json_line(const step_metrics& m) {
  std::string s = "{";
  auto num = [&](const char* key, double v, const char* fmt = "%.6g") {
    if (s.size() > 1) s += ',';
    detail::append_json_number(s, key, v, fmt);
  };
  num("step", double(m.step), "%.0f");
  num("loss", m.loss, "%.6f");
  num("lr", m.lr, "%.6g");
  num("grad_norm", m.grad_norm, "%.6g");
  num("tokens", double(m.tokens), "%.0f");
  num("dt_ms", m.dt_ms, "%.3f");
  for (const phase_info& p : phase_table) num(p.json_key, m.*p.field, "%.3f");
  num("tok_per_s", m.tok_per_s, "%.1f");
  num("tflops", m.tflops, "%.6g");
  num("mfu", m.mfu, "%.6g");
  if (!std::isnan(m.mfu_calibrated)) num("mfu_calibrated", m.mfu_calibrated, "%.6g");
  if (!std::isnan(m.val_loss)) num("val_loss", m.val_loss, "%.6f");
  s += '}';
  return s;
}

/// Appends JSON lines to a file, flushing each so a crash loses at most the line being written.
class jsonl_sink {
 public:
  jsonl_sink() = default;

  /// Opens `path` (truncating, or appending when `append` — used by resumed runs).
  jsonl_sink(const std::filesystem::path& path, bool append) : path_(path) {
    if (path.has_parent_path()) {
      std::error_code ec;
      std::filesystem::create_directories(path.parent_path(), ec);
    }
    const bool needs_newline = append && ends_mid_line(path);
    file_.open(path, append ? std::ios::app : std::ios::trunc);
    if (!file_)
      throw io_error("cannot open metrics file " + path.string() + ": " + std::strerror(errno));
    // A crash can leave half a line; ending it keeps the resumed run's first line parseable.
    if (needs_newline) file_ << '\n';
  }

  bool is_open() const noexcept { return file_.is_open(); }

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
};

}  // namespace trainkit
