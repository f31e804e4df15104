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
// Older generations, read too: 2024's train.py logged "wps: {round(wps):,}  mfu: {mfu:.2f}%"
// (words per second per device, no grad_norm or tflops) behind the prefix "%(asctime)s -
// %(name)s - %(levelname)s - " without "[titan]", and "Training starts at step 1, with local
// batch size B, global batch size G, sequence length T, ..." (the tokens of a step: G·T);
// checkpoint messages changed wording ("Saving checkpoint at step N.", "Finished saving the
// checkpoint (or staging if async is enabled)in X seconds."); garbage collection ("[GC] ... X
// seconds.") and profiler dumps ("Finished dumping profiler traces in X seconds") are pauses with a
// stated duration. The lines arrive through detail/log_lines.hpp: torchrun's "[rank0]:" and the
// logger's prefix are stripped there, the timestamp kept, and a step line every rank printed is
// read once.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/report/detail/log_lines.hpp"
#include "trainkit/report/detail/log_scan.hpp"
#include "trainkit/report/run_log.hpp"

namespace trainkit::report {

namespace detail {

/// The number after `key` anywhere in `s` ("tps: 1,234" → 1234), or nullopt.
inline std::optional<double> titan_field(std::string_view s, std::string_view key) {
  const auto at = s.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  scanner sc{s, at + key.size()};
  return sc.number();
}

/// Tokens per second per device: "tps:" (2025 on) or "wps:" (2024).
inline std::optional<double> titan_rate(std::string_view s) {
  if (auto v = titan_field(s, "tps:")) return v;
  return titan_field(s, "wps:");
}

}  // namespace detail

/// True when `line` is a torchtitan step line (sniffing).
inline bool is_torchtitan_step_line(std::string_view line) {
  detail::scanner sc{line};
  return sc.lit("step:") && sc.whole() && sc.lit("loss:") &&
         (line.find("tps:") != std::string_view::npos ||
          line.find("wps:") != std::string_view::npos);
}

/// torchtitan's log as a run_log; lines of no rule are counted in `skipped`. Throws format_error
/// when step lines carry no timestamps (the logger's prefix): then no step has a wall time.
inline run_log parse_torchtitan_log(const detail::normalised_log& log, const std::string& source) {
  run_log run;
  run.format = log_format::torchtitan;
  run.source = source;
  run.lines = log.total;
  run.other_ranks = log.other_ranks;
  run.rank = log.rank;
  run.facts.rank_tags = log.ranks_seen;
  long long prev_ms = 0;        // time of the previous step line (or of "Training starts")
  std::uint64_t prev_step = 0;  // its step; the next line covers the steps after it
  bool have_prev = false;
  std::size_t untimed_steps = 0;     // step lines without a timestamp
  std::vector<std::size_t> pending;  // events since the last step line: timed in the next one
  for (std::size_t n = 0; n < log.lines.size(); ++n) {
    const auto& l = log.lines[n];
    const std::string_view msg = l.text;
    detail::scanner sc{msg};
    if (sc.lit("step:")) {
      const auto step = sc.whole();
      std::optional<double> loss;
      if (sc.lit("loss:")) loss = sc.number();
      const auto tps = detail::titan_rate(msg);
      if (step && loss && tps) {
        if (have_prev && *step == prev_step && run.last_step_index + 1 == n) {
          ++run.repeats;  // another rank's copy of the line just read (no rank tags)
          run.last_step_index = n;
          continue;
        }
        if (!l.ms) {
          ++untimed_steps;
          ++run.skipped;
          continue;
        }
        if (have_prev && *step > prev_step && *l.ms >= prev_ms) {
          logged_step s;
          s.line = l.line;
          s.stamp_ms = double(*l.ms);
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
          detail::push_step(run, s, n);
          for (std::size_t e : pending) run.events[e].timed_in = run.steps.size() - 1;
        } else if (!have_prev) {
          if (run.steps.empty() && !run.untimed_first_step) run.untimed_first_step = *step;
          run.warnings.push_back(source + ":" + std::to_string(l.line) + ": step " +
                                 std::to_string(*step) +
                                 " has no earlier time to measure from (no \"Training starts\" "
                                 "line): left out");
        }
        pending.clear();
        prev_ms = *l.ms;
        prev_step = *step;
        have_prev = true;
        run.last_step_index = n;
        continue;
      }
      ++run.skipped;
      continue;
    }
    sc = {msg};
    if (sc.lit("validate step:")) {
      const auto step = sc.whole();
      std::optional<double> loss;
      if (sc.lit("loss:")) loss = sc.number();
      if (step && loss) {
        log_event e;
        e.kind = log_event::kind_t::eval;
        e.step = *step;
        e.line = l.line;
        e.val_loss = *loss;
        run.events.push_back(e);
        pending.push_back(run.events.size() - 1);
        if (!run.steps.empty() && run.steps.back().m.step == *step)
          run.steps.back().m.val_loss = *loss;
        continue;
      }
    }
    if ((msg.starts_with("Saving ") || msg.starts_with("Staging ")) &&
        msg.find("checkpoint") != std::string_view::npos && !msg.starts_with("Saving the last")) {
      // "Saving the checkpoint.", "Saving the checkpoint (or staging if async is enabled).",
      // "Staging the checkpoint.", "Saving checkpoint at step N." (generations of dcp.py)
      log_event e;
      e.kind = log_event::kind_t::checkpoint;
      const auto at = msg.find("at step ");
      detail::scanner st{msg, at == std::string_view::npos ? msg.size() : at + 8};
      const auto step_said = st.whole();
      e.step = step_said ? *step_said : have_prev ? prev_step : 0;
      e.line = l.line;
      run.events.push_back(e);
      pending.push_back(run.events.size() - 1);
      continue;
    }
    sc = {msg};
    if (sc.lit("[GC]") || sc.lit("Dumping profiler traces") ||
        sc.lit("Finished dumping profiler traces")) {
      // "[GC] Peforming periodical GC collection. 0.06 seconds." (tools/utils.py GarbageCollection)
      // "Dumping profiler traces at step N" / "Finished dumping profiler traces in X seconds"
      // (tools/profiling.py): pauses with a stated duration, timed in the next step line.
      const bool gc = msg.starts_with("[GC]");
      const bool start = msg.starts_with("Dumping");
      std::optional<double> secs;
      if (!start) {
        const auto sec = msg.rfind(" seconds");
        std::size_t from = sec == std::string_view::npos ? 0 : sec;
        while (from > 0 &&
               (std::isdigit(static_cast<unsigned char>(msg[from - 1])) || msg[from - 1] == '.'))
          --from;
        if (sec != std::string_view::npos) secs = detail::to_number(msg.substr(from, sec - from));
      }
      if (gc || !start) {
        log_event e;
        e.kind = log_event::kind_t::pause;
        e.what = gc ? "garbage collection" : "profiler trace dump";
        e.step = have_prev ? prev_step : 0;
        e.line = l.line;
        if (secs && *secs >= 0) e.ms = *secs * 1000;
        run.events.push_back(e);
        pending.push_back(run.events.size() - 1);
      }
      continue;
    }
    sc = {msg};
    if (sc.lit("Finished saving the checkpoint") || sc.lit("Finished staging the checkpoint") ||
        sc.lit("Finished saving checkpoint")) {
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
      // 2024: "Training starts at step 1, with local batch size 5, global batch size 20,
      // sequence length 8192, total steps 100 (warmup 200)"
      const auto gbs = detail::titan_field(msg, "global batch size");
      const auto seq = detail::titan_field(msg, "sequence length");
      if (gbs && seq && *gbs >= 1 && *seq >= 1 && *gbs * *seq < 1e15) {
        run.facts.tokens_per_step = std::uint64_t(*gbs * *seq);
        if (*seq < 1 << 30) run.facts.seq = int(*seq);
      }
      if (const auto s = sc.whole(); s && *s >= 1 && l.ms) {
        prev_ms = *l.ms;
        prev_step = *s - 1;
        have_prev = true;
        continue;
      }
    }
    sc = {msg};
    // Mid 2024 - 2025: logger.info(f"Building {len(dims)}-D device mesh with {names}, {dims}")
    // (parallel_dims.py), e.g. "Building 2-D device mesh with ['dp_shard', 'tp'], [4, 2]": the
    // devices are the product of the dims.
    if (sc.lit("Building") && sc.whole() && sc.lit("-D device mesh with")) {
      const auto names_end = msg.find(']');
      const auto open = names_end == std::string_view::npos ? names_end : msg.find('[', names_end);
      const auto close = open == std::string_view::npos ? open : msg.find(']', open);
      if (close != std::string_view::npos) {
        double devices = 1;
        bool any = false, all = true;
        std::string_view dims = msg.substr(open + 1, close - open - 1);
        while (!dims.empty()) {
          const auto comma = dims.find(',');
          const auto v = detail::to_number(detail::trim(dims.substr(0, comma)));
          if (v && *v >= 1 && *v < 1e6 && *v == std::floor(*v)) {
            devices *= *v;
            any = true;
          } else {
            all = false;
          }
          dims = comma == std::string_view::npos ? std::string_view{} : dims.substr(comma + 1);
        }
        if (any && all && devices < 1e9) {
          run.facts.devices = int(devices);
          run.facts.devices_from = "torchtitan's device mesh line";
          continue;
        }
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
        run.facts.devices_from = "torchtitan's device mesh line";
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

/// torchtitan's log from raw lines.
inline run_log parse_torchtitan_log(std::span<const std::string> lines, const std::string& source) {
  return parse_torchtitan_log(detail::normalise_log(lines), source);
}

}  // namespace trainkit::report
