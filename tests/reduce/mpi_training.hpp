// Shared by the MPI reducer tests: a trainer on d2's shape over the synthetic stream's rank slice,
// and the comparison of a data-parallel run with the one-process run accumulating ranks ×
// micro-batches (bit for bit with 2 ranks of 1 micro-batch, 1e-5 otherwise; docs/distributed.md).
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <utility>
#include <vector>

#include "trainkit/checkpoint/no_checkpoint.hpp"
#include "trainkit/data/synthetic_source.hpp"
#include "trainkit/model/gpt2/cpu.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/zero1_adamw_cpu.hpp"
#include "trainkit/prefetch/threaded_prefetcher.hpp"
#include "trainkit/reduce/mpi_allreduce.hpp"
#include "trainkit/reduce/single.hpp"
#include "trainkit/trainer/trainer.hpp"

namespace trainkit_test {

namespace tk = trainkit;

/// The part of a model a reducer reads: flat gradients and their buckets.
struct bucketed_gradients {
  using memory_space = tk::host_memory;
  using parameter_type = float;
  std::vector<float> grads;
  std::vector<tk::model::gradient_bucket> buckets;
  std::span<float> gradients() { return grads; }
  std::span<const tk::model::gradient_bucket> gradient_buckets() const { return buckets; }
};

/// n floats uniform in [-3, 3), reproducible from the seed.
inline std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

tk::data::synthetic_source synthetic(int B, int T, int rank, int ranks, int vocab = 100) {
  return tk::data::synthetic_source({.batch_size = B,
                                     .seq_len = T,
                                     .vocab_size = vocab,
                                     .alphabet = 20,
                                     .branching = 2,
                                     .seed = 5,
                                     .rank = rank,
                                     .world_size = ranks});
}

// d2's shape (2 layers, 2 heads, 128 channels) with a small vocabulary, so 20 steps take a
// fraction of a second on one thread.
inline tk::model::gpt2_config d2_small_vocab() {
  return {.max_seq_len = 16,
          .vocab_size = 100,
          .padded_vocab_size = 128,
          .num_layers = 2,
          .num_heads = 2,
          .channels = 128};
}

struct run_record {
  std::vector<double> loss;
  std::vector<double> val_loss;
  std::vector<double> grad_norm;
  std::vector<float> parameters;
  tk::run_result result;
};

struct run_options {
  int steps = 20;
  int eval_every = 0;
  std::function<bool(const tk::step_metrics&)> on_step;  // also decides when to stop
  int ckpt_every = 0;
  MPI_Comm optimizer_comm = MPI_COMM_WORLD;  // ZeRO-1's ranks (the reducer's own communicator)
};

// A trainer with `micro_batches` micro-batches per rank on the rank slice of the synthetic
// stream; with `rank` and `ranks` = 0, 1 it is the one-process reference.
template <class Reducer, class Checkpointer = tk::checkpoint::no_checkpoint,
          class Optimizer = tk::optim::adamw_cpu>
run_record train(int rank, int ranks, int micro_batches, Reducer reducer, run_options o = {},
                 Checkpointer checkpointer = {}, bool resume = false) {
  constexpr int B = 2, T = 8;
  tk::trainer_config cfg;
  cfg.resume = resume;
  cfg.steps = o.steps;
  cfg.output.console.quiet = true;
  cfg.total_batch_tokens = std::size_t(micro_batches) * std::size_t(ranks) * B * T;
  cfg.eval_every = o.eval_every;
  cfg.ckpt_every = o.ckpt_every;
  cfg.eval_batches = 5;  // not a multiple of the ranks: rank 0 evaluates one more
  cfg.schedule.kind = tk::optim::schedule_kind::constant;
  cfg.schedule.max_lr = 3e-3f;
  cfg.grad_clip = 0.5f;  // small: clipping acts on every step
  const tk::optim::adamw_config ac{};
  typename Optimizer::config_type optimizer_config(ac);
  if constexpr (std::same_as<typename Optimizer::config_type, tk::optim::zero1_adamw_config>)
    optimizer_config.comm = o.optimizer_comm;
  std::ostringstream quiet;
  std::optional<tk::data::synthetic_source> val;
  if (o.eval_every > 0) {
    auto v = synthetic(B, T, rank, ranks).config();
    v.seed = 77;
    val.emplace(v);
  }
  tk::trainer<tk::data::synthetic_source, tk::prefetch::threaded<2>, tk::model::gpt2_cpu, Optimizer,
              Checkpointer, Reducer>
      t(cfg, synthetic(B, T, rank, ranks), std::move(val),
        tk::model::gpt2_cpu(d2_small_vocab(), 11), optimizer_config, std::move(checkpointer),
        std::move(reducer), quiet);
  EXPECT_EQ(t.grad_accum_steps(), micro_batches);
  EXPECT_EQ(t.tokens_per_step(), std::size_t(micro_batches) * std::size_t(ranks) * B * T);
  run_record r;
  t.on_step([&](const tk::step_metrics& m) {
    r.loss.push_back(m.loss);
    r.val_loss.push_back(m.val_loss);
    r.grad_norm.push_back(m.grad_norm);
    return o.on_step ? o.on_step(m) : true;
  });
  r.result = t.run();
  const auto p = t.model().parameters();
  r.parameters.assign(p.begin(), p.end());
  return r;
}

inline bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// The trainer's contract: what every rank logs is the mean over all ranks (averaged through the
// reducer); the one-process reference accumulates ranks × micro-batches. With 2 ranks of 1
// micro-batch the arithmetic is the same operations in the same order (docs/distributed.md), so
// losses, norms and weights are equal bit for bit; otherwise the sums are grouped differently.
template <class Reducer = tk::reduce::mpi_allreduce, class Optimizer = tk::optim::adamw_cpu>
void expect_matches_one_process(int micro_batches, const run_options& o = {}) {
  Reducer reducer;
  const int rank = reducer.rank(), n = reducer.world_size();
  const bool exact = n == 2 && micro_batches == 1;
  // Every rank computes the single-process reference itself.
  const run_record one = train(0, 1, n * micro_batches, tk::reduce::single{}, o);
  const run_record dp = train<Reducer, tk::checkpoint::no_checkpoint, Optimizer>(
      rank, n, micro_batches, std::move(reducer), o);
  ASSERT_EQ(one.loss.size(), dp.loss.size());
  for (std::size_t s = 0; s < one.loss.size(); ++s) {
    if (exact) {
      EXPECT_TRUE(same_bits(dp.loss[s], one.loss[s]))
          << "step " << s + 1 << ": " << dp.loss[s] << " vs " << one.loss[s];
      EXPECT_TRUE(same_bits(dp.grad_norm[s], one.grad_norm[s])) << "step " << s + 1;
    } else {
      EXPECT_NEAR(dp.loss[s], one.loss[s], 1e-5 * one.loss[s]) << "step " << s + 1;
      // The norm is of the reduced gradient: a wrong divisor scales it.
      EXPECT_NEAR(dp.grad_norm[s], one.grad_norm[s], 1e-4 * one.grad_norm[s]) << "step " << s + 1;
    }
    // The validation loss is summed in global batch order from one rank's loss per batch.
    if (!std::isnan(one.val_loss[s]) || !std::isnan(dp.val_loss[s])) {
      EXPECT_TRUE(exact ? same_bits(dp.val_loss[s], one.val_loss[s])
                        : std::abs(dp.val_loss[s] - one.val_loss[s]) <= 1e-5 * one.val_loss[s])
          << "val loss at step " << s + 1 << ": " << dp.val_loss[s] << " vs " << one.val_loss[s];
    }
  }
  ASSERT_EQ(dp.parameters.size(), one.parameters.size());
  if (exact) {
    EXPECT_EQ(std::memcmp(dp.parameters.data(), one.parameters.data(),
                          one.parameters.size() * sizeof(float)),
              0)
        << "weights after " << one.loss.size() << " steps";
  } else {
    float worst = 0;
    for (std::size_t i = 0; i < one.parameters.size(); ++i)
      worst = std::max(worst, std::abs(dp.parameters[i] - one.parameters[i]) /
                                  std::max(1.0f, std::abs(one.parameters[i])));
    EXPECT_LT(worst, 1e-4f) << "parameters after " << one.loss.size() << " steps";
  }
  // Every rank holds rank 0's weights: they applied the same reduced gradient.
  std::vector<float> root = dp.parameters;
  ASSERT_EQ(MPI_Bcast(root.data(), int(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(std::memcmp(root.data(), dp.parameters.data(), root.size() * sizeof(float)), 0);
}

}  // namespace trainkit_test
