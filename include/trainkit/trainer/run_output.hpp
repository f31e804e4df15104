// trainkit/trainer/run_output.hpp — where a run's measurements go, and what run() gives back.
//
// The console (this rank's: only rank 0 shows anything, config.hpp's rank_output), the metrics
// file and TensorBoard, written one step late so that writing them is counted in the next step
// (sinks/deferred.hpp), and the user's on_step callback, whose time is likewise the next step's
// log_ms. The trainer's loop asks this class to show, hold, flush and end; it never touches a
// sink itself. The files are opened by each run() (a resumed run appends) and closed at its end.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/core/gemm_calibration.hpp"
#include "trainkit/core/timing.hpp"
#include "trainkit/trainer/config.hpp"
#include "trainkit/trainer/report.hpp"
#include "trainkit/trainer/sinks/console.hpp"
#include "trainkit/trainer/sinks/deferred.hpp"
#include "trainkit/trainer/sinks/jsonl.hpp"
#include "trainkit/trainer/sinks/tensorboard.hpp"
#include "trainkit/trainer/step_metrics.hpp"
#include "trainkit/trainer/throughput.hpp"

namespace trainkit {

/// The run header of a fresh metrics file (trainer/metrics.hpp): the config's meta, the ranks,
/// the tokens of a step over all ranks, the FLOP count and the device and peak MFU is stated
/// against (the model's own device name when it has one, as throughput.hpp looks it up).
template <class Model>
run_header make_run_header(const Model& model, const trainer_config& cfg, const step_rates& rates,
                           int world_size, std::uint64_t tokens_per_step, int seq_len) {
  run_header h;
  h.meta = cfg.meta;
  h.world_size = world_size;
  h.tokens_per_step = tokens_per_step;
  h.seq_len = seq_len;
  h.flops_per_token = rates.flops_per_token;
  h.device = cfg.mfu.device_name;
  if constexpr (model::names_its_device<Model>) h.device = model.device_name();
  h.peak_tflops = rates.peak;
  h.dtype = cfg.mfu.dtype == compute_dtype::bf16 ? "bf16" : "f32";
  return h;
}

/// What `trainer::run()` returns.
struct run_result {
  std::vector<step_metrics> steps;  // the steps run by this call (not those before a resume)
  run_summary summary;
  std::uint64_t first_step = 1;  // 1 unless resumed
  std::uint64_t last_step = 0;
  bool resumed = false;
  bool stopped = false;  // a stop was requested (signal)
  double final_val_loss = NAN;
  gemm_calibration calibration;  // tflops 0 unless config().mfu.calibrate measured one
};

/// A step callback: returning false stops the run after that step.
using step_callback = std::function<bool(const step_metrics&)>;

class run_output {
 public:
  /// `settings` are this rank's (rank_output); `steps` is the run's last step, for the console.
  run_output(std::ostream& out, output_settings settings, int steps)
      : settings_(std::move(settings)), console_(out, settings_.console, steps) {}

  console_sink& console() noexcept { return console_; }
  void on_step(step_callback callback) { callback_ = std::move(callback); }

  /// At the start of a run: the metrics file (appended to after a resume; a fresh one opens
  /// with `header`) and TensorBoard. A callback's time from an earlier run() is not this run's.
  void open_files(bool resumed, const std::optional<run_header>& header = std::nullopt) {
    callback_ms_ = 0;
    jsonl_sink metrics =
        settings_.metrics_path.empty() ? jsonl_sink() : jsonl_sink(settings_.metrics_path, resumed);
    if (header) metrics.write_header(*header);
    files_.emplace(std::move(metrics), settings_.tensorboard_dir.empty()
                                           ? tensorboard_sink()
                                           : tensorboard_sink(settings_.tensorboard_dir));
  }

  /// The previous step's callback time, to be booked to this step's log_ms (once).
  double take_callback_ms() noexcept { return std::exchange(callback_ms_, 0.0); }
  /// Writes the held (previous, complete) step to the files.
  void flush() {
    if (files_) files_->flush();
  }
  /// The console's line for a step whose wall time is not final yet.
  void show(const step_metrics& m) { console_.on_step(m); }
  /// Keeps the complete step for the files' next flush.
  void hold(const step_metrics& m) {
    if (files_) files_->hold(m);
  }

  /// Runs the callback, if any, timing it; false when it asked to stop.
  bool call(const step_metrics& m) {
    if (!callback_) return true;
    stopwatch clock;
    const bool go_on = callback_(m);
    callback_ms_ = clock.elapsed_ms();
    return go_on;
  }

  /// A non-finite loss: the last step's metrics reach the files before the error does.
  [[noreturn]] void diverged(const step_metrics& m) {
    flush();
    files_.reset();
    throw error("training diverged: loss is " + std::to_string(m.loss) + " at step " +
                std::to_string(m.step));
  }

  /// After the last step: the summary to the console and the files, which then close.
  void end(const run_summary& summary) {
    console_.on_end(summary);
    if (files_) files_->on_end(summary);
    files_.reset();
  }

 private:
  output_settings settings_;
  console_sink console_;
  std::optional<deferred_sinks<jsonl_sink, tensorboard_sink>> files_;
  step_callback callback_;
  double callback_ms_ = 0;  // the callback after the previous step: logged in this one
};

}  // namespace trainkit
