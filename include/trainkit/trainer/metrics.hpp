// trainkit/trainer/metrics.hpp — one step's measurements as a line of the JSONL metrics file.
//
// Each optimizer step is one JSON object per line (docs/architecture.md, "Accounting and MFU";
// the file is written by sinks/jsonl.hpp, read back by trainkit/report/metrics_reader.hpp). The
// phase fields, named by the phase table, are the parts of `dt_ms` during which the loop was
// *blocked* on that phase; together with `other_ms` they add up to `dt_ms` exactly.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

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

/// One JSON object (no trailing newline); the phase keys come from the phase table.
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

}  // namespace trainkit
