// trainkit/trainer/config.hpp — a trainer's configuration, its one check and what it implies.
//
// `trainer_config` holds the loop's settings, `cfg.mfu` what a run is measured against and
// `cfg.output` what it shows and stores. `check(cfg, shape)` is the only validation of a trainer
// configuration, in the spirit of CUTLASS's `can_implement`: given the facts it depends on (the
// sources' batch shapes, the number of ranks: `run_shape`) it returns every problem as
// {field path, message}, throws nothing and changes nothing; the trainer throws one config_error
// carrying them all, and a program may call it first to report its users' mistakes before it
// builds anything. The values a configuration implies (micro-batches per step, the schedule's
// length, the console of a rank that does not log) are computed by the functions below from the
// configuration, never written back into it: `trainer::config()` is what the caller gave.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainkit/core/device_info.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/optim/detail/number_text.hpp"
#include "trainkit/optim/schedule.hpp"
#include "trainkit/trainer/batch_ramp.hpp"
#include "trainkit/trainer/sinks/console.hpp"

namespace trainkit {

/// The peak the achieved FLOP/s are measured against (MFU; docs/architecture.md, "Accounting and
/// MFU").
struct mfu_settings {
  bool calibrate = false;  // time a GEMM before step 1; MFU is then also reported against it
  std::string device_name = "cpu";  // for the peak table (CUDA models report their own)
  compute_dtype dtype = compute_dtype::f32;
  double peak_tflops = 0;  // > 0 overrides the peak table

  friend bool operator==(const mfu_settings&, const mfu_settings&) = default;
};

/// What a run shows and stores: the sinks' settings (sinks/console.hpp, sinks/jsonl.hpp,
/// sinks/tensorboard.hpp).
struct output_settings {
  std::filesystem::path metrics_path;     // JSONL metrics; empty = none
  std::filesystem::path tensorboard_dir;  // TensorBoard event file goes here; empty = none
  console_settings console;               // step lines (the files get every step), progress, quiet

  friend bool operator==(const output_settings&, const output_settings&) = default;
};

/// The run's settings: the loop's own (the gradient-clipping threshold among them: the loop's, not
/// the optimizer's), then how it is measured and shown (the optimizer's settings travel in its
/// config_type). Problems are named by their field path ("trainer_config.steps must be >= 0: -1");
/// a program maps them to its flags.
struct trainer_config {
  int steps = 50;  // optimizer steps in the whole run (a resume continues to it)
  std::size_t total_batch_tokens = 0;  // tokens per optimizer step; 0 = one micro-batch of B·T
  batch_ramp_config batch_ramp{};      // grows the tokens per step to that (trainer/batch_ramp.hpp)
  optim::lr_schedule schedule{};       // its total_steps is ignored: the run is `steps` long
  // Global gradient-norm clipping threshold, 0 = off: the trainer's clipping step takes the norm of
  // the summed gradients (optim/grad_clip.hpp), and the optimizer's update scales them by grad_clip
  // / norm when norm > grad_clip > 0 (optim::clip_factor). float, as the threshold always was.
  float grad_clip = 1.0f;
  int eval_every = 0;       // 0 = never (except at the end when a val source exists)
  int eval_batches = 20;    // validation batches per evaluation
  int ckpt_every = 0;       // 0 = only at the end of the run / on a stop request
  bool ckpt_at_end = true;  // save when the run ends or is stopped by a signal
  bool resume = false;      // continue from the newest valid checkpoint, if any
  std::map<std::string, std::string> meta;  // stored in checkpoints; resume checks "model"

  mfu_settings mfu{};
  output_settings output{};

  friend bool operator==(const trainer_config&, const trainer_config&) = default;
};

/// What a configuration is checked against: the sources' batch shapes and the number of ranks.
struct run_shape {
  std::size_t batch_size = 0;  // B of the training source
  std::size_t seq_len = 0;     // T of the training source
  int ranks = 1;               // data-parallel ranks, each reading B·T tokens per micro-batch
  bool has_validation = false;
  std::size_t val_batch_size = 0;  // the validation source's B and T (when has_validation)
  std::size_t val_seq_len = 0;
};

/// The shape of a run whose sources are `train` and `val` (prefetchers or data sources), over
/// `ranks` ranks.
template <class Source>
run_shape shape_of(const Source& train, const std::optional<Source>& val, int ranks) {
  auto size = [](int n) { return std::size_t(std::max(n, 0)); };
  run_shape shape{size(train.batch_size()), size(train.seq_len()), ranks};
  if (val) {
    shape.has_validation = true;
    shape.val_batch_size = size(val->batch_size());
    shape.val_seq_len = size(val->seq_len());
  }
  return shape;
}

/// Tokens per optimizer step the configuration asks for (0 = one micro-batch on every rank).
inline std::size_t step_tokens(const trainer_config& cfg, const run_shape& shape) noexcept {
  const std::size_t micro =
      shape.batch_size * shape.seq_len * std::size_t(std::max(shape.ranks, 1));
  return cfg.total_batch_tokens == 0 ? micro : cfg.total_batch_tokens;
}

/// Every problem of `cfg` for a run of `shape`; empty when the trainer can run it.
inline std::vector<config_problem> check(const trainer_config& cfg, const run_shape& shape) {
  using optim::detail::number_text;
  std::vector<config_problem> problems;
  auto problem = [&](std::string field, std::string rest) {
    std::string message = field + " " + std::move(rest);
    problems.push_back({std::move(field), std::move(message)});
  };
  if (cfg.steps < 0) problem("trainer_config.steps", "must be >= 0: " + std::to_string(cfg.steps));
  const std::size_t bt = shape.batch_size * shape.seq_len;
  if (bt == 0) {
    problem("run_shape.batch_size",
            "x run_shape.seq_len (the training source's batch) must be "
            "positive: " +
                std::to_string(shape.batch_size) + " x " + std::to_string(shape.seq_len));
  } else if (shape.ranks < 1) {
    problem("run_shape.ranks", "must be >= 1: " + std::to_string(shape.ranks));
  } else if (const std::size_t per_round = bt * std::size_t(shape.ranks);
             step_tokens(cfg, shape) % per_round != 0) {
    // Every rank takes the same number of micro-batches in each optimizer step.
    problem("trainer_config.total_batch_tokens",
            std::to_string(cfg.total_batch_tokens) +
                " is not a multiple of the training source's batch_size x seq_len = " +
                std::to_string(bt) +
                (shape.ranks > 1 ? " times " + std::to_string(shape.ranks) + " ranks" : ""));
  }
  if (cfg.batch_ramp.steps < 0)
    problem("trainer_config.batch_ramp.steps",
            "must be >= 0 (0 = off): " + std::to_string(cfg.batch_ramp.steps));
  if (bt > 0 && cfg.batch_ramp.start_tokens > step_tokens(cfg, shape))
    problem("trainer_config.batch_ramp.start_tokens", std::to_string(cfg.batch_ramp.start_tokens) +
                                                          " exceeds the tokens per step, " +
                                                          std::to_string(step_tokens(cfg, shape)));
  if (cfg.eval_every < 0)
    problem("trainer_config.eval_every", "must be >= 0: " + std::to_string(cfg.eval_every));
  // One rule, whatever else is configured: whether a validation source exists is another
  // setting, and a value's check never depends on another setting (a program would otherwise
  // accept --eval-batches 0 with one combination of flags and refuse it with another).
  if (cfg.eval_batches <= 0)
    problem("trainer_config.eval_batches", "must be positive: " + std::to_string(cfg.eval_batches));
  if (shape.has_validation &&
      (shape.val_batch_size != shape.batch_size || shape.val_seq_len != shape.seq_len))
    problem("run_shape.val_batch_size",
            "x run_shape.val_seq_len (the validation source's batch) " +
                std::to_string(shape.val_batch_size) + " x " + std::to_string(shape.val_seq_len) +
                " differs from the training source's " + std::to_string(shape.batch_size) + " x " +
                std::to_string(shape.seq_len));
  if (cfg.ckpt_every < 0)
    problem("trainer_config.ckpt_every", "must be >= 0: " + std::to_string(cfg.ckpt_every));
  if (!(cfg.grad_clip >= 0.0f) || !std::isfinite(cfg.grad_clip))
    problem("trainer_config.grad_clip",
            "must be finite and >= 0 (0 = off): " + number_text(cfg.grad_clip));

  if (!(cfg.mfu.peak_tflops >= 0.0) || !std::isfinite(cfg.mfu.peak_tflops))
    problem("trainer_config.mfu.peak_tflops",
            "must be finite and >= 0 (0 = the device's row of the peak table): " +
                number_text(cfg.mfu.peak_tflops));

  const optim::lr_schedule& s = cfg.schedule;
  if (!(s.max_lr >= 0.0f) || !std::isfinite(s.max_lr))
    problem("trainer_config.schedule.max_lr", "must be finite and >= 0: " + number_text(s.max_lr));
  // A warmup longer than the run is allowed (llm.c allows it too): short smoke runs with the
  // default warmup then simply never reach max_lr.
  if (s.warmup_steps < 0)
    problem("trainer_config.schedule.warmup_steps",
            "must be >= 0: " + std::to_string(s.warmup_steps));
  if (!(s.final_lr_frac >= 0.0f && s.final_lr_frac <= 1.0f))
    problem("trainer_config.schedule.final_lr_frac",
            "must be in [0,1]: " + number_text(s.final_lr_frac));
  if (!(s.decay_frac >= 0.0f && s.decay_frac <= 1.0f))
    problem("trainer_config.schedule.decay_frac", "must be in [0,1]: " + number_text(s.decay_frac));
  return problems;
}

/// Throws one config_error carrying every problem check() finds.
inline void require_valid(const trainer_config& cfg, const run_shape& shape) {
  if (auto problems = check(cfg, shape); !problems.empty()) throw config_error(std::move(problems));
}

/// Micro-batches per optimizer step on each rank. Requires: check(cfg, shape) is empty.
inline int grad_accum_steps(const trainer_config& cfg, const run_shape& shape) noexcept {
  return int(step_tokens(cfg, shape) /
             (shape.batch_size * shape.seq_len * std::size_t(shape.ranks)));
}

/// The learning-rate schedule of the run: `cfg.schedule` stretched over `cfg.steps` (at least 1).
inline optim::lr_schedule run_schedule(const trainer_config& cfg) noexcept {
  optim::lr_schedule s = cfg.schedule;
  s.total_steps = std::max(cfg.steps, 1);
  return s;
}

/// What rank `rank` shows and stores: rank 0 everything `cfg.output` says, the other ranks of a
/// data-parallel run nothing (rank 0 alone writes the metrics, TensorBoard and the console).
inline output_settings rank_output(const trainer_config& cfg, int rank) {
  if (rank == 0) return cfg.output;
  output_settings none;
  none.console = cfg.output.console;
  none.console.quiet = true;
  return none;
}

}  // namespace trainkit
