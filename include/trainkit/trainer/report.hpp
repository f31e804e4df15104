// trainkit/trainer/report.hpp — the end-of-run summary: where the time went and why.
//
// From the per-step metrics of a run it computes the median and p95 step time, throughput, MFU,
// the share of each blocking phase and a one-line verdict with its evidence. The first step is
// reported separately (warm-up) and left out of the steady-state figures, so allocation and
// first-touch costs cannot blur them the way compile warm-up blurred the seed run's first steps.
// MFU is stated against the device's dense peak (core/device_info.hpp, or one the caller gives)
// and, when calibration measured one, against the GEMM rate this machine actually reaches. The
// text names config fields and policies, never a program's flags; report/run_analysis.hpp
// explains runs read from other programs' logs in the same words.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "trainkit/trainer/metrics.hpp"

namespace trainkit {

enum class bottleneck { compute, input, communication, checkpoint, host, warmup, eval, unknown };

inline const char* bottleneck_name(bottleneck b) noexcept {
  switch (b) {
    case bottleneck::compute:
      return "compute-bound";
    case bottleneck::input:
      return "input-bound";
    case bottleneck::communication:
      return "communication-bound";
    case bottleneck::checkpoint:
      return "checkpoint-bound";
    case bottleneck::host:
      return "host-bound";
    case bottleneck::warmup:
      return "warm-up dominated";
    case bottleneck::eval:
      return "eval-bound";
    case bottleneck::unknown:
      return "unknown";
  }
  return "unknown";
}

/// Thresholds of the verdict: a phase that blocks the loop for more than this share of the
/// steady-state time is called the bottleneck.
struct verdict_thresholds {
  double input_share = 0.10;
  double comm_share = 0.10;  // waiting for the gradient reduction that backward did not hide
  double checkpoint_share = 0.10;
  double other_share = 0.25;  // unaccounted time (launch gaps, host work) → host-bound
  double eval_share = 0.25;
  double warmup_share = 0.5;  // first step's excess over the median, as a share of all time
  // For runs read from another program's log (report/run_analysis.hpp), which has no phases:
  double warmup_ratio = 1.25;  // leading steps slower than this × the median are warm-up
  double spike_ratio = 1.5;    // a step slower than this × the median is a spike
  double compute_mfu = 0.30;   // MFU at the median step from which a log's run is compute-bound
};

struct phase_share {
  const char* name;
  double ms;     // total over steady-state steps
  double share;  // of total steady-state wall time
};

struct run_summary {
  std::size_t steps = 0;         // steps summarised (all)
  std::size_t steady_steps = 0;  // steps after the first
  double first_step_ms = 0;
  double median_step_ms = 0;
  double p95_step_ms = 0;
  double total_ms = 0;
  double tokens_per_s = 0;       // steady state: tokens / wall time
  double tflops = 0;             // steady-state mean achieved TFLOP/s
  double mfu = 0;                // NaN when the device's peak is unknown
  double peak_tflops = 0;        // the peak MFU is taken against (0 = unknown)
  double mfu_calibrated = NAN;   // against the measured GEMM rate (calibration), NaN if none
  double max_step_mfu = NAN;     // the highest steady step's MFU: above 1, the peak is wrong
  double calibrated_tflops = 0;  // that measured rate (0 = not measured)
  std::string peak_label;        // e.g. "dense bf16 peak"; names what peak_tflops is
  std::array<phase_share, phase_table.size()> phases{};  // in phase_table order
  bottleneck verdict = bottleneck::unknown;
  std::string evidence;  // the numbers behind the verdict
};

namespace detail {

inline double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const auto lo = std::size_t(std::floor(pos));
  const auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

inline std::string format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

}  // namespace detail

inline std::string mfu_sentence(const run_summary& r);

/// What the per-step metrics do not say about the device: the peak MFU is measured against.
/// Zero fields are recovered from the steps where possible (peak = TFLOP/s ÷ MFU), so a report
/// read back from a metrics file says the same as the one printed at the end of the run.
struct summary_context {
  double peak_tflops = 0;        // the table's or the caller's figure; 0 = derive from the steps
  double calibrated_tflops = 0;  // calibration's measured GEMM rate; 0 = derive / none
  std::string dtype;             // "bf16", "f32"; empty = unknown
};

/// Summarises a run. Steady state excludes the first step when there is more than one.
inline run_summary summarize(std::span<const step_metrics> steps, const verdict_thresholds& th = {},
                             const summary_context& ctx = {}) {
  run_summary r;
  r.peak_label = ctx.dtype.empty() ? "dense peak" : "dense " + ctx.dtype + " peak";
  r.steps = steps.size();
  if (steps.empty()) {
    r.evidence = "no steps recorded";
    return r;
  }
  r.first_step_ms = steps.front().dt_ms;
  const auto steady = steps.size() > 1 ? steps.subspan(1) : steps;
  r.steady_steps = steady.size();

  std::vector<double> dts;
  double tokens = 0, flops_ms = 0, mfu_ms = 0, cal_ms = 0;
  std::array<double, phase_table.size()> ms{};
  for (const auto& m : steady) {
    dts.push_back(m.dt_ms);
    r.total_ms += m.dt_ms;
    tokens += double(m.tokens);
    flops_ms += m.tflops * m.dt_ms;
    mfu_ms += m.mfu * m.dt_ms;  // NaN (unknown peak) stays NaN
    if (std::isfinite(m.mfu) && !(m.mfu <= r.max_step_mfu)) r.max_step_mfu = m.mfu;
    cal_ms += m.mfu_calibrated * m.dt_ms;
    for (std::size_t i = 0; i < phase_table.size(); ++i) ms[i] += m.*phase_table[i].field;
  }
  r.median_step_ms = detail::percentile(dts, 0.5);
  r.p95_step_ms = detail::percentile(dts, 0.95);
  if (r.total_ms > 0) {
    r.tokens_per_s = tokens / (r.total_ms / 1e3);
    r.tflops = flops_ms / r.total_ms;
    r.mfu = mfu_ms / r.total_ms;
    r.mfu_calibrated = cal_ms / r.total_ms;
  }
  r.peak_tflops = ctx.peak_tflops > 0                 ? ctx.peak_tflops
                  : std::isfinite(r.mfu) && r.mfu > 0 ? r.tflops / r.mfu
                                                      : 0.0;
  r.calibrated_tflops = ctx.calibrated_tflops > 0 ? ctx.calibrated_tflops
                        : std::isfinite(r.mfu_calibrated) && r.mfu_calibrated > 0
                            ? r.tflops / r.mfu_calibrated
                            : 0.0;
  if (r.peak_tflops <= 0) r.mfu = NAN;
  for (std::size_t i = 0; i < phase_table.size(); ++i)
    r.phases[i] = {phase_table[i].name, ms[i], r.total_ms > 0 ? ms[i] / r.total_ms : 0.0};

  const double all_ms = r.total_ms + (steps.size() > 1 ? r.first_step_ms : 0.0);
  const double warmup_excess = std::max(0.0, r.first_step_ms - r.median_step_ms);
  const auto share = [&](phase p) { return r.phases[std::size_t(p)].share; };
  using detail::format;
  if (steps.size() > 1 && all_ms > 0 && warmup_excess / all_ms > th.warmup_share) {
    r.verdict = bottleneck::warmup;
    r.evidence = format("first step %.1f ms vs median %.1f ms: %.0f%% of the run's wall time",
                        r.first_step_ms, r.median_step_ms, 100 * warmup_excess / all_ms);
  } else if (share(phase::data_wait) + share(phase::h2d) > th.input_share) {
    r.verdict = bottleneck::input;
    r.evidence = format(
        "the loop waited for data %.1f%% of the time (data wait %.1f%%, H2D %.1f%%)"
        "; try a deeper prefetch, mmap'd shards or more loader threads",
        100 * (share(phase::data_wait) + share(phase::h2d)), 100 * share(phase::data_wait),
        100 * share(phase::h2d));
  } else if (share(phase::comm) > th.comm_share) {
    r.verdict = bottleneck::communication;
    r.evidence = format(
        "the loop waited %.1f%% of the time for the gradient reduction across ranks; overlap "
        "more of it with backward (smaller gradient buckets), accumulate more micro-steps per "
        "step or use a faster interconnect",
        100 * share(phase::comm));
  } else if (share(phase::ckpt_stall) > th.checkpoint_share) {
    r.verdict = bottleneck::checkpoint;
    r.evidence = format(
        "checkpoint saves stalled the loop %.1f%% of the time; save asynchronously "
        "(checkpoint::asio_checkpointer) or less often (trainer_config.ckpt_every)",
        100 * share(phase::ckpt_stall));
  } else if (share(phase::eval) > th.eval_share) {
    r.verdict = bottleneck::eval;
    r.evidence = format(
        "evaluation took %.1f%% of the time; evaluate less often (trainer_config.eval_every)",
        100 * share(phase::eval));
  } else if (share(phase::other) > th.other_share) {
    r.verdict = bottleneck::host;
    r.evidence = format(
        "%.1f%% of the time is in no measured phase: host work between phases "
        "and kernel launch gaps where the GPU idles waiting for the CPU (look for "
        "gaps between the NVTX ranges in Nsight Systems; CUDA graphs or larger "
        "micro-batches close them)",
        100 * share(phase::other));
  } else {
    r.verdict = bottleneck::compute;
    r.evidence = format("forward+backward %.1f%% and optimizer %.1f%% of the time; ",
                        100 * share(phase::compute), 100 * share(phase::optimizer)) +
                 mfu_sentence(r);
  }
  return r;
}

/// "MFU x% of the device's dense bf16 peak y TFLOP/s (z% of the measured w TFLOP/s)": how far
/// from the ceiling a run is, against the datasheet and, when calibrated, against what a plain
/// GEMM actually reaches on this machine.
inline std::string mfu_sentence(const run_summary& r) {
  using detail::format;
  // Nothing runs above its peak: a step over it says the assumed peak is wrong, not the run.
  const double top = std::isfinite(r.max_step_mfu) ? std::max(r.max_step_mfu, r.mfu) : r.mfu;
  if (r.peak_tflops > 0 && std::isfinite(top) && top > 1.0)
    return format(
        "MFU not stated: steps reach %.0f%% of the %s %.4g TFLOP/s assumed for this device, and "
        "nothing runs above its peak, so that peak is too low for this machine (give its real "
        "dense peak: mfu_settings.peak_tflops; %.4g TFLOP/s or more would be consistent)",
        100 * top, r.peak_label.c_str(), r.peak_tflops, r.peak_tflops * top);
  std::string s = r.peak_tflops > 0 && std::isfinite(r.mfu)
                      ? format("MFU %.1f%% of the device's %s %.4g TFLOP/s", 100 * r.mfu,
                               r.peak_label.c_str(), r.peak_tflops)
                      : std::string(
                            "MFU unknown (device not in the peak table; give its peak: "
                            "summary_context.peak_tflops)");
  if (r.calibrated_tflops > 0 && std::isfinite(r.mfu_calibrated))
    s += format(" (%.1f%% of the measured GEMM rate %.4g TFLOP/s)", 100 * r.mfu_calibrated,
                r.calibrated_tflops);
  return s;
}

/// The report's lines before the verdict: steps, warm-up, throughput and MFU, time shares.
inline std::string format_summary_body(const run_summary& r) {
  using detail::format;
  std::string s;
  s += format("steps %zu | median %.1f ms | p95 %.1f ms\n", r.steps, r.median_step_ms,
              r.p95_step_ms);
  // Always shown: trainkit compiles ahead of time, so a large ratio points at allocation,
  // first-touch or autotuning costs worth knowing about.
  s += format("warm-up: first step %.1f ms vs median %.1f ms (%.2fx)\n", r.first_step_ms,
              r.median_step_ms, r.median_step_ms > 0 ? r.first_step_ms / r.median_step_ms : 0.0);
  s += format("throughput %.0f tok/s | %.4g TFLOP/s | ", r.tokens_per_s, r.tflops) +
       mfu_sentence(r) + "\n";
  s += "time share:";
  for (const auto& p : r.phases)
    if (p.ms > 0) s += format(" %s %.1f%%", p.name, 100 * p.share);
  s += '\n';
  return s;
}

/// The human-readable report printed at the end of a run.
inline std::string format_summary(const run_summary& r) {
  return format_summary_body(r) +
         detail::format("verdict: %s — %s\n", bottleneck_name(r.verdict), r.evidence.c_str());
}

}  // namespace trainkit
