// train/driver.hpp — gpt_fineweb's training run, one driver for --device cpu and --device cuda,
// every registered model family and every optimizer family.
//
// A run has two phases. The first (train_driver's constructor) checks everything the flags say
// that needs no device: the cross-flag checks, the optimizer and schedule settings, the checkpoint
// mode, the model's shape (a preset or a model file), --seq against it, and the --data/--val
// shards (opened, magic and size checked). Only the second (`run`) touches the device: "no CUDA
// device", the reducer, the checkpointer, the model, the trainer, then the run, the report, the
// chart and the exports. So a bad flag gives the same error on both devices, also on a machine
// without a GPU, and a flag means the same on both because one piece of code reads it.
//
// What differs by device is a small policy (`device_policy` below): the model family's policies
// for that device, the prefetcher, which checkpointers fit its memory. train/cpu.hpp holds the
// CPU one, train/cuda_entry.cuh the CUDA one; the model and optimizer families (families/) are
// template arguments. train/cuda_entry.cuh is compiled by nvcc, so this header and what it includes
// stay free of Eigen (no gpt2_cpu.hpp).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <trainkit/checkpoint/no_checkpoint.hpp>
#include <trainkit/core/error.hpp>
#include <trainkit/data/mmap_token_source.hpp>
#include <trainkit/data/shard_format.hpp>
#include <trainkit/model/sampling.hpp>
#include <trainkit/reduce/single.hpp>
#include <trainkit/report/chart.hpp>
#include <trainkit/report/metrics_reader.hpp>
#include <trainkit/trainer/report.hpp>
#include <trainkit/trainer/tensorboard.hpp>
#include <trainkit/trainer/trainer.hpp>

#include "../data/default_corpus.hpp"
#include "../families/family.hpp"
#include "../hellaswag.hpp"
#include "checkpoint_families.hpp"
#include "options.hpp"
#include "sampler.hpp"

namespace gpt_fineweb {

/// What a device brings to the driver. Requires:
///  - `policies<Family>`: the families' policies on this device (host_policies, cuda_policies),
///    whose `optimizer_type<Model>` is the optimizer of a one-process or all-reduce run (a ZeRO-1
///    run passes its own optimizer to `run_sharded`);
///  - `model_type`, `config_type`, `prefetch_recipe`: the model family's model and config on this
///    device, and the prefetcher;
///  - `name`: the --device value ("cpu", "cuda"), stored as the checkpoints' meta["device"];
///  - `model_config(o)`: the shape of the model the flags name (a preset, --init-from's header,
///    --init-from-hf's config) without touching the device; it may keep a model it loaded on the
///    host for `make_model`;
///  - `check_device()`: throws config_error naming --device when the device cannot run;
///  - `make_model(o, cfg)`: the model (touches the device);
///  - `configure(mfu_settings&, const model_type&)`: the peak table's device name and dtype;
///  - `describe(const model_type&)`: what the "model ..." line says after the parameter count;
///  - `attention()`: the attention engine the run uses ("cudnn", "flash", "naive"; "cpu" on the
///    CPU), stored as meta["attention"] (the metrics file's run line, the report);
///  - `sync_checkpointer(o)`, `async_checkpointer(o)`: the checkpointers of --ckpt-mode sync and
///    async for this model's memory;
///  - `bind(trainer&)`: called once the trainer exists (the CUDA stager orders its copies on the
///    compute stream);
///  - `after_run(const model_type&, ostream&)`: device notes after the report;
///  - `export_model(o, const model_type&, ostream&)`: --export-hf and --export.
template <class D>
concept device_policy = requires(D d, const train_options& o, const typename D::config_type& cfg,
                                 trainkit::mfu_settings& mfu, const typename D::model_type& m,
                                 std::ostream& out) {
  typename D::model_type;
  typename D::config_type;
  typename D::prefetch_recipe;
  { D::name } -> std::convertible_to<std::string_view>;
  { d.model_config(o) } -> std::same_as<typename D::config_type>;
  { d.check_device() } -> std::same_as<void>;
  { d.make_model(o, cfg) } -> std::same_as<typename D::model_type>;
  { d.configure(mfu, m) } -> std::same_as<void>;
  { d.describe(m) } -> std::convertible_to<std::string>;
  { d.attention() } -> std::convertible_to<std::string>;
  d.sync_checkpointer(o);
  d.async_checkpointer(o);
  { d.after_run(m, out) } -> std::same_as<void>;
  { d.export_model(o, m, out) } -> std::same_as<void>;
};

/// An optimizer that reports the bytes of its state (moments; a ZeRO-1 rank: its shard's).
template <class O>
concept reports_state_bytes = requires(const O& o) {
  { o.state_bytes() } -> std::convertible_to<std::size_t>;
};

/// An optimizer family's policies on a device that have a sharded (ZeRO-1) form for `Model`:
/// `zero1_optimizer_type<Model>` and `zero1_config(...)` (families/adamw.hpp).
template <class Policies, class Model>
concept has_zero1_form = requires {
  typename Policies::template zero1_optimizer_type<Model>;
};

/// An optimizer family's policies on a device whose data-parallel all-reduce run (`--reducer mpi`
/// on the CPU, `--reducer nccl` on CUDA) uses another optimizer than one process does:
/// `all_reduce_optimizer_type<Model>` and `all_reduce_config(config)` (on CUDA
/// `all_reduce_config(config, communicator)`; families/muon.hpp: sharded_muon_cpu and
/// sharded_muon_cuda, whose ranks share the work and the state but read the whole all-reduced
/// gradients). Its state is sharded when the
/// optimizer is a checkpoint::sharded_optimizer, so the run takes run_sharded's checkpointers.
template <class Policies, class Model>
concept has_all_reduce_form = requires {
  typename Policies::template all_reduce_optimizer_type<Model>;
};

/// The ranks of a run: one process. (An MPI job's, mpi_launch.hpp, lets rank 0 go first.)
struct one_process {
  int rank = 0;
  int ranks = 1;
  /// make(): constructions that must not race between ranks (a checkpointer removes crashed
  /// saves' temporaries when it is made).
  template <class Make>
  auto rank_zero_first(Make make) const {
    return make();
  }
};

/// Writes the embedded corpus as llm.c shards in a fresh temporary directory, so the run with no
/// --data goes through the same mmap'd-shard path as a real one.
inline std::filesystem::path write_default_corpus() {
  namespace fs = std::filesystem;
  namespace tk = trainkit;
  const fs::path dir =
      fs::temp_directory_path() / ("trainkit-default-corpus-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  tk::data::write_shard((dir / "default_train_000000.bin").string(),
                        std::span<const std::uint16_t>(default_corpus_tokens));
  tk::data::write_shard((dir / "default_val_000000.bin").string(),
                        std::span<const std::uint16_t>(default_corpus_val_tokens));
  return dir;
}

/// Removes the temporary corpus directory on every exit path.
struct scoped_dir {
  std::filesystem::path path;
  scoped_dir() = default;
  scoped_dir(const scoped_dir&) = delete;
  scoped_dir& operator=(const scoped_dir&) = delete;
  ~scoped_dir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

/// Rank r of a data-parallel run prints nothing on stdout (rank 0 speaks for all); stderr stays.
struct mute_stdout_unless_rank_zero {
  bool muted;
  explicit mute_stdout_unless_rank_zero(int rank) : muted(rank != 0) {
    if (muted) std::cout.setstate(std::ios::badbit);
  }
  mute_stdout_unless_rank_zero(const mute_stdout_unless_rank_zero&) = delete;
  mute_stdout_unless_rank_zero& operator=(const mute_stdout_unless_rank_zero&) = delete;
  ~mute_stdout_unless_rank_zero() {
    if (muted) std::cout.clear();
  }
};

/// The end-of-run chart: --chart, or <metrics>.svg beside --metrics. It is drawn from the
/// metrics file when there is one, so a resumed run's chart shows the whole run.
inline void write_run_chart(const train_options& o,
                            const std::vector<trainkit::step_metrics>& steps) {
  namespace fs = std::filesystem;
  fs::path chart = o.chart;
  if (chart.empty() && !o.metrics.empty()) chart = fs::path(o.metrics).replace_extension(".svg");
  if (chart.empty()) return;
  const std::string title =
      "gpt_fineweb " + o.arch + " " + o.model + " " + o.optimizer + " (" + o.device + ")";
  if (!o.metrics.empty()) {
    const auto file = trainkit::read_metrics_jsonl(o.metrics);
    trainkit::write_chart_svg(chart, file.steps, {.title = title});
  } else {
    trainkit::write_chart_svg(chart, steps, {.title = title});
  }
  std::cout << "chart: " << chart.string() << "\n";
}

/// --sample-every and --hellaswag-every during training, on rank 0 (every rank holds the same
/// weights): the sampler and the HellaSwag scorer (hellaswag.hpp).
class training_evals {
 public:
  training_evals(const train_options& o, int rank) : o_(o) {
    if (rank != 0) return;
    if (o.sample_every > 0) samples_.emplace(sampler::from_options(o));
    if (o.hellaswag_every > 0)
      hellaswag_.emplace(o.hellaswag, o.vocab, o.hellaswag_limit, o.hellaswag_every, o.metrics,
                         o.tensorboard);
  }

  bool any() const noexcept { return samples_ || hellaswag_; }

  /// After step `step`: a sample and a HellaSwag score when it is their turn.
  template <class Model>
  void after_step(Model& model, std::uint64_t step) {
    if (samples_ && step % std::uint64_t(o_.sample_every) == 0)
      std::cout << "---- sample at step " << step << " ----\n"
                << (*samples_)(model, step) << "\n----\n";
    if (hellaswag_) hellaswag_->after_step(model, step);
  }

  /// After the run: the last step is scored too.
  template <class Model>
  void after_run(Model& model, const trainkit::run_result& result) {
    if (hellaswag_) hellaswag_->after_run(model, result.last_step, !result.steps.empty());
  }

  /// This run's HellaSwag scores, for the report.
  void report(std::ostream& out) const {
    if (hellaswag_) hellaswag_->report(out);
  }

 private:
  const train_options& o_;
  std::optional<sampler> samples_;
  std::optional<hellaswag_during_training> hellaswag_;
};

template <device_policy Device, optimizer_family OptimizerFamily>
class train_driver {
 public:
  using model_type = typename Device::model_type;
  using config_type = typename Device::config_type;
  using optimizer_policies = typename Device::template policies<OptimizerFamily>;

  /// Phase 1: every check that needs no device. Throws config_error (naming the flag; main()
  /// maps library field names with flag_names.hpp), format_error or io_error.
  /// `rank` of `ranks` reads its slice of every global batch (data parallel; one process: 0 of 1).
  train_driver(const train_options& o, Device device,
               const typename OptimizerFamily::flags& optimizer_flags, int rank = 0, int ranks = 1)
      : o_(o), device_(std::move(device)), ranks_{rank, ranks}, mute_(rank) {
    namespace tk = trainkit;
    o_.validate();
    // The library's one check of the trainer's settings (every problem at once, by field path;
    // flag_names.hpp names the flags). The trainer runs it again when it is made, after the
    // device; here it comes before the data, the model file and the device are looked at.
    config_ = make_trainer_config(o_);
    tk::require_valid(config_, run_shape());
    optimizer_config_ = OptimizerFamily::config(o_, optimizer_flags);
    if (o_.ckpt_mode != "none" && o_.ckpt_dir.empty())
      throw tk::config_error("--ckpt-mode " + o_.ckpt_mode + " needs --ckpt-dir DIR");

    std::string data = o_.data, val = o_.val;
    if (data.empty()) {
      corpus_.path = write_default_corpus();
      data = (corpus_.path / "default_train_*.bin").string();
      if (val.empty()) val = (corpus_.path / "default_val_*.bin").string();
      std::cout << "no --data given: training on the embedded corpus ("
                << std::size(default_corpus_tokens) << " tokens of Python documentation text)\n";
    }

    model_config_ = device_.model_config(o_);
    const config_type& mc = model_config_;
    if (o_.seq > mc.max_seq_len)
      throw tk::config_error("--seq " + std::to_string(o_.seq) +
                             " exceeds the model's max_seq_len " + std::to_string(mc.max_seq_len));

    train_.emplace(tk::data::mmap_source_config{data, o_.batch, o_.seq, mc.vocab_size,
                                                tk::data::parse_order(o_.order), o_.seed,
                                                o_.layout_of(o_.data), ranks_.rank, ranks_.ranks});
    if (!val.empty())
      val_.emplace(tk::data::mmap_source_config{val, o_.batch, o_.seq, mc.vocab_size,
                                                tk::data::order_kind::sequential, 0,
                                                o_.layout_of(o_.val), ranks_.rank, ranks_.ranks});

    config_.meta["model"] = mc.to_string();
    config_.meta["device"] = std::string(Device::name);
    config_.meta["attention"] = device_.attention();
    // The families a checkpoint was written by: --resume with others is refused here, by name,
    // before the device, rather than at a tensor that does not fit (or one that happens to).
    config_.meta["arch"] = o_.arch;
    config_.meta["optimizer"] = o_.optimizer;
    if (o_.resume) refuse_foreign_checkpoint(o_.ckpt_dir, config_.meta);
  }

  train_driver(const train_driver&) = delete;
  train_driver& operator=(const train_driver&) = delete;

  /// Phase 2, one process: trains with the optimizer family's optimizer and no reducer.
  int run() {
    return run<typename optimizer_policies::template optimizer_type<model_type>>(
        [] { return trainkit::reduce::single{}; }, ranks_);
  }

  /// Phase 2: the device check, then `make_reducer()` (after it: a rank may select its GPU
  /// there), the checkpointer of --ckpt-mode (built by rank 0 first), the model, the trainer and
  /// the run. `Ranks` has rank_zero_first (one_process, mpi_launch.hpp's mpi_ranks).
  template <class Optimizer, class MakeReducer, class Ranks>
  int run(MakeReducer make_reducer, const Ranks& ranks) {
    device_.check_device();
    auto reducer = make_reducer();
    if (o_.ckpt_mode == "none")
      return train<Optimizer>(trainkit::checkpoint::no_checkpoint{}, std::move(reducer));
    if (o_.ckpt_mode == "sync")
      return train<Optimizer>(ranks.rank_zero_first([&] { return device_.sync_checkpointer(o_); }),
                              std::move(reducer));
    // async: saves snapshot the state and write it on a background thread; run() waits for the
    // last one before it returns, also after SIGINT/SIGTERM.
    return train<Optimizer>(ranks.rank_zero_first([&] { return device_.async_checkpointer(o_); }),
                            std::move(reducer));
  }

  /// Phase 2 of a ZeRO-1 run, whose optimizer state is sharded over the ranks: the device check,
  /// `make_reducer()` (a rank may select its GPU there), the checkpointer of --ckpt-mode — none,
  /// or sync's sharded checkpoints (built by rank 0 first); async has no sharded form and
  /// train_options::validate refuses it — then the optimizer's config, `make_config(family's
  /// config)` (it
  /// may name the communicator make_reducer made), the model, the trainer and the run.
  template <class Optimizer, class MakeReducer, class MakeConfig, class Ranks>
  int run_sharded(MakeReducer make_reducer, MakeConfig make_config, const Ranks& ranks) {
    device_.check_device();
    auto reducer = make_reducer();
    if (o_.ckpt_mode == "none")
      return train<Optimizer>(trainkit::checkpoint::no_checkpoint{}, std::move(reducer),
                              make_config(optimizer_config_));
    if (o_.ckpt_mode != "sync")
      throw trainkit::config_error("--ckpt-mode " + o_.ckpt_mode + ": --reducer " + o_.reducer +
                                   " saves sharded checkpoints with --ckpt-mode sync only");
    // Every rank writes its shard of the optimizer state, rank 0 the model and one manifest that
    // commits them (checkpoint/sharded.hpp). Rank 0 builds its checkpointer first: construction
    // removes stale temporary folders.
    return train<Optimizer>(ranks.rank_zero_first([&] { return device_.sync_checkpointer(o_); }),
                            std::move(reducer), make_config(optimizer_config_));
  }

 private:
  /// The batch every rank reads (--batch x --seq, the validation source's the same) and the
  /// number of ranks, what the trainer's settings are checked against.
  trainkit::run_shape run_shape() const {
    trainkit::run_shape shape;
    shape.batch_size = shape.val_batch_size = std::size_t(o_.batch);
    shape.seq_len = shape.val_seq_len = std::size_t(o_.seq);
    shape.ranks = ranks_.ranks;
    shape.has_validation = !o_.val.empty() || o_.data.empty();  // the embedded corpus has one
    return shape;
  }

  template <class Optimizer, class Checkpointer, class Reducer>
  int train(Checkpointer checkpointer, Reducer reducer) {
    return train<Optimizer>(std::move(checkpointer), std::move(reducer),
                            typename Optimizer::config_type(optimizer_config_));
  }

  template <class Optimizer, class Checkpointer, class Reducer>
  int train(Checkpointer checkpointer, Reducer reducer,
            typename Optimizer::config_type optimizer_config) {
    namespace tk = trainkit;
    using trainer_type = tk::trainer<tk::data::mmap_token_source, typename Device::prefetch_recipe,
                                     model_type, Optimizer, Checkpointer, Reducer>;
    const int rank = ranks_.rank, ranks = ranks_.ranks;
    model_type model = device_.make_model(o_, model_config_);
    tk::trainer_config tc = config_;
    device_.configure(tc.mfu, model);
    std::cout << "model " << model_config_.to_string() << " | " << model.num_parameters()
              << " parameters" << device_.describe(model) << "\n";
    trainer_type t(std::move(tc), std::move(*train_), std::move(val_), std::move(model),
                   std::move(optimizer_config), std::move(checkpointer), std::move(reducer));
    train_.reset();
    device_.bind(t);
    std::cout << "batch " << o_.batch << "x" << o_.seq << " | grad accumulation "
              << t.grad_accum_steps() << " | " << t.tokens_per_step() << " tokens/step | "
              << o_.steps << " steps\n";
    if (ranks > 1) {
      std::cout << ranks << " ranks (--reducer " << o_.reducer << ")";
      if constexpr (reports_state_bytes<Optimizer>)
        std::cout << " | optimizer state "
                  << tk::detail::format("%.2f", double(t.optimizer().state_bytes()) / (1 << 20))
                  << " MiB per rank";
      std::cout << "\n";
    }

    // Samples and HellaSwag need logits; train_options::validate refuses their flags for a
    // device whose model has none (gpt2_cuda today).
    std::optional<training_evals> evals;
    if constexpr (tk::model::logit_model<model_type>) {
      evals.emplace(o_, rank);
      if (evals->any())
        t.on_step([&](const tk::step_metrics& m) {
          evals->after_step(t.model(), m.step);
          return true;
        });
    }

    const auto result = t.run();
    if constexpr (tk::model::logit_model<model_type>) evals->after_run(t.model(), result);
    if (result.stopped) std::cout << "stopped by signal at step " << result.last_step << "\n";
    if (!result.steps.empty()) {
      std::cout << "---- report ----\n" << tk::format_summary(result.summary);
      if (!std::isnan(result.final_val_loss))
        std::printf("final val loss %.4f\n", result.final_val_loss);
      if (evals) evals->report(std::cout);
    }
    device_.after_run(t.model(), std::cout);
    if (rank == 0) {
      if (!result.steps.empty()) write_run_chart(o_, result.steps);
      device_.export_model(o_, t.model(), std::cout);
    }
    return 0;
  }

  const train_options& o_;
  Device device_;
  one_process ranks_;  // this rank and the number of ranks
  mute_stdout_unless_rank_zero mute_;
  scoped_dir corpus_;  // the embedded corpus's shards, when there is no --data
  config_type model_config_;
  std::optional<trainkit::data::mmap_token_source> train_, val_;
  trainkit::trainer_config config_;
  typename OptimizerFamily::config_type optimizer_config_;
};

}  // namespace gpt_fineweb
