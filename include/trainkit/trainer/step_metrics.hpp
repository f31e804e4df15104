// trainkit/trainer/step_metrics.hpp — one step's measurements and the table of its phases.
//
// The phase table is the one list of phases: the metrics line and its reader (JSON keys),
// TensorBoard ("phase/<key>"), the report's time shares and verdict, the SVG chart and the NVTX
// ranges (name and colour) all iterate it, so adding a phase is one entry here plus its field.
// The timed phases are the parts of `dt_ms` during which the loop was *blocked* on that phase;
// `other` is the remainder, so all of them add up to `dt_ms` exactly.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace trainkit {

/// Everything measured about one optimizer step.
struct step_metrics {
  std::uint64_t step = 0;  // 1-based count of optimizer steps completed
  double loss = 0;         // mean training loss over the step's micro-batches
  double lr = 0;
  double grad_norm = 0;      // global norm before clipping
  std::uint64_t tokens = 0;  // tokens processed in this step (all micro-batches)
  double dt_ms = 0;          // wall time of the step
  double data_wait_ms = 0;   // blocked waiting for the prefetcher
  double h2d_ms = 0;         // blocked on host-to-device copies (0 on the CPU)
  double compute_ms = 0;     // forward + backward (on a device: the step's one synchronisation)
  double comm_ms = 0;        // blocked in the gradient reducer's finish() (0 with one rank)
  double optimizer_ms = 0;   // clipping and the optimizer's update
  double ckpt_stall_ms = 0;  // blocked by the checkpointer
  double log_ms = 0;         // writing metrics and the console line
  double eval_ms = 0;        // validation loss, on steps that evaluate
  double other_ms = 0;       // the rest: dt_ms minus the phases above
  double tok_per_s = 0;
  double tflops = 0;            // achieved model TFLOP/s (flops_per_token · tok/s)
  double mfu = 0;               // tflops / device peak
  double mfu_calibrated = NAN;  // tflops / measured GEMM rate (mfu_settings.calibrate) or NaN
  double val_loss = NAN;        // NaN when this step did not evaluate

  /// Sum of the timed phases (everything but other_ms).
  double phases_ms() const noexcept;
};

/// The phases, in the order of the table below.
enum class phase : std::size_t {
  data_wait,
  h2d,
  compute,
  comm,
  optimizer,
  ckpt_stall,
  log,
  eval,
  other
};

struct phase_info {
  const char* name;             // "data_wait": report, chart legend, NVTX range
  const char* json_key;         // "data_wait_ms": metrics line, reader, TensorBoard phase/<key>
  double step_metrics::*field;  // where a step keeps it
  std::uint32_t argb;           // NVTX colour; the chart draws the same hue
  bool timed;                   // false for `other`, the remainder of dt_ms
};

inline constexpr std::array<phase_info, 9> phase_table{{
    {"data_wait", "data_wait_ms", &step_metrics::data_wait_ms, 0xffe4572e, true},
    {"h2d", "h2d_ms", &step_metrics::h2d_ms, 0xfff28e2b, true},
    {"compute", "compute_ms", &step_metrics::compute_ms, 0xff4e79a7, true},
    {"comm", "comm_ms", &step_metrics::comm_ms, 0xffff9da7, true},
    {"optimizer", "optimizer_ms", &step_metrics::optimizer_ms, 0xff59a14f, true},
    {"ckpt_stall", "ckpt_stall_ms", &step_metrics::ckpt_stall_ms, 0xffb07aa1, true},
    {"log", "log_ms", &step_metrics::log_ms, 0xffedc948, true},
    {"eval", "eval_ms", &step_metrics::eval_ms, 0xff76b7b2, true},
    {"other", "other_ms", &step_metrics::other_ms, 0xffbab0ac, false},
}};

// The enum names the rows: one enumerator per row, `other` (the untimed remainder) last.
static_assert(phase_table.size() == std::size_t(phase::other) + 1 &&
                  !phase_table[std::size_t(phase::other)].timed,
              "trainkit: enum class phase and phase_table disagree");

/// The table entry of `p`.
constexpr const phase_info& info(phase p) noexcept {
  return phase_table[std::size_t(p)];
}

/// NVTX colour of the range around a whole step (not a phase).
inline constexpr std::uint32_t step_range_argb = 0xff9e9e9e;

inline double step_metrics::phases_ms() const noexcept {
  double sum = 0;
  for (const phase_info& p : phase_table)
    if (p.timed) sum += this->*p.field;
  return sum;
}

}  // namespace trainkit
