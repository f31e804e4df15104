// trainkit/trainer/metrics.hpp — one step's measurements as a line of the JSONL metrics file.
//
// Each optimizer step is one JSON object per line (docs/architecture.md, "Accounting and MFU";
// the file is written by sinks/jsonl.hpp, read back by trainkit/report/metrics_reader.hpp). The
// phase fields, named by the phase table, are the parts of `dt_ms` during which the loop was
// *blocked* on that phase; together with `other_ms` they add up to `dt_ms` exactly.
//
// A fresh run's file opens with one run header line, {"run":{...}} (to_json_header): the
// trainer_config::meta entries (model, device, arch, optimizer, attention, ...) and what an
// honest per-device MFU needs (world size, tokens per step, FLOPs per token, the device and the
// peak the step lines' mfu used). Readers that predate it skip nothing: metrics_reader.hpp reads
// it, and files without it are still read.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>

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

/// What the run header states (docs/architecture.md, "Metrics").
struct run_header {
  std::map<std::string, std::string> meta;  // trainer_config::meta: model, device, attention, ...
  int world_size = 1;                       // ranks (data-parallel processes)
  std::uint64_t tokens_per_step = 0;        // one optimizer step, all ranks
  int seq_len = 0;                          // T
  double flops_per_token = 0;               // the model's count (6·N + 12·L·C·T)
  std::string device;                       // the device name the peak was looked up for
  double peak_tflops = 0;                   // one device's dense peak the lines' mfu uses; 0: none
  std::string dtype;                        // "bf16" or "f32"
};

namespace detail {

/// `s` as a JSON string literal.
inline std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if ((unsigned char)c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", (unsigned)(unsigned char)c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace detail

/// The run header line (no trailing newline): {"run":{meta..., "world_size":N, ...}}. The meta
/// entries come first; the measured keys after them win over a meta entry of the same name. The
/// step lines' "tflops" is all ranks' together and their "mfu" is per device: tflops / world_size
/// over one device's peak.
/// The header's "mfu_per" since the step lines' mfu is per device (earlier headers of the same
/// release said "all ranks' FLOP/s over one device's peak"); report/metrics_reader.hpp reads it.
inline constexpr std::string_view mfu_per_device_text =
    "device: all ranks' FLOP/s / world_size / one device's peak";

inline std::string to_json_header(const run_header& h) {
  std::map<std::string, std::string> fields;  // key -> JSON value
  for (const auto& [k, v] : h.meta) fields[k] = detail::json_string(v);
  auto num = [&](const char* key, double v, const char* fmt) {
    std::string s;
    detail::append_json_number(s, key, v, fmt);
    fields[key] = s.substr(s.find(':') + 1);
  };
  num("world_size", h.world_size, "%.0f");
  num("tokens_per_step", double(h.tokens_per_step), "%.0f");
  num("seq_len", h.seq_len, "%.0f");
  num("flops_per_token", h.flops_per_token, "%.10g");
  num("peak_tflops", h.peak_tflops > 0 ? h.peak_tflops : NAN, "%.6g");
  fields["device_name"] = detail::json_string(h.device);
  fields["dtype"] = detail::json_string(h.dtype);
  fields["mfu_per"] = detail::json_string(std::string(mfu_per_device_text));
  std::string s = "{\"run\":{";
  bool first = true;
  for (const auto& [k, v] : fields) {
    if (!first) s += ',';
    s += detail::json_string(k);
    s += ':';
    s += v;
    first = false;
  }
  return s + "}}";
}

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
