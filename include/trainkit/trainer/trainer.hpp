// trainkit/trainer/trainer.hpp — the training loop, composed at compile time from five policies.
//
//   trainer<Source, PrefetchRecipe, Model, Optimizer, Checkpointer>
//
// The trainer owns the policies, runs gradient accumulation up to the configured tokens per step,
// evaluates, checkpoints and resumes, and measures every phase of every step: the phases during
// which the loop is blocked (data wait, H2D, compute, optimizer, checkpoint stall, logging, eval)
// plus "other" tile each step's wall time exactly, so the end-of-run report can say honestly
// where the time went. Compositions that cannot work (a host prefetcher feeding a device model,
// an optimizer for another parameter type) are rejected at compile time by static_asserts whose
// messages name the broken requirement.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "trainkit/checkpoint/concepts.hpp"
#include "trainkit/core/device_info.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/execution_context.hpp"
#include "trainkit/core/timing.hpp"
#include "trainkit/data/concepts.hpp"
#include "trainkit/model/concepts.hpp"
#include "trainkit/optim/concepts.hpp"
#include "trainkit/optim/grad_clip.hpp"
#include "trainkit/optim/schedule.hpp"
#include "trainkit/prefetch/concepts.hpp"
#include "trainkit/reduce/concepts.hpp"
#include "trainkit/reduce/single.hpp"
#include "trainkit/trainer/calibrate.hpp"
#include "trainkit/trainer/metrics.hpp"
#include "trainkit/trainer/nvtx.hpp"
#include "trainkit/trainer/report.hpp"
#include "trainkit/trainer/stop_flag.hpp"
#include "trainkit/trainer/tensorboard.hpp"

namespace trainkit {

/// Loop settings (the optimizer's own settings travel in its config_type).
struct trainer_config {
  int steps = 50;  // optimizer steps in the whole run (a resume continues to it)
  std::size_t total_batch_tokens = 0;     // tokens per optimizer step; 0 = one micro-batch of B·T
  optim::lr_schedule schedule{};          // its total_steps is set to `steps` by the trainer
  int eval_every = 0;                     // 0 = never (except at the end when a val source exists)
  int eval_batches = 20;                  // validation batches per evaluation
  int ckpt_every = 0;                     // 0 = only at the end of the run / on a stop request
  bool ckpt_at_end = true;                // save when the run ends or is stopped by a signal
  bool resume = false;                    // continue from the newest valid checkpoint, if any
  std::filesystem::path metrics_path;     // JSONL metrics; empty = none
  std::filesystem::path tensorboard_dir;  // TensorBoard event file goes here; empty = none
  bool calibrate = false;     // time a GEMM before step 1; MFU is then also reported against it
  int log_every = 1;          // console line every N steps (metrics: every step)
  bool progress_bar = false;  // live progress line (programs enable it on a terminal)
  bool quiet = false;         // no console output at all
  std::string device_name = "cpu";  // for the peak table (CUDA models report their own)
  compute_dtype dtype = compute_dtype::f32;
  double peak_tflops = 0;                   // > 0 overrides the peak table
  std::map<std::string, std::string> meta;  // stored in checkpoints; resume checks "model"
};

/// What `run()` returns.
struct run_result {
  std::vector<step_metrics> steps;  // the steps run by this call (not those before a resume)
  run_summary summary;
  std::uint64_t first_step = 1;  // 1 unless resumed
  std::uint64_t last_step = 0;
  bool resumed = false;
  bool stopped = false;  // a stop was requested (signal)
  double final_val_loss = NAN;
  gemm_calibration calibration;  // tflops 0 unless config().calibrate measured one
};

template <class Source, class PrefetchRecipe, class Model, class Optimizer, class Checkpointer,
          class Reducer = reduce::single>
class trainer {
  static_assert(data::data_source<Source>,
                "trainkit::trainer: Source does not satisfy trainkit::data::data_source "
                "(see data/concepts.hpp for what a data source must provide)");
  static_assert(prefetch::prefetch_recipe_for<PrefetchRecipe, Source>,
                "trainkit::trainer: PrefetchRecipe::bind<Source> does not satisfy "
                "trainkit::prefetch::prefetcher (see prefetch/concepts.hpp)");
  static_assert(model::model<Model>,
                "trainkit::trainer: Model does not satisfy trainkit::model::model "
                "(see model/concepts.hpp)");
  static_assert(reduce::gradient_reducer_for<Reducer, Model>,
                "trainkit::trainer: Reducer does not satisfy trainkit::reduce::gradient_reducer_for"
                "<Model> (see reduce/concepts.hpp)");
  static_assert(
      checkpoint::checkpointer<Checkpointer>,
      "trainkit::trainer: Checkpointer does not satisfy trainkit::checkpoint::checkpointer "
      "(see checkpoint/concepts.hpp)");
  static_assert(checkpoint::checkpointer_for<Checkpointer, typename Model::memory_space>,
                "trainkit::trainer: the Checkpointer reads host memory only but the Model's state "
                "is in device memory (requirement: Checkpointer::reads_device_memory when "
                "Model::memory_space is device_memory; wrap it in host_staged_checkpointer or use "
                "an asio_checkpointer with the CUDA stager)");

 public:
  using source_type = Source;
  using prefetcher_type = typename PrefetchRecipe::template bind<Source>;
  using model_type = Model;
  using context_type = execution_context_t<typename Model::memory_space>;
  using optimizer_type = Optimizer;
  using checkpointer_type = Checkpointer;

 private:
  static_assert(std::same_as<typename prefetcher_type::memory_space, typename Model::memory_space>,
                "trainkit::trainer: the prefetcher delivers batches in a different memory space "
                "than the model reads (requirement: Prefetcher::memory_space == "
                "Model::memory_space; e.g. a device model needs pinned_prefetcher)");
  static_assert(std::same_as<typename Optimizer::memory_space, typename Model::memory_space>,
                "trainkit::trainer: the optimizer updates parameters in a different memory space "
                "than the model keeps them (requirement: Optimizer::memory_space == "
                "Model::memory_space)");
  static_assert(std::same_as<typename Optimizer::parameter_type, typename Model::parameter_type>,
                "trainkit::trainer: the optimizer's parameter_type differs from the model's "
                "(requirement: Optimizer::parameter_type == Model::parameter_type)");
  static_assert(
      optim::optimizer_for<Optimizer, Model>,
      "trainkit::trainer: Optimizer does not satisfy trainkit::optim::optimizer_for<Model> "
      "(see optim/concepts.hpp)");

 public:
  trainer(trainer_config cfg, Source train, std::optional<Source> val, Model model,
          typename Optimizer::config_type optimizer_config, Checkpointer checkpointer,
          std::ostream& out = std::cout) requires std::default_initializable<Reducer>
      : trainer(std::move(cfg), std::move(train), std::move(val), std::move(model),
                std::move(optimizer_config), std::move(checkpointer), Reducer{}, out) {}

  trainer(trainer_config cfg, Source train, std::optional<Source> val, Model model,
          typename Optimizer::config_type optimizer_config, Checkpointer checkpointer,
          Reducer reducer, std::ostream& out = std::cout)
      : cfg_(std::move(cfg)),
        model_(std::move(model)),
        optimizer_(model_, optimizer_config),
        checkpointer_(std::move(checkpointer)),
        reducer_(std::move(reducer)),
        train_(std::move(train)),
        out_(&out) {
    if (val) {
      val_.emplace(std::move(*val));
      val_start_ = val_->position();
    }
    validate();
    reducer_.attach(model_, ctx_);
    if constexpr (prefetch::orders_on_context<prefetcher_type, context_type>)
      train_.bind_context(ctx_);
  }

  trainer(const trainer&) = delete;
  trainer& operator=(const trainer&) = delete;

  Model& model() noexcept { return model_; }
  const Model& model() const noexcept { return model_; }
  Optimizer& optimizer() noexcept { return optimizer_; }
  Checkpointer& checkpointer() noexcept { return checkpointer_; }
  Reducer& reducer() noexcept { return reducer_; }
  /// The execution context every step's work is ordered on (on CUDA: the compute stream).
  context_type& context() noexcept { return ctx_; }
  const trainer_config& config() const noexcept { return cfg_; }

  /// Called after every step with its metrics; returning false stops the run after that step
  /// exactly as a SIGINT would (final checkpoint included). For custom logging, samples and early
  /// stops. Its time is counted as the next step's log_ms, so the step timeline still tiles.
  void on_step(std::function<bool(const step_metrics&)> callback) {
    on_step_ = std::move(callback);
  }

  /// Optimizer steps completed so far (after a resume: the checkpoint's step).
  std::uint64_t step() const noexcept { return step_; }
  int grad_accum_steps() const noexcept { return accum_; }
  std::size_t tokens_per_step() const noexcept {
    return std::size_t(accum_) * std::size_t(train_.batch_size()) * train_.seq_len();
  }

  /// Mean validation loss over `eval_batches` batches from the start of the validation source.
  double evaluate() {
    if (!val_) throw config_error("evaluate(): no validation source was given");
    val_->seek(val_start_);
    double sum = 0;
    for (int i = 0; i < cfg_.eval_batches; ++i) sum += model_.forward(val_->next());
    return sum / cfg_.eval_batches;
  }

  /// Restores the newest valid checkpoint; returns false when there is none.
  bool resume() {
    checkpoint::checkpoint_state state = gather_state();
    const bool loaded = checkpointer_.load_latest(state);
    print_checkpointer_warnings();  // skipped corrupt checkpoints, also when none was usable
    if (!loaded) return false;
    if (auto it = state.meta.find("model"); it != state.meta.end()) {
      auto mine = cfg_.meta.find("model");
      if (mine != cfg_.meta.end() && mine->second != it->second)
        throw config_error("--resume: the checkpoint was written for model '" + it->second +
                           "' but this run configures '" + mine->second + "'");
    }
    auto pos = state.meta.find("data_position");
    if (pos == state.meta.end())
      throw format_error("--resume: checkpoint of step " + std::to_string(state.step) +
                         " has no data_position");
    train_.seek(source_position::parse(pos->second));
    step_ = state.step;
    return true;
  }

  /// Runs from the current step to `config().steps` (or until a stop is requested).
  run_result run() {
    run_result result;
    if (cfg_.resume && resume()) {
      result.resumed = true;
      say("resumed from checkpoint at step " + std::to_string(step_) + "\n");
    }
    result.first_step = step_ + 1;
    jsonl_sink metrics;
    if (!cfg_.metrics_path.empty()) metrics = jsonl_sink(cfg_.metrics_path, result.resumed);
    tensorboard_sink tensorboard;
    if (!cfg_.tensorboard_dir.empty()) tensorboard = tensorboard_sink(cfg_.tensorboard_dir);

    const double fpt = model_.flops_per_token(train_.seq_len());
    const double peak = peak_tflops_or_zero();
    if (cfg_.calibrate) result.calibration = run_calibration(peak);
    const double calibrated = result.calibration.tflops;
    std::uint64_t last_saved = step_;
    std::string pending_line;  // previous step's metrics line: written inside the next step
    step_metrics pending;      // and its metrics, for TensorBoard
    stopwatch step_clock;      // lapped once per step: consecutive steps tile the run's wall time
    double callback_ms = 0;    // the on_step callback after the previous step: logged in this one

    while (step_ < std::uint64_t(cfg_.steps)) {
      if (stop_requested()) {
        result.stopped = true;
        break;
      }
      step_metrics m;
      // Ranges named like the report's phases, so an Nsight Systems timeline matches it.
      nvtx_range step_range("step", nvtx_colors::step);
      stopwatch phase;
      m.log_ms += std::exchange(callback_ms, 0.0);
      // Writing the previous step's line blocks this step: count it here, so steps tile the run.
      if (!pending_line.empty()) {
        nvtx_range r("log", info(trainkit::phase::log).argb);
        metrics.write(pending_line);
        tensorboard.write(pending);
        pending_line.clear();
      }
      m.log_ms += phase.lap_ms();

      train_step(m, phase);
      const bool last = step_ == std::uint64_t(cfg_.steps);
      if (val_ && ((cfg_.eval_every > 0 && step_ % std::uint64_t(cfg_.eval_every) == 0) || last)) {
        nvtx_range r("eval", info(trainkit::phase::eval).argb);
        m.val_loss = evaluate();
        result.final_val_loss = m.val_loss;
        m.eval_ms += phase.lap_ms();
      }
      const bool stop_now = stop_requested();
      if ((cfg_.ckpt_every > 0 && step_ % std::uint64_t(cfg_.ckpt_every) == 0) ||
          ((last || stop_now) && cfg_.ckpt_at_end)) {
        nvtx_range r("ckpt_stall", info(trainkit::phase::ckpt_stall).argb);
        save_checkpoint();
        last_saved = step_;
        m.ckpt_stall_ms += phase.lap_ms();
      }

      {
        nvtx_range r("log", info(trainkit::phase::log).argb);
        report_checkpoint_error();  // a background save that failed since the last step
        report_step(m, fpt, peak);
      }
      m.log_ms += phase.lap_ms();

      m.dt_ms = step_clock.lap_ms();
      m.other_ms = std::max(0.0, m.dt_ms - m.phases_ms());
      m.tok_per_s = m.dt_ms > 0 ? double(m.tokens) / (m.dt_ms / 1e3) : 0;
      m.tflops = fpt * m.tok_per_s / 1e12;
      m.mfu = peak > 0 ? m.tflops / peak : NAN;
      m.mfu_calibrated = calibrated > 0 ? m.tflops / calibrated : NAN;
      pending_line = to_json_line(m);
      pending = m;
      result.steps.push_back(m);
      if (!std::isfinite(m.loss)) {
        metrics.write(pending_line);
        tensorboard.write(pending);
        throw error("training diverged: loss is " + std::to_string(m.loss) + " at step " +
                    std::to_string(step_));
      }
      if (on_step_) {
        stopwatch callback;
        const bool go_on = on_step_(m);
        callback_ms = callback.elapsed_ms();  // it blocks the loop: the next step logs it
        if (!go_on && !last) {
          result.stopped = true;
          break;
        }
      }
    }
    if (!pending_line.empty()) {
      metrics.write(pending_line);
      tensorboard.write(pending);
    }
    if (result.stopped && cfg_.ckpt_at_end && last_saved != step_) save_checkpoint();
    checkpointer_.wait();  // a save still in flight completes before the run returns
    report_checkpoint_error();
    if (cfg_.progress_bar && !cfg_.quiet) *out_ << "\r\033[K" << std::flush;

    result.last_step = step_;
    result.summary = summarize(
        result.steps, {}, {peak, calibrated, cfg_.dtype == compute_dtype::bf16 ? "bf16" : "f32"});
    return result;
  }

 private:
  // One optimizer step of the step protocol: accumulate, reduce, clip, update, then the one
  // synchronisation of the context, after which the loss and the norm are read.
  void train_step(step_metrics& m, stopwatch& phase) {
    {
      nvtx_range r("compute", info(trainkit::phase::compute).argb);
      model_.zero_grad(ctx_);
    }
    m.compute_ms += phase.lap_ms();
    trainkit::model::micro_step micro{1.0f / float(accum_), 0, accum_, {&reducer_, &bucket_ready}};
    for (int k = 0; k < accum_; ++k) {
      micro.index = k;
      nvtx_range wait_range("data_wait", info(trainkit::phase::data_wait).argb);
      const auto batch = train_.next();
      wait_range.end();
      const double waited = phase.lap_ms();
      // A device prefetcher says how much of its wait was the host-to-device copy; the copy
      // time that overlapped compute blocked nothing and is not counted.
      double copy_wait = 0;
      if constexpr (prefetch::reports_copy_wait<prefetcher_type>)
        copy_wait = std::min(waited, train_.last_h2d_wait_ms());
      m.h2d_ms += copy_wait;
      m.data_wait_ms += waited - copy_wait;
      {
        nvtx_range r("compute", info(trainkit::phase::compute).argb);
        model_.forward_backward(batch, micro, ctx_);
      }
      m.compute_ms += phase.lap_ms();
      m.tokens += batch.tokens();
    }
    ++step_;
    m.step = step_;
    m.lr = cfg_.schedule.at(int(step_ - 1));
    {
      nvtx_range r("optimizer", info(trainkit::phase::optimizer).argb);
      reducer_.finish();
      const auto scale = clip_(std::span<const typename Model::parameter_type>(model_.gradients()),
                               model_.gradient_buckets(), optimizer_.max_grad_norm(), ctx_);
      if constexpr (checkpoint::defers_snapshot<Checkpointer>) {
        m.optimizer_ms += phase.lap_ms();
        checkpointer_.before_update();  // the last save's copy reads the state before it changes
        m.ckpt_stall_ms += phase.lap_ms();
      }
      optimizer_.update(model_, float(m.lr), scale, ctx_);
    }
    m.optimizer_ms += phase.lap_ms();
    {
      // On a device this waits for the whole step's kernels; the host time lands in compute.
      nvtx_range r("compute", info(trainkit::phase::compute).argb);
      ctx_.synchronize();
      m.loss = model_.step_loss();
      m.grad_norm = float(clip_.norm());  // logged at float precision, the gradients' own
    }
    m.compute_ms += phase.lap_ms();
  }

  static void bucket_ready(void* reducer, std::size_t bucket) {
    static_cast<Reducer*>(reducer)->bucket_ready(bucket);
  }

  void validate() {
    const std::size_t bt = std::size_t(train_.batch_size()) * std::size_t(train_.seq_len());
    if (cfg_.steps < 0) throw config_error("--steps must be >= 0: " + std::to_string(cfg_.steps));
    if (bt == 0) throw config_error("--batch and --seq must be positive");
    const std::size_t total = cfg_.total_batch_tokens == 0 ? bt : cfg_.total_batch_tokens;
    if (total % bt != 0)
      throw config_error("--total-batch-tokens " + std::to_string(total) +
                         " is not a multiple of batch*seq = " + std::to_string(bt));
    accum_ = int(total / bt);
    if (val_ && cfg_.eval_batches <= 0)
      throw config_error("eval_batches must be positive: " + std::to_string(cfg_.eval_batches));
    if (val_ && (val_->batch_size() != train_.batch_size() || val_->seq_len() != train_.seq_len()))
      throw config_error("the validation source's batch shape differs from the training source's");
    cfg_.schedule.total_steps = std::max(cfg_.steps, 1);
    cfg_.schedule.validate();
    if (cfg_.log_every <= 0) cfg_.log_every = 1;
  }

  double peak_tflops_or_zero() const {
    if (cfg_.peak_tflops > 0) return cfg_.peak_tflops;
    std::string name = cfg_.device_name;
    if constexpr (model::names_its_device<Model>) name = model_.device_name();
    return peak_tflops(name, cfg_.dtype).value_or(0.0);
  }

  gemm_calibration run_calibration(double peak) {
    nvtx_range r("calibrate");
    gemm_calibration c = calibrate_for(model_);
    if (c.tflops > 0) {
      std::string line =
          "calibrate: " + c.what + ": " + detail::format("%.4g", c.tflops) + " TFLOP/s measured";
      if (peak > 0)
        line += detail::format(" (%.1f%% of the %.4g TFLOP/s peak)", 100 * c.tflops / peak, peak);
      say(line + "\n");
    } else {
      say("calibrate: this model provides no GEMM calibration (calibrate_gemm() or "
          "calibrate_tflops()); skipped\n");
    }
    return c;
  }

  checkpoint::checkpoint_state gather_state() {
    checkpoint::checkpoint_state s;
    s.step = step_;
    s.tensors = model_.state();
    auto opt = optimizer_.state();
    s.tensors.insert(s.tensors.end(), opt.begin(), opt.end());
    s.meta = cfg_.meta;
    s.meta["data_position"] = train_.position().to_string();
    s.meta["step"] = std::to_string(step_);
    return s;
  }

  void save_checkpoint() {
    checkpointer_.save(gather_state());
    report_checkpoint_error();
  }

  /// Asynchronous checkpointers report a failed background write on the next poll (training goes
  /// on; the previous complete checkpoint stays loadable). Polling does not block.
  void report_checkpoint_error() {
    if constexpr (checkpoint::reports_save_errors<Checkpointer>) {
      if (auto err = checkpointer_.take_error()) say("warning: checkpoint: " + *err + "\n");
    }
  }

  void print_checkpointer_warnings() {
    if constexpr (checkpoint::reports_warnings<Checkpointer>) {
      for (const auto& w : checkpointer_.warnings()) say("warning: " + w + "\n");
    }
  }

  void say(const std::string& s) {
    if (cfg_.quiet) return;
    if (cfg_.progress_bar) *out_ << "\r\033[K";
    *out_ << s << std::flush;
  }

  void report_step(const step_metrics& m, double fpt, double peak) {
    if (cfg_.quiet) return;
    // Times known so far: everything but this report itself.
    const double dt = step_clock_estimate(m);
    const double tok_s = dt > 0 ? double(m.tokens) / (dt / 1e3) : 0;
    const bool print = m.step % std::uint64_t(cfg_.log_every) == 0 ||
                       m.step == std::uint64_t(cfg_.steps) || !std::isnan(m.val_loss);
    char line[320];
    if (print) {
      int n = std::snprintf(
          line, sizeof line,
          "step %6llu/%d | loss %.4f | lr %.2e | norm %.3f | %.1f ms | %.0f tok/s",
          (unsigned long long)m.step, cfg_.steps, m.loss, m.lr, m.grad_norm, dt, tok_s);
      if (peak > 0 && n > 0 && n < int(sizeof line))
        n += std::snprintf(line + n, sizeof line - n, " | MFU %.1f%%",
                           100 * fpt * tok_s / 1e12 / peak);
      if (!std::isnan(m.val_loss) && n > 0 && n < int(sizeof line))
        std::snprintf(line + n, sizeof line - n, " | val %.4f", m.val_loss);
      say(std::string(line) + "\n");
    }
    if (cfg_.progress_bar) {
      constexpr int width = 30;
      const double frac = double(m.step) / std::max(cfg_.steps, 1);
      const int filled = int(frac * width);
      const double eta_s = dt / 1e3 * double(std::uint64_t(cfg_.steps) - m.step);
      std::snprintf(line, sizeof line, "[%-*s] %llu/%d  loss %.4f  %.0f tok/s  ETA %dm%02ds", width,
                    std::string(std::size_t(filled), '=').c_str(), (unsigned long long)m.step,
                    cfg_.steps, m.loss, tok_s, int(eta_s) / 60, int(eta_s) % 60);
      *out_ << "\r\033[K" << line << std::flush;
    }
  }

  static double step_clock_estimate(const step_metrics& m) { return m.phases_ms(); }

  trainer_config cfg_;
  context_type ctx_;  // first: policies may hold references to it until they are destroyed
  Model model_;
  Optimizer optimizer_;
  Checkpointer checkpointer_;
  Reducer reducer_;
  optim::grad_clip_t<typename Model::memory_space> clip_;
  prefetcher_type train_;
  std::optional<prefetcher_type> val_;
  source_position val_start_{};
  std::ostream* out_;
  std::uint64_t step_ = 0;
  int accum_ = 1;
  std::function<bool(const step_metrics&)> on_step_;
};

}  // namespace trainkit
