// Tests of reduce::mpi_allreduce, run by ctest under mpiexec with 2 ranks: buckets of random
// floats reduce to the mean over ranks, exactly as each rank computes it from every rank's seed;
// odd-length, split and empty buckets; misuse of the protocol throws on every rank alike (no
// hang); and a trainer with 2 ranks × 1 micro-batch matches 1 process × 2 micro-batches of
// gradient accumulation step by step, with both ranks holding identical weights.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "trainkit/checkpoint/no_checkpoint.hpp"
#include "trainkit/data/synthetic_source.hpp"
#include "trainkit/model/gpt2_cpu.hpp"
#include "trainkit/model/step_protocol.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/prefetch/threaded_prefetcher.hpp"
#include "trainkit/reduce/mpi_allreduce.hpp"
#include "trainkit/reduce/mpi_session.hpp"
#include "trainkit/trainer/trainer.hpp"

namespace tk = trainkit;

namespace {

/// The part of a model the reducer reads: flat gradients and their buckets.
struct bucketed_gradients {
  using memory_space = tk::host_memory;
  using parameter_type = float;
  std::vector<float> grads;
  std::vector<tk::model::gradient_bucket> buckets;
  std::span<float> gradients() { return grads; }
  std::span<const tk::model::gradient_bucket> gradient_buckets() const { return buckets; }
};

struct double_gradients {
  using memory_space = tk::host_memory;
  using parameter_type = double;
  std::vector<double> grads;
  std::vector<tk::model::gradient_bucket> buckets{{"all", {{0, 5}}}};
  std::span<double> gradients() { return grads; }
  std::span<const tk::model::gradient_bucket> gradient_buckets() const { return buckets; }
};

std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::uint64_t seed_of(int rank) {
  return 1000 + 17 * std::uint64_t(rank);
}

// Buckets published in an order other than the buffer's (as backward does), one of odd length,
// one split into two ranges around another, one empty.
bucketed_gradients odd_layout(int rank) {
  bucketed_gradients m;
  m.grads = random_floats(1000 + 37, seed_of(rank));
  m.buckets = {{"tail", {{901, 136}}},
               {"odd", {{300, 601}}},
               {"empty", {}},
               {"split", {{0, 100}, {200, 100}}},
               {"middle", {{100, 100}}}};
  tk::model::check_buckets_tile(m.buckets, m.grads.size(), "test layout");
  return m;
}

TEST(MpiAllreduce, RunsOnTwoRanks) {
  tk::reduce::mpi_allreduce r;
  EXPECT_EQ(r.world_size(), 2) << "ctest runs this under mpiexec -n 2";
  int world_rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  EXPECT_EQ(r.rank(), world_rank);
}

TEST(MpiAllreduce, BucketsBecomeTheMeanOverRanksComputedFromEveryRanksSeed) {
  tk::reduce::mpi_allreduce r;
  const int n = r.world_size();
  bucketed_gradients m = odd_layout(r.rank());
  tk::host_context ctx;
  r.attach(m, ctx);
  for (int step = 0; step < 2; ++step) {  // the reducer resets between steps
    const auto mine = random_floats(m.grads.size(), seed_of(r.rank()) + std::uint64_t(step));
    std::copy(mine.begin(), mine.end(), m.grads.begin());  // in place: attach kept the address
    for (std::size_t i = 0; i < m.buckets.size(); ++i) r.bucket_ready(i);
    r.finish();
    std::vector<float> sum = random_floats(m.grads.size(), seed_of(0) + std::uint64_t(step));
    for (int k = 1; k < n; ++k) {
      const auto other = random_floats(m.grads.size(), seed_of(k) + std::uint64_t(step));
      for (std::size_t j = 0; j < sum.size(); ++j) sum[j] += other[j];
    }
    for (std::size_t j = 0; j < sum.size(); ++j) {
      const float mean = sum[j] / float(n);
      // Two addends sum the same in any order; more ranks may be summed in another order.
      if (n == 2)
        ASSERT_EQ(m.grads[j], mean) << "element " << j << " step " << step;
      else
        ASSERT_NEAR(m.grads[j], mean, 1e-6f * std::abs(mean) + 1e-7f) << "element " << j;
    }
  }
}

TEST(MpiAllreduce, DoubleGradientsToo) {
  tk::reduce::mpi_allreduce r;
  double_gradients m{{1.0 + r.rank(), 2.0, -3.0 * r.rank(), 0.25, 7.0 * (r.rank() + 1)}};
  tk::host_context ctx;
  r.attach(m, ctx);
  r.bucket_ready(0);
  r.finish();
  const double n = r.world_size();
  const double rank_sum = n * (n - 1) / 2;  // 0 + 1 + ... + n-1
  EXPECT_EQ(m.grads, (std::vector<double>{(n + rank_sum) / n, 2.0, -3.0 * rank_sum / n, 0.25,
                                          7.0 * (rank_sum + n) / n}));
}

TEST(MpiAllreduce, ProtocolMisuseThrowsOnEveryRankWithoutHanging) {
  tk::reduce::mpi_allreduce r;
  bucketed_gradients m = odd_layout(r.rank());
  EXPECT_THROW(r.bucket_ready(0), tk::config_error) << "before attach";
  tk::host_context ctx;
  r.attach(m, ctx);
  EXPECT_THROW(r.bucket_ready(m.buckets.size()), tk::config_error);
  r.bucket_ready(0);
  EXPECT_THROW(r.bucket_ready(0), tk::config_error) << "published twice";
  try {
    r.finish();  // buckets 1.. never published
    ADD_FAILURE() << "finish() with unpublished buckets did not throw";
  } catch (const tk::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("'odd'"), std::string::npos) << e.what();
  }
  // The reducer is usable again: a full step after the failed one.
  for (std::size_t i = 0; i < m.buckets.size(); ++i) r.bucket_ready(i);
  EXPECT_NO_THROW(r.finish());
}

TEST(MpiAllreduce, MpiFailureThrowsNamingTheCall) {
  // MPI_COMM_NULL is invalid for MPI_Comm_dup; the world communicator's handler is made to
  // return the code so the failure reaches the reducer instead of aborting the job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  try {
    tk::reduce::mpi_allreduce r(MPI_COMM_NULL);
    ADD_FAILURE() << "a null communicator was accepted";
  } catch (const tk::io_error& e) {
    EXPECT_NE(std::string(e.what()).find("MPI_Comm_dup failed"), std::string::npos) << e.what();
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

/// Rank r of n reads global batches r, r+n, r+2n, ... of a source: the slice of every global
/// batch a rank of a data-parallel run must see. The library's sources cannot be sliced by rank
/// yet; this wrapper uses their seekable position (offset = batches produced).
class rank_slice {
 public:
  rank_slice(tk::data::synthetic_source s, int rank, int ranks)
      : inner_(std::move(s)), ranks_(ranks) {
    skip(rank);
  }
  int batch_size() const { return inner_.batch_size(); }
  int seq_len() const { return inner_.seq_len(); }
  int vocab_size() const { return inner_.vocab_size(); }
  void next(tk::host_batch& b) {
    inner_.next(b);
    skip(ranks_ - 1);
  }
  tk::source_position position() const { return inner_.position(); }
  void seek(const tk::source_position& p) { inner_.seek(p); }

 private:
  void skip(int batches) {
    tk::source_position p = inner_.position();
    p.offset += std::uint64_t(batches);
    inner_.seek(p);
  }
  tk::data::synthetic_source inner_;
  int ranks_ = 1;
};
static_assert(tk::data::data_source<rank_slice>);

tk::data::synthetic_source synthetic(int B, int T) {
  return tk::data::synthetic_source({.batch_size = B,
                                     .seq_len = T,
                                     .vocab_size = 100,
                                     .alphabet = 20,
                                     .branching = 2,
                                     .seed = 5});
}

// The smallest GPT-2 the CPU tests train.
tk::model::gpt2_config tiny() {
  return {.max_seq_len = 16,
          .vocab_size = 100,
          .padded_vocab_size = 128,
          .num_layers = 3,
          .num_heads = 2,
          .channels = 16};
}

struct run_record {
  std::vector<double> loss;
  std::vector<double> grad_norm;
  std::vector<float> parameters;
};

template <class Reducer>
run_record train(rank_slice source, int micro_batches, Reducer reducer) {
  constexpr int B = 2, T = 8;
  tk::trainer_config cfg;
  cfg.steps = 6;
  cfg.quiet = true;
  cfg.total_batch_tokens = std::size_t(micro_batches) * B * T;
  cfg.schedule.kind = tk::optim::schedule_kind::constant;
  cfg.schedule.max_lr = 3e-3f;
  const tk::optim::adamw_config ac{.grad_clip = 0.5f};  // small: clipping acts on every step
  std::ostringstream quiet;
  tk::trainer<rank_slice, tk::prefetch::threaded<2>, tk::model::gpt2_cpu, tk::optim::adamw_cpu,
              tk::checkpoint::no_checkpoint, Reducer>
      t(cfg, std::move(source), std::nullopt, tk::model::gpt2_cpu(tiny(), 11), ac,
        tk::checkpoint::no_checkpoint{}, std::move(reducer), quiet);
  run_record r;
  t.on_step([&](const tk::step_metrics& m) {
    r.loss.push_back(m.loss);
    r.grad_norm.push_back(m.grad_norm);
    return true;
  });
  t.run();
  const auto p = t.model().parameters();
  r.parameters.assign(p.begin(), p.end());
  return r;
}

// Not bit for bit: gpt2_cpu accumulates a micro-step's gradient into the gradient buffer in place
// (the embedding rows, biases and LayerNorm sums add token by token onto what the previous
// micro-step left), so one process sums in another order than "each rank's gradient, then the sum
// over ranks". docs/distributed.md says what would make them identical.
TEST(MpiAllreduce, TwoRanksOfOneMicroBatchMatchOneProcessOfTwo) {
  tk::reduce::mpi_allreduce reducer;
  const int rank = reducer.rank(), n = reducer.world_size();
  ASSERT_EQ(n, 2);
  // Every rank computes the single-process reference itself: global batches 2s and 2s+1 as two
  // micro-batches of step s.
  const run_record one = train(rank_slice(synthetic(2, 8), 0, 1), n, tk::reduce::single{});
  const run_record dp = train(rank_slice(synthetic(2, 8), rank, n), 1, std::move(reducer));

  // A rank's loss is its own micro-batch's; the step's loss is their mean.
  std::vector<double> all(dp.loss.size() * std::size_t(n));
  ASSERT_EQ(MPI_Allgather(dp.loss.data(), int(dp.loss.size()), MPI_DOUBLE, all.data(),
                          int(dp.loss.size()), MPI_DOUBLE, MPI_COMM_WORLD),
            MPI_SUCCESS);
  ASSERT_EQ(one.loss.size(), dp.loss.size());
  for (std::size_t s = 0; s < one.loss.size(); ++s) {
    const double a = all[s], b = all[dp.loss.size() + s];
    EXPECT_NE(a, b) << "the ranks read different batches";
    EXPECT_NEAR((a + b) / 2, one.loss[s], 1e-6 * one.loss[s]) << "step " << s + 1;
    // The norm is of the reduced (mean) gradient: a wrong divisor scales it.
    EXPECT_NEAR(dp.grad_norm[s], one.grad_norm[s], 1e-5 * one.grad_norm[s]) << "step " << s + 1;
  }
  EXPECT_EQ(one.loss[0], (all[0] + all[dp.loss.size()]) / 2) << "step 1 runs on equal weights";
  ASSERT_EQ(dp.parameters.size(), one.parameters.size());
  float worst = 0;
  for (std::size_t i = 0; i < one.parameters.size(); ++i)
    worst = std::max(worst, std::abs(dp.parameters[i] - one.parameters[i]) /
                                std::max(1.0f, std::abs(one.parameters[i])));
  EXPECT_LT(worst, 1e-5f) << "parameters after " << one.loss.size() << " steps";
  // Both ranks hold the same weights: they applied the same reduced gradient.
  std::vector<float> other(dp.parameters.size());
  ASSERT_EQ(MPI_Sendrecv(dp.parameters.data(), int(dp.parameters.size()), MPI_FLOAT, 1 - rank, 0,
                         other.data(), int(other.size()), MPI_FLOAT, 1 - rank, 0, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE),
            MPI_SUCCESS);
  EXPECT_EQ(std::memcmp(other.data(), dp.parameters.data(), other.size() * sizeof(float)), 0);
}

}  // namespace

// MPI is started once for the whole program; only rank 0 prints gtest's report (a failure on
// any rank still fails the job: mpiexec returns non-zero when a rank does).
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  tk::reduce::mpi_session mpi;
  if (mpi.world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  return RUN_ALL_TESTS();
}
