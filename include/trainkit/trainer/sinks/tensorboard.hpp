// trainkit/trainer/sinks/tensorboard.hpp — the trainer's TensorBoard output.
//
// One Event per step in an event file (trainer/tensorboard.hpp writes the format) with the run's
// scalars: train/loss, val/loss, train/lr, train/grad_norm, perf/* and one phase/<json key> per
// row of the phase table, so a new phase shows up without an edit here.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "trainkit/trainer/report.hpp"
#include "trainkit/trainer/sinks/concepts.hpp"
#include "trainkit/trainer/step_metrics.hpp"
#include "trainkit/trainer/tensorboard.hpp"

namespace trainkit {

/// The trainer's TensorBoard output: one Event per step with the run's scalars. Tags are grouped
/// by prefix so TensorBoard shows train/, val/, perf/ and phase/ sections.
class tensorboard_sink {
 public:
  tensorboard_sink() = default;
  explicit tensorboard_sink(const std::filesystem::path& dir) : writer_(dir) {}

  bool is_open() const noexcept { return writer_.is_open(); }
  const std::filesystem::path& path() const noexcept { return writer_.path(); }

  void on_step(const step_metrics& m) {
    if (!writer_.is_open()) return;
    writer_.write_scalars(std::int64_t(m.step), scalars(m));
  }
  void on_end(const run_summary&) noexcept {}  // every event is flushed as it is written

  /// The scalars written for one step; non-finite values (an unknown MFU) are left out.
  static std::vector<tensorboard_scalar> scalars(const step_metrics& m) {
    std::vector<tensorboard_scalar> v;
    auto add = [&](const char* tag, double x) {
      if (std::isfinite(x)) v.push_back({tag, float(x)});
    };
    add("train/loss", m.loss);
    add("val/loss", m.val_loss);
    add("train/lr", m.lr);
    add("train/grad_norm", m.grad_norm);
    add("perf/tok_per_s", m.tok_per_s);
    add("perf/tflops", m.tflops);
    add("perf/mfu", m.mfu);
    add("perf/mfu_calibrated", m.mfu_calibrated);
    add("perf/dt_ms", m.dt_ms);
    for (const phase_info& p : phase_table)
      add((std::string("phase/") + p.json_key).c_str(), m.*p.field);
    return v;
  }

 private:
  tensorboard_writer writer_;
};

static_assert(step_sink<tensorboard_sink>);

}  // namespace trainkit
