// trainkit/report/torchtitan_log.hpp — reads torchtitan's training log into a run_log.
//
// The lines, as pytorch/torchtitan (commit b5bcd76) logs them, each behind the logger's prefix
// "[titan] %(asctime)s - %(name)s - %(levelname)s - " (torchtitan/tools/logging.py line 21):
//   components/metrics.py line 527  f"step: {step:2}  loss: {global_avg_loss:8.5f}  grad_norm:
//       {grad_norm:7.4f}  memory: {max_reserved_gib:5.2f}GiB({max_reserved_pct:.2f}%)  tps:
//       {round(tps):,}  tflops: {tflops:,.2f}  mfu: {mfu:.2f}%"   (coloured with ANSI codes
//       unless disabled; "mfu: N/A" under quantization)
//   components/metrics.py line 570  f"validate step: {step:2}  loss: {loss:7.4f}  memory: ..."
//   components/checkpointer/dcp.py line 433  f"{checkpoint_phase.capitalize()} the checkpoint."
//   components/checkpointer/dcp.py line 491  f"Finished {checkpoint_phase} the checkpoint in
//       {time.monotonic() - begin:.2f} seconds."   (phase: saving, or staging when async)
//   trainer.py line 1022  f"Training starts at step {self.step + 1}"
//   components/metrics.py line 98  f"{device_type.upper()} capacity: {device_name} with ...GiB
//   memory"
// What the numbers mean: a step line is written every log_freq steps; tps and tflops are per
// device and cover the time since the previous step or validation line, so a checkpoint save
// (logged after its step line) slows the next line's tps and a validation does not. The
// timestamps see everything, so a step's wall time here is the time between two step lines
// (or the "Training starts" line) over the steps between them. The MFU is tflops over
// tools/utils.py's get_peak_flops for the device name (989 TFLOP/s for an H200).
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/report/detail/log_scan.hpp"
#include "trainkit/report/run_log.hpp"

namespace trainkit::report {

namespace detail {

/// Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (H. Hinnant's algorithm).
inline long long days_from_civil(long long y, unsigned m, unsigned d) noexcept {
  y -= m <= 2;
  const long long era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = unsigned(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (long long)doe - 719468;
}

/// A torchtitan line split into the logger's time (ms since 1970, nullopt without the prefix;
/// whole milliseconds, so differences are exact) and message.
struct titan_line {
  std::optional<long long> ms;
  std::string message;
};

/// "[titan] 2025-01-10 10:00:01,234 - root - INFO - msg" → {time, "msg"}; a line without the
/// prefix is all message.
inline titan_line split_titan_line(std::string_view raw) {
  titan_line out;
  const std::string line = strip_ansi(raw);
  std::string_view s = trim(line);
  scanner sc{s};
  if (sc.lit("[titan]")) {
    const auto y = sc.digits();
    std::optional<std::uint64_t> mo, d, h, mi, se, ms;
    if (y && sc.lit("-") && (mo = sc.digits()) && sc.lit("-") && (d = sc.digits()) &&
        (h = sc.digits()) && sc.lit(":") && (mi = sc.digits()) && sc.lit(":") &&
        (se = sc.digits()) && sc.lit(",") && (ms = sc.digits()) && *y < 10000 && *mo >= 1 &&
        *mo <= 12 && *d >= 1 && *d <= 31 && *h < 24 && *mi < 60 && *se < 61 && *ms < 1000) {
      out.ms = (days_from_civil((long long)*y, unsigned(*mo), unsigned(*d)) * 86400 +
                (long long)(*h * 3600 + *mi * 60 + *se)) *
                   1000 +
               (long long)*ms;
      // " - name - LEVEL - ": the message follows the third " - ".
      std::string_view rest = s.substr(sc.i);
      for (int k = 0; k < 3; ++k) {
        const auto at = rest.find(" - ");
        if (at == std::string_view::npos) {
          rest = {};
          break;
        }
        rest = rest.substr(at + 3);
      }
      out.message = std::string(trim(rest));
      return out;
    }
  }
  out.message = std::string(s);
  return out;
}

/// The number after `key` anywhere in `s` ("tps: 1,234" → 1234), or nullopt.
inline std::optional<double> titan_field(std::string_view s, std::string_view key) {
  const auto at = s.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  scanner sc{s, at + key.size()};
  return sc.number();
}

}  // namespace detail

/// True when `line` is a torchtitan step line (sniffing).
inline bool is_torchtitan_step_line(std::string_view line) {
  const auto l = detail::split_titan_line(line);
  detail::scanner sc{l.message};
  return sc.lit("step:") && sc.whole() && sc.lit("loss:") &&
         l.message.find("tps:") != std::string::npos;
}

/// torchtitan's log as a run_log; lines of no rule are counted in `skipped`. Throws format_error
/// when step lines carry no timestamps (the logger's prefix): then no step has a wall time.
inline run_log parse_torchtitan_log(std::span<const std::string> lines, const std::string& source) {
  run_log run;
  run.format = log_format::torchtitan;
  run.source = source;
  run.lines = lines.size();
  long long prev_ms = 0;        // time of the previous step line (or of "Training starts")
  std::uint64_t prev_step = 0;  // its step; the next line covers the steps after it
  bool have_prev = false;
  std::size_t untimed_steps = 0;     // step lines without a timestamp
  std::vector<std::size_t> pending;  // events since the last step line: timed in the next one
  for (std::size_t n = 0; n < lines.size(); ++n) {
    if (detail::trim(lines[n]).empty()) continue;
    const auto l = detail::split_titan_line(lines[n]);
    const std::string_view msg = l.message;
    detail::scanner sc{msg};
    if (sc.lit("step:")) {
      const auto step = sc.whole();
      const auto loss = sc.lit("loss:") ? sc.number() : std::nullopt;
      const auto tps = detail::titan_field(msg, "tps:");
      if (step && loss && tps) {
        if (!l.ms) {
          ++untimed_steps;
          ++run.skipped;
          continue;
        }
        if (have_prev && *step > prev_step && *l.ms >= prev_ms) {
          logged_step s;
          s.line = n + 1;
          s.m.step = *step;
          s.m.loss = *loss;
          s.covers = *step - prev_step;
          s.m.dt_ms = double(*l.ms - prev_ms) / double(s.covers);
          s.m.grad_norm = detail::titan_field(msg, "grad_norm:").value_or(0);
          s.log_tok_per_s = *tps;
          s.log_tflops = detail::titan_field(msg, "tflops:").value_or(NAN);
          const auto mfu = detail::titan_field(msg, "mfu:");  // nullopt for "N/A"
          s.log_mfu = mfu ? *mfu / 100 : NAN;
          s.memory_gib = detail::titan_field(msg, "memory:").value_or(NAN);
          detail::push_step(run, s);
          for (std::size_t e : pending) run.events[e].timed_in = run.steps.size() - 1;
        } else if (!have_prev) {
          run.warnings.push_back(source + ":" + std::to_string(n + 1) + ": step " +
                                 std::to_string(*step) +
                                 " has no earlier time to measure from (no \"Training starts\" "
                                 "line): left out");
        }
        pending.clear();
        prev_ms = *l.ms;
        prev_step = *step;
        have_prev = true;
        continue;
      }
      ++run.skipped;
      continue;
    }
    sc = {msg};
    if (sc.lit("validate step:")) {
      const auto step = sc.whole();
      const auto loss = sc.lit("loss:") ? sc.number() : std::nullopt;
      if (step && loss) {
        log_event e;
        e.kind = log_event::kind_t::eval;
        e.step = *step;
        e.line = n + 1;
        e.val_loss = *loss;
        run.events.push_back(e);
        pending.push_back(run.events.size() - 1);
        if (!run.steps.empty() && run.steps.back().m.step == *step)
          run.steps.back().m.val_loss = *loss;
        continue;
      }
    }
    if (msg == "Saving the checkpoint." || msg == "Staging the checkpoint." ||
        msg.starts_with("Saving the checkpoint (or staging")) {
      log_event e;
      e.kind = log_event::kind_t::checkpoint;
      e.step = have_prev ? prev_step : 0;
      e.line = n + 1;
      run.events.push_back(e);
      pending.push_back(run.events.size() - 1);
      continue;
    }
    sc = {msg};
    if (sc.lit("Finished saving the checkpoint") || sc.lit("Finished staging the checkpoint")) {
      const auto in = msg.rfind("in ");
      detail::scanner t{msg, in == std::string_view::npos ? msg.size() : in + 3};
      if (const auto s = t.number(); s && t.lit("seconds") && *s >= 0 && !run.events.empty() &&
                                     run.events.back().kind == log_event::kind_t::checkpoint) {
        run.events.back().ms = *s * 1000;
        continue;
      }
    }
    sc = {msg};
    if (sc.lit("Training starts at step ")) {
      if (const auto s = sc.whole(); s && *s >= 1 && l.ms) {
        prev_ms = *l.ms;
        prev_step = *s - 1;
        have_prev = true;
        continue;
      }
    }
    sc = {msg};
    if (sc.lit("Building device mesh with parallelism:")) {
      // The devices one step runs on: pp × dp_replicate × dp_shard × cp × tp (ep reuses them).
      double devices = 1;
      bool all = true;
      for (const char* key : {"pp=", "dp_replicate=", "dp_shard=", "cp=", "tp="}) {
        const auto v = detail::titan_field(msg, key);
        if (v && *v >= 1 && *v < 1e6)
          devices *= *v;
        else
          all = false;
      }
      if (all && devices < 1e9) {
        run.facts.devices = int(devices);
        continue;
      }
    }
    if (const auto at = msg.find(" capacity: "); at != std::string_view::npos) {
      const auto with = msg.rfind(" with ");
      if (with != std::string_view::npos && with > at) {
        run.facts.device = std::string(detail::trim(msg.substr(at + 11, with - at - 11)));
        continue;
      }
    }
    ++run.skipped;
  }
  if (run.steps.empty() && untimed_steps > 0)
    throw format_error(source +
                       ": torchtitan step lines without the logger's timestamps "
                       "(\"[titan] YYYY-MM-DD HH:MM:SS,mmm - ...\"): no step has a wall "
                       "time to report");
  return run;
}

}  // namespace trainkit::report
