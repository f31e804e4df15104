// trainkit/trainer/trainer.hpp — the training loop, composed at compile time from six policies.
//
//   trainer<Source, PrefetchRecipe, Model, Optimizer, Checkpointer, Reducer = reduce::single>
//
// The trainer owns the policies, runs gradient accumulation up to the configured tokens per step,
// evaluates, checkpoints and resumes, and times every phase of every step with a phase_clock: the
// phases during which the loop is blocked (data wait, H2D, compute, communication, optimizer,
// checkpoint stall, logging, eval) plus "other" tile each step's wall time exactly, so the report
// can say honestly where the time went. Gradient clipping is the trainer's: its threshold
// (trainer_config::grad_clip) and its step (optim::grad_clip_t, run after the reducer's finish()),
// which asks the reducer only for facts (the gradient ranges this rank holds summed, and how the
// ranks' partial sums of squares combine) and hands the optimizer's update the factor alone.
//
// This file is the loop; its helpers live beside it: composition.hpp (the compile-time checks
// whose messages name a broken requirement), config.hpp (the configuration and its one check()),
// checkpointing.hpp (gather, save, resume), throughput.hpp (rates, MFU, calibration),
// device_phases.hpp (what a device waited for, booked to its phase), run_output.hpp (console,
// metrics file, TensorBoard, the step callback).
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "trainkit/checkpoint/concepts.hpp"
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
#include "trainkit/trainer/checkpointing.hpp"
#include "trainkit/trainer/composition.hpp"
#include "trainkit/trainer/config.hpp"
#include "trainkit/trainer/device_phases.hpp"
#include "trainkit/trainer/evaluation.hpp"
#include "trainkit/trainer/nvtx.hpp"
#include "trainkit/trainer/phase_clock.hpp"
#include "trainkit/trainer/ranks.hpp"
#include "trainkit/trainer/report.hpp"
#include "trainkit/trainer/run_output.hpp"
#include "trainkit/trainer/stop_flag.hpp"
#include "trainkit/trainer/throughput.hpp"

#if defined(__CUDACC__)
// A device model's clipping step.
#include "trainkit/optim/device_grad_clip.hpp"
#endif

namespace trainkit {

template <class Source, class PrefetchRecipe, class Model, class Optimizer, class Checkpointer,
          class Reducer = reduce::single>
class trainer {
  // Compositions that cannot work fail here, with messages naming the broken requirement.
  static_assert(
      composition_checks<Source, PrefetchRecipe, Model, Optimizer, Checkpointer, Reducer>::passed);

 public:
  using source_type = Source;
  using prefetcher_type = typename PrefetchRecipe::template bind<Source>;
  using model_type = Model;
  using context_type = execution_context_t<typename Model::memory_space>;
  using optimizer_type = Optimizer;
  using checkpointer_type = Checkpointer;

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
        output_(out, rank_output(cfg_, rank()), cfg_.steps) {
    if (val) {
      val_.emplace(std::move(*val));
      val_start_ = val_->position();
    }
    const run_shape shape = shape_of(train_, val_, world_size());
    require_valid(cfg_, shape);  // every problem at once, named by field path
    accum_ = trainkit::grad_accum_steps(cfg_, shape);
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
  void on_step(step_callback callback) { output_.on_step(std::move(callback)); }

  /// Optimizer steps completed so far (after a resume: the checkpoint's step).
  std::uint64_t step() const noexcept { return step_; }
  int grad_accum_steps() const noexcept { return accum_; }
  /// Micro-batches per rank of optimizer step `step` (0-based): grad_accum_steps(), or fewer
  /// while trainer_config::batch_ramp grows the batch (trainer/batch_ramp.hpp).
  int grad_accum_steps_at(std::uint64_t step) const noexcept {
    if (!cfg_.batch_ramp.on()) return accum_;
    const std::size_t round = std::size_t(world_size()) * std::size_t(train_.batch_size()) *
                              std::size_t(train_.seq_len());
    return ramp_rounds(cfg_.batch_ramp, std::size_t(accum_) * round, round, step);
  }
  /// Tokens per optimizer step over all ranks (the full batch, after any ramp).
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
    return validation_loss(*val_, model_, cfg_.eval_batches, reducer_);
  }

  /// Restores the newest valid checkpoint; returns false when there is none. Collective with
  /// a sharded optimizer (every rank loads the common part and its own shard).
  bool resume() {
    auto state = gather_state();  // views of the policies' storage, which the load fills
    const bool loaded = load_latest_state(checkpointer_, state, reducer_);
    report_load_warnings(checkpointer_, output_.console());
    if (!loaded) return false;
    const checkpoint::checkpoint_state& common = common_part(state);
    train_.seek(resume_position(common, cfg_.meta));
    step_ = common.step;
    return true;
  }

  /// Runs from the current step to `config().steps` (or until a stop is requested).
  run_result run() {
    run_result result;
    if (cfg_.resume && resume()) {
      result.resumed = true;
      output_.console().say("resumed from checkpoint at step " + std::to_string(step_) + "\n");
    }
    result.first_step = step_ + 1;
    // Set-up, not stall: the checkpointer's staging memory, before step 1 (prepares_saves).
    if constexpr (checkpoint::prepares_saves<Checkpointer>)
      if (rank() == 0 && (cfg_.ckpt_every > 0 || cfg_.ckpt_at_end)) {
        auto state = gather_state();
        checkpointer_.prepare(common_part(state));
      }
    const step_rates rates = measure_step_rates(model_, train_.seq_len(), world_size(), cfg_.mfu,
                                                output_.console(), result.calibration);
    output_.open_files(result.resumed, make_run_header(model_, cfg_, rates, world_size(),
                                                       tokens_per_step(), int(train_.seq_len())));
    std::uint64_t last_saved = step_;
    stopwatch step_clock;  // lapped once per step: consecutive steps tile the run's wall time

    while (step_ < std::uint64_t(cfg_.steps)) {
      if (any_rank(stop_requested())) {
        result.stopped = true;
        break;
      }
      step_metrics m;
      nvtx_range step_range("step", nvtx_colors::step);  // the phases' ranges nest inside it
      phase_clock clock(m);
      m.log_ms += output_.take_callback_ms();
      {
        auto timed = clock.time(phase::log);  // the previous step's metrics block this step
        output_.flush();
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
        report_save_error(checkpointer_, output_.console());  // a failed background save
        output_.show(with_rates(m, m.phases_ms(), rates));    // the time known so far
      }
      m = with_rates(m, step_clock.lap_ms(), rates);  // the step is complete: dt_ms, other_ms
      result.steps.push_back(m);
      output_.hold(m);
      if (!std::isfinite(m.loss)) output_.diverged(m);  // the loss is the ranks' mean: all see it
      const bool go_on = output_.call(m);
      // A callback's stop on one rank stops every rank (also where no callback is set).
      if (any_rank(!go_on) && !last) {
        result.stopped = true;
        break;
      }
    }
    end_run(result, rates, last_saved);
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
    // A model whose computation follows a schedule (the Llama recipe's attention windows) is told
    // the step; it is restored on resume, so a resumed run computes as the one it continues.
    if constexpr (requires { model_.set_step(std::int64_t{}); })
      model_.set_step(std::int64_t(step_));
    // 1/(micro-batches × ranks): the reducer sums the ranks' shares of the mean.
    const int accum = grad_accum_steps_at(step_);  // accum_ unless a batch ramp is on
    trainkit::model::micro_step micro{
        1.0f / float(accum * world_size()), 0, accum, {&reducer_, &bucket_ready}};
    for (int k = 0; k < accum; ++k) {
      micro.index = k;
      const auto batch = timed_next_batch(train_, ctx_, clock, m);
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
      // The part of the gradients' reduction across ranks that backward did not hide (on a
      // device: the stream's wait for it, booked after the synchronisation below).
      device_timed timed(clock, ctx_, device_phase::comm);
      reducer_.finish();
    }
    const auto scale = [&] {
      device_timed timed(clock, ctx_, device_phase::optimizer);
      m.step = ++step_;
      m.lr = schedule_.at(int(step_ - 1));
      // At the trainer's threshold; the reducer says where the summed gradients are (all of the
      // buffer, or this rank's shard) and combines the ranks' partial sums of squares.
      const std::span<const typename Model::parameter_type> grads(model_.gradients());
      return clip_(grads, model_.gradient_buckets(), reducer_, double(cfg_.grad_clip), ctx_);
    }();
    if constexpr (checkpoint::defers_snapshot<Checkpointer>) {
      // The last save's copy reads the state before the update changes it: the loop is blocked
      // by the checkpointer for whatever of the copy the forward/backward did not hide.
      device_timed timed(clock, ctx_, device_phase::ckpt_stall);
      checkpointer_.before_update();
    }
    {
      device_timed timed(clock, ctx_, device_phase::optimizer);
      optimizer_.update(model_, float(m.lr), scale, ctx_);
    }
    {
      // On a device this waits for the whole step's kernels; the host time lands in compute.
      auto timed = clock.time(phase::compute);
      ctx_.synchronize();
      m.loss = average_over_ranks(reducer_, model_.step_loss());
      m.grad_norm = float(clip_.norm());  // logged at float precision, the gradients' own
    }
    // On a device: what the stream waited for in each phase, moved out of compute (where the
    // host's wait above landed) into that phase (trainer/device_phases.hpp).
    account_device_phases(ctx_, clock, m);
  }

  /// Whether this step is a multiple of `every` (0 = never).
  bool due(int every) const noexcept { return every > 0 && step_ % std::uint64_t(every) == 0; }

  /// After the last step: the files complete, a stopped run's checkpoint, saves in flight
  /// finished, the summary computed and handed to the sinks.
  void end_run(run_result& result, const step_rates& rates, std::uint64_t last_saved) {
    output_.flush();
    if (result.stopped && cfg_.ckpt_at_end && last_saved != step_) save_checkpoint();
    checkpointer_.wait();  // a save still in flight completes before the run returns
    report_save_error(checkpointer_, output_.console());
    result.last_step = step_;
    result.summary = summarize(result.steps, {}, summary_basis(rates, cfg_.mfu));
    output_.end(result.summary);
  }

  static void bucket_ready(void* reducer, std::size_t bucket) {
    static_cast<Reducer*>(reducer)->bucket_ready(bucket);
  }

  auto gather_state() {
    return trainkit::gather_state(model_, optimizer_, cfg_.meta, {step_, train_.position()});
  }

  /// Collective with a sharded optimizer (every rank writes its shard); else rank 0 writes.
  void save_checkpoint() {
    save_state(checkpointer_, gather_state(), reducer_, rank());
    report_save_error(checkpointer_, output_.console());
  }

  // Data parallelism (trainer/ranks.hpp): a reducer that is not rank_aware is one process.
  int rank() const noexcept { return rank_of(reducer_); }
  int world_size() const noexcept { return world_size_of(reducer_); }
  bool any_rank(bool flag) { return trainkit::any_rank(reducer_, flag); }

  trainer_config cfg_;  // as given: what it implies is computed (config.hpp), not written back
  context_type ctx_;    // first: policies may hold references to it until they are destroyed
  optim::lr_schedule schedule_ = run_schedule(cfg_);
  Model model_;
  Optimizer optimizer_;
  Checkpointer checkpointer_;
  Reducer reducer_;
  optim::grad_clip_t<typename Model::memory_space> clip_;  // the clipping step, at cfg_.grad_clip
  prefetcher_type train_;
  std::optional<prefetcher_type> val_;
  source_position val_start_{};
  run_output output_;  // this rank's console, files and callback (only rank 0 shows and stores)
  std::uint64_t step_ = 0;
  int accum_ = 1;
};

}  // namespace trainkit
