// trainkit/trainer/trainer.hpp — the training loop, composed at compile time from five policies.
//
//   trainer<Source, PrefetchRecipe, Model, Optimizer, Checkpointer>
//
// The trainer owns the policies, runs gradient accumulation up to the configured tokens per step,
// evaluates, checkpoints and resumes, and measures every phase of every step with a phase_clock:
// the phases of the phase table during which the loop is blocked (data wait, H2D, compute,
// communication, optimizer, checkpoint stall, logging, eval) plus "other" tile each step's wall
// time exactly, so the end-of-run report can say honestly where the time went. What it measured
// goes to sinks (trainer/sinks/: console, JSONL metrics, TensorBoard). Compositions that cannot
// work (a host prefetcher feeding a device model, an optimizer for another parameter type) are
// rejected at compile time by static_asserts whose messages name the broken requirement.
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
#include <span>
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
#include "trainkit/trainer/nvtx.hpp"
#include "trainkit/trainer/phase_clock.hpp"
#include "trainkit/trainer/report.hpp"
#include "trainkit/trainer/sinks/console.hpp"
#include "trainkit/trainer/sinks/deferred.hpp"
#include "trainkit/trainer/sinks/jsonl.hpp"
#include "trainkit/trainer/sinks/tensorboard.hpp"
#include "trainkit/trainer/stop_flag.hpp"

namespace trainkit {

/// The peak the achieved FLOP/s are measured against (MFU; docs/architecture.md, "Accounting and
/// MFU").
struct mfu_settings {
  bool calibrate = false;  // time a GEMM before step 1; MFU is then also reported against it
  std::string device_name = "cpu";  // for the peak table (CUDA models report their own)
  compute_dtype dtype = compute_dtype::f32;
  double peak_tflops = 0;  // > 0 overrides the peak table
};

/// What a run shows and stores: the sinks' settings (sinks/console.hpp, sinks/jsonl.hpp,
/// sinks/tensorboard.hpp).
struct output_settings {
  std::filesystem::path metrics_path;     // JSONL metrics; empty = none
  std::filesystem::path tensorboard_dir;  // TensorBoard event file goes here; empty = none
  console_settings console;               // step lines (the files get every step), progress, quiet
};

/// The run's settings: the loop's own, then how it is measured and shown (the optimizer's travel
/// in its config_type). Errors name these fields by their path ("trainer_config.steps must be
/// >= 0"); a program maps them to its flags.
struct trainer_config {
  int steps = 50;  // optimizer steps in the whole run (a resume continues to it)
  std::size_t total_batch_tokens = 0;  // tokens per optimizer step; 0 = one micro-batch of B·T
  optim::lr_schedule schedule{};       // its total_steps is set to `steps` by the trainer
  int eval_every = 0;                  // 0 = never (except at the end when a val source exists)
  int eval_batches = 20;               // validation batches per evaluation
  int ckpt_every = 0;                  // 0 = only at the end of the run / on a stop request
  bool ckpt_at_end = true;             // save when the run ends or is stopped by a signal
  bool resume = false;                 // continue from the newest valid checkpoint, if any
  std::map<std::string, std::string> meta;  // stored in checkpoints; resume checks "model"

  mfu_settings mfu{};
  output_settings output{};
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
  gemm_calibration calibration;  // tflops 0 unless config().mfu.calibrate measured one
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
  static_assert(checkpoint::checkpointer_for_optimizer<Checkpointer, Optimizer, Reducer>,
                "trainkit::trainer: the Optimizer's state is sharded over ranks "
                "(checkpoint::sharded_optimizer, e.g. ZeRO-1) but the Checkpointer cannot save it "
                "(requirement: checkpoint::sharded_checkpointer<Checkpointer, Reducer>; use "
                "sync_checkpointer or no_checkpoint; see checkpoint/concepts.hpp)");

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
        console_(out, cfg_.output.console, cfg_.steps) {
    if (val) {
      val_.emplace(std::move(*val));
      val_start_ = val_->position();
    }
    validate();
    if (rank() != 0) {  // data parallel: rank 0 alone writes metrics, TensorBoard and the console
      cfg_.output.console.quiet = true;
      cfg_.output.metrics_path.clear();
      cfg_.output.tensorboard_dir.clear();
      console_ = console_sink(out, cfg_.output.console, cfg_.steps);
    }
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
  /// Tokens per optimizer step over all ranks.
  std::size_t tokens_per_step() const noexcept {
    return std::size_t(accum_) * std::size_t(world_size()) * std::size_t(train_.batch_size()) *
           train_.seq_len();
  }

  /// Mean validation loss over `eval_batches` batches from the start of the validation source.
  /// With several ranks each evaluates the global batches j ≡ rank (mod ranks) (its validation
  /// source is sliced like the training one) and the mean is summed in global batch order; it is
  /// then collective: every rank calls it.
  double evaluate() {
    if (!val_) throw config_error("evaluate(): no validation source was given");
    val_->seek(val_start_);
    std::vector<double> losses(std::size_t(cfg_.eval_batches), 0.0);  // global batch order
    for (int j = rank(); j < cfg_.eval_batches; j += world_size())
      losses[std::size_t(j)] = model_.forward(val_->next());
    sum_over_ranks(losses);  // each element has one rank's loss, zero from the others
    double sum = 0;
    for (double l : losses) sum += l;
    return sum / cfg_.eval_batches;
  }

  /// Restores the newest valid checkpoint; returns false when there is none.
  bool resume() {
    checkpoint::checkpoint_state state;
    bool loaded = false;
    if constexpr (checkpoint::sharded_optimizer<Optimizer>) {
      // Collective: every rank loads the common part and its own range of the sharded tensors.
      checkpoint::sharded_checkpoint_state sharded = gather_sharded_state();
      loaded = checkpointer_.load_latest_sharded(sharded, reducer_);
      state = std::move(sharded.common);
    } else {
      state = gather_state();
      loaded = checkpointer_.load_latest(state);
    }
    print_checkpointer_warnings();  // skipped corrupt checkpoints, also when none was usable
    if (!loaded) return false;
    if (auto it = state.meta.find("model"); it != state.meta.end()) {
      auto mine = cfg_.meta.find("model");
      if (mine != cfg_.meta.end() && mine->second != it->second)
        throw config_error("trainer_config.resume: the checkpoint was written for model '" +
                           it->second + "' but this run configures '" + mine->second + "'");
    }
    auto pos = state.meta.find("data_position");
    if (pos == state.meta.end())
      throw format_error("trainer_config.resume: checkpoint of step " + std::to_string(state.step) +
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
      console_.say("resumed from checkpoint at step " + std::to_string(step_) + "\n");
    }
    result.first_step = step_ + 1;
    // Set-up, not stall: the checkpointer's staging memory, before step 1 (prepares_saves).
    if constexpr (checkpoint::prepares_saves<Checkpointer>)
      if (rank() == 0 && (cfg_.ckpt_every > 0 || cfg_.ckpt_at_end))
        checkpointer_.prepare(gather_state());
    auto files = open_file_sinks(result.resumed);
    const step_rates rates = measure_rates(result.calibration);
    std::uint64_t last_saved = step_;
    stopwatch step_clock;    // lapped once per step: consecutive steps tile the run's wall time
    double callback_ms = 0;  // the on_step callback after the previous step: logged in this one

    while (step_ < std::uint64_t(cfg_.steps)) {
      if (any_rank(stop_requested())) {
        result.stopped = true;
        break;
      }
      step_metrics m;
      nvtx_range step_range("step", nvtx_colors::step);  // the phases' ranges nest inside it
      phase_clock clock(m);
      m.log_ms += std::exchange(callback_ms, 0.0);
      {
        auto timed = clock.time(phase::log);  // the previous step's metrics block this step
        files.flush();
      }
      train_step(m, clock);
      const bool last = step_ == std::uint64_t(cfg_.steps);
      if (val_ && (due(cfg_.eval_every) || last)) {
        auto timed = clock.time(phase::eval);
        result.final_val_loss = m.val_loss = evaluate();
      }
      const bool stop_now = any_rank(stop_requested());  // collective: every rank asks
      if (due(cfg_.ckpt_every) || ((last || stop_now) && cfg_.ckpt_at_end)) {
        auto timed = clock.time(phase::ckpt_stall);
        save_checkpoint();
        last_saved = step_;
      }
      {
        auto timed = clock.time(phase::log);
        report_checkpoint_error();  // a background save that failed since the last step
        console_.on_step(with_rates(m, m.phases_ms(), rates));  // the time known so far
      }
      m = with_rates(m, step_clock.lap_ms(), rates);  // the step is complete: dt_ms, other_ms
      result.steps.push_back(m);
      files.hold(m);
      if (!std::isfinite(m.loss)) diverged(m, files);  // the loss is the ranks' mean: all see it
      const bool go_on = !on_step_ || call_on_step(m, callback_ms);
      // A callback's stop on one rank stops every rank (also where no callback is set).
      if (any_rank(!go_on) && !last) {
        result.stopped = true;
        break;
      }
    }
    end_run(result, files, rates, last_saved);
    return result;
  }

 private:
  // One optimizer step of the step protocol: accumulate, reduce, clip, update, then the one
  // synchronisation of the context, after which the loss and the norm are read.
  void train_step(step_metrics& m, phase_clock& clock) {
    {
      auto timed = clock.time(phase::compute);
      model_.zero_grad(ctx_);
    }
    // 1/(micro-batches × ranks): the reducer sums the ranks' shares of the mean.
    trainkit::model::micro_step micro{
        1.0f / float(accum_ * world_size()), 0, accum_, {&reducer_, &bucket_ready}};
    for (int k = 0; k < accum_; ++k) {
      micro.index = k;
      const auto batch = next_batch(m, clock);
      {
        auto timed = clock.time(phase::compute);
        model_.forward_backward(batch, micro, ctx_);
      }
      m.tokens += batch.tokens();
    }
    m.tokens *= std::size_t(world_size());  // the step's tokens over all ranks
    if constexpr (std::same_as<Reducer, reduce::single>) {
      reducer_.finish();  // one rank: nothing to wait for, and comm_ms stays exactly 0
    } else {
      // The part of the gradients' reduction across ranks that backward did not hide.
      auto timed = clock.time(phase::comm);
      reducer_.finish();
    }
    const auto scale = [&] {
      auto timed = clock.time(phase::optimizer);
      ++step_;
      m.step = step_;
      m.lr = cfg_.schedule.at(int(step_ - 1));
      return clip_gradients();
    }();
    if constexpr (checkpoint::defers_snapshot<Checkpointer>) {
      // The last save's copy reads the state before the update changes it: the loop is blocked
      // by the checkpointer for whatever of the copy the forward/backward did not hide.
      auto timed = clock.time(phase::ckpt_stall);
      checkpointer_.before_update();
    }
    {
      auto timed = clock.time(phase::optimizer);
      optimizer_.update(model_, float(m.lr), scale, ctx_);
    }
    {
      // On a device this waits for the whole step's kernels; the host time lands in compute.
      auto timed = clock.time(phase::compute);
      ctx_.synchronize();
      m.loss = average_over_ranks(model_.step_loss());
      m.grad_norm = float(grad_norm());  // logged at float precision, the gradients' own
    }
  }

  /// The clipping step: the trainer's own over the buckets, or the reducer's where each rank
  /// holds only a shard of the summed gradients (ZeRO; reduce::clips_sharded_gradients).
  auto clip_gradients() {
    const std::span<const typename Model::parameter_type> grads(model_.gradients());
    if constexpr (reduce::clips_sharded_gradients<Reducer, Model>)
      return reducer_.clip(grads, model_.gradient_buckets(), optimizer_.max_grad_norm(), ctx_);
    else
      return clip_(grads, model_.gradient_buckets(), optimizer_.max_grad_norm(), ctx_);
  }

  double grad_norm() const {
    if constexpr (reduce::clips_sharded_gradients<Reducer, Model>)
      return reducer_.norm();
    else
      return clip_.norm();
  }

  /// The next micro-batch. The time it blocked is data_wait, except the part a device prefetcher
  /// says was its host-to-device copy (h2d); copy time that overlapped compute blocked nothing.
  auto next_batch(step_metrics& m, phase_clock& clock) {
    const double waited_before = m.data_wait_ms;
    auto batch = [&] {
      auto timed = clock.time(phase::data_wait);
      return train_.next();
    }();
    if constexpr (prefetch::reports_copy_wait<prefetcher_type>)
      clock.move(phase::data_wait, phase::h2d,
                 std::min(m.data_wait_ms - waited_before, train_.last_h2d_wait_ms()));
    return batch;
  }

  /// Whether this step is a multiple of `every` (0 = never).
  bool due(int every) const noexcept { return every > 0 && step_ % std::uint64_t(every) == 0; }

  /// The user's callback; it blocks the loop, so its time is the next step's (log_ms).
  bool call_on_step(const step_metrics& m, double& callback_ms) {
    stopwatch callback;
    const bool go_on = on_step_(m);
    callback_ms = callback.elapsed_ms();
    return go_on;
  }

  /// What turns a step's time into throughput and MFU.
  struct step_rates {
    double flops_per_token = 0;
    double peak = 0;        // TFLOP/s; 0 = unknown (no MFU)
    double calibrated = 0;  // measured GEMM TFLOP/s; 0 = not measured
  };

  step_rates measure_rates(gemm_calibration& calibration) {
    step_rates r{model_.flops_per_token(train_.seq_len()), peak_tflops_or_zero(), 0};
    if (cfg_.mfu.calibrate) calibration = run_calibration(r.peak);
    r.calibrated = calibration.tflops;
    return r;
  }

  /// `m` with dt_ms = `dt_ms`, other_ms its part outside the phases and the rates derived.
  static step_metrics with_rates(step_metrics m, double dt_ms, const step_rates& r) {
    m.dt_ms = dt_ms;
    m.other_ms = std::max(0.0, dt_ms - m.phases_ms());
    m.tok_per_s = dt_ms > 0 ? double(m.tokens) / (dt_ms / 1e3) : 0;
    m.tflops = r.flops_per_token * m.tok_per_s / 1e12;
    m.mfu = r.peak > 0 ? m.tflops / r.peak : NAN;
    m.mfu_calibrated = r.calibrated > 0 ? m.tflops / r.calibrated : NAN;
    return m;
  }

  /// The last step's metrics reach the files before the error does.
  [[noreturn]] void diverged(const step_metrics& m, auto& files) {
    files.flush();
    throw error("training diverged: loss is " + std::to_string(m.loss) + " at step " +
                std::to_string(m.step));
  }

  /// After the last step: the files complete, a stopped run's checkpoint, saves in flight
  /// finished, the summary computed and handed to the sinks.
  void end_run(run_result& result, auto& files, const step_rates& rates, std::uint64_t last_saved) {
    files.flush();
    if (result.stopped && cfg_.ckpt_at_end && last_saved != step_) save_checkpoint();
    checkpointer_.wait();  // a save still in flight completes before the run returns
    report_checkpoint_error();
    result.last_step = step_;
    result.summary = summarize(
        result.steps, {},
        {rates.peak, rates.calibrated, cfg_.mfu.dtype == compute_dtype::bf16 ? "bf16" : "f32"});
    console_.on_end(result.summary);
    files.on_end(result.summary);
  }

  /// The metrics file and TensorBoard, written one step late (sinks/deferred.hpp).
  deferred_sinks<jsonl_sink, tensorboard_sink> open_file_sinks(bool resumed) const {
    const output_settings& out = cfg_.output;
    return deferred_sinks<jsonl_sink, tensorboard_sink>(
        out.metrics_path.empty() ? jsonl_sink() : jsonl_sink(out.metrics_path, resumed),
        out.tensorboard_dir.empty() ? tensorboard_sink() : tensorboard_sink(out.tensorboard_dir));
  }

  static void bucket_ready(void* reducer, std::size_t bucket) {
    static_cast<Reducer*>(reducer)->bucket_ready(bucket);
  }

  void validate() {
    const std::size_t bt = std::size_t(train_.batch_size()) * std::size_t(train_.seq_len());
    if (cfg_.steps < 0)
      throw config_error("trainer_config.steps must be >= 0: " + std::to_string(cfg_.steps));
    if (bt == 0) throw config_error("the training source's batch_size x seq_len must be positive");
    // With several ranks each optimizer step takes the same number of micro-batches on every rank.
    const std::size_t ranks = std::size_t(world_size());
    const std::size_t total = cfg_.total_batch_tokens == 0 ? bt * ranks : cfg_.total_batch_tokens;
    if (total % (bt * ranks) != 0)
      throw config_error("trainer_config.total_batch_tokens " + std::to_string(total) +
                         " is not a multiple of the training source's batch_size x seq_len = " +
                         std::to_string(bt) +
                         (ranks > 1 ? " times " + std::to_string(ranks) + " ranks" : ""));
    accum_ = int(total / (bt * ranks));
    if (val_ && cfg_.eval_batches <= 0)
      throw config_error("trainer_config.eval_batches must be positive: " +
                         std::to_string(cfg_.eval_batches));
    if (val_ && (val_->batch_size() != train_.batch_size() || val_->seq_len() != train_.seq_len()))
      throw config_error("the validation source's batch shape differs from the training source's");
    cfg_.schedule.total_steps = std::max(cfg_.steps, 1);
    cfg_.schedule.validate();
    if (cfg_.output.console.log_every <= 0) cfg_.output.console.log_every = 1;
  }

  double peak_tflops_or_zero() const {
    if (cfg_.mfu.peak_tflops > 0) return cfg_.mfu.peak_tflops;
    std::string name = cfg_.mfu.device_name;
    if constexpr (model::names_its_device<Model>) name = model_.device_name();
    return peak_tflops(name, cfg_.mfu.dtype).value_or(0.0);
  }

  gemm_calibration run_calibration(double peak) {
    nvtx_range r("calibrate");
    gemm_calibration c = calibrate_for(model_);
    if (c.tflops > 0) {
      std::string line =
          "calibrate: " + c.what + ": " + detail::format("%.4g", c.tflops) + " TFLOP/s measured";
      if (peak > 0)
        line += detail::format(" (%.1f%% of the %.4g TFLOP/s peak)", 100 * c.tflops / peak, peak);
      console_.say(line + "\n");
    } else {
      console_.say(
          "calibrate: this model provides no GEMM calibration (calibrate_gemm() or "
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

  /// The state of a run whose optimizer is sharded over ranks: the model's tensors and the
  /// optimizer's common ones (rank 0 writes them), this rank's shard of the rest.
  checkpoint::sharded_checkpoint_state gather_sharded_state() {
    checkpoint::optimizer_shard opt = optimizer_.sharded_state();
    checkpoint::sharded_checkpoint_state s;
    s.common.step = step_;
    s.common.tensors = model_.state();
    s.common.tensors.insert(s.common.tensors.end(), opt.common.begin(), opt.common.end());
    s.common.meta = cfg_.meta;
    s.common.meta["data_position"] = train_.position().to_string();
    s.common.meta["step"] = std::to_string(step_);
    s.shard = std::move(opt.shard);
    s.range = opt.range;
    return s;
  }

  void save_checkpoint() {
    if constexpr (checkpoint::sharded_optimizer<Optimizer>) {
      // ZeRO: each rank holds another shard of the optimizer state; every rank writes its own
      // (collective; committed once all are complete).
      checkpointer_.save_sharded(gather_sharded_state(), reducer_);
    } else {
      if (rank() != 0) return;  // data parallel: every rank holds the same state; rank 0 writes
      checkpointer_.save(gather_state());
    }
    report_checkpoint_error();
  }

  /// Asynchronous checkpointers report a failed background write on the next poll (training goes
  /// on; the previous complete checkpoint stays loadable). Polling does not block.
  void report_checkpoint_error() {
    if constexpr (checkpoint::reports_save_errors<Checkpointer>) {
      if (auto err = checkpointer_.take_error())
        console_.say("warning: checkpoint: " + *err + "\n");
    }
  }

  void print_checkpointer_warnings() {
    if constexpr (checkpoint::reports_warnings<Checkpointer>) {
      for (const auto& w : checkpointer_.warnings()) console_.say("warning: " + w + "\n");
    }
  }

  // Data parallelism (reduce/concepts.hpp, rank_aware): a reducer without the hooks is one process.
  int rank() const noexcept {
    if constexpr (reduce::rank_aware<Reducer>) return int(reducer_.rank());
    return 0;
  }
  int world_size() const noexcept {
    if constexpr (reduce::rank_aware<Reducer>) return int(reducer_.world_size());
    return 1;
  }
  bool any_rank(bool flag) {
    if constexpr (reduce::rank_aware<Reducer>) return reducer_.any(flag);
    return flag;
  }
  double average_over_ranks(double x) {
    if constexpr (reduce::rank_aware<Reducer>) return reducer_.average(x);
    return x;
  }
  void sum_over_ranks(std::span<double> values) {
    if constexpr (reduce::rank_aware<Reducer>) reducer_.sum(values);
  }

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
  console_sink console_;
  std::uint64_t step_ = 0;
  int accum_ = 1;
  std::function<bool(const step_metrics&)> on_step_;
};

}  // namespace trainkit
