// Tests of reduce::mpi_allreduce, run by ctest under mpiexec with 2 ranks (and the trainer tests
// with 3): buckets of random floats reduce to the sum over ranks, exactly as each rank computes it
// from every rank's seed; odd-length, split and empty buckets; reductions deferred to finish()
// give the same bits as overlapped ones; the clipping step is the norm of the sum, the same on
// every rank; misuse of the protocol throws on every rank alike (no hang); the rank-aware hooks;
// and a trainer with 2 ranks × 1 micro-batch equals 1 process × 2 micro-batches of gradient
// accumulation bit for bit over 20 steps (losses, validation losses, norms, weights), to 1e-5 with
// more micro-batches or ranks, and a stop on one rank stops all after the same step.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "mpi_training.hpp"
#include "trainkit/checkpoint/no_checkpoint.hpp"
#include "trainkit/checkpoint/sync_checkpointer.hpp"
#include "trainkit/comm/mpi_session.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/data/synthetic_source.hpp"
#include "trainkit/model/gpt2/cpu.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/grad_clip.hpp"
#include "trainkit/prefetch/threaded_prefetcher.hpp"
#include "trainkit/reduce/mpi_allreduce.hpp"
#include "trainkit/trainer/trainer.hpp"

namespace tk = trainkit;

// The shipped policies satisfy the roles (kept here, not in the generic header, so that
// reduce/mpi_allreduce.hpp does not pull in a concrete model).
static_assert(tk::reduce::gradient_reducer_for<tk::reduce::mpi_allreduce, tk::model::gpt2_cpu>);
static_assert(tk::reduce::rank_aware<tk::reduce::mpi_allreduce>);

namespace {

using namespace trainkit_test;

struct double_gradients {
  using memory_space = tk::host_memory;
  using parameter_type = double;
  std::vector<double> grads;
  std::vector<tk::model::gradient_bucket> buckets{{"all", {{0, 5}}}};
  std::span<double> gradients() { return grads; }
  std::span<const tk::model::gradient_bucket> gradient_buckets() const { return buckets; }
};

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

// The reducer sums: the trainer has already scaled each rank's gradient by 1/ranks.
TEST(MpiAllreduce, BucketsBecomeTheSumOverRanksComputedFromEveryRanksSeed) {
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
      // Two addends sum the same in any order; more ranks may be summed in another order.
      if (n == 2)
        ASSERT_EQ(m.grads[j], sum[j]) << "element " << j << " step " << step;
      else
        ASSERT_NEAR(m.grads[j], sum[j], 1e-6f * std::abs(sum[j]) + 1e-6f) << "element " << j;
    }
  }
}

// The trainer's clipping step (optim::host_grad_clip) over the all-reduce's facts: every rank
// holds the summed gradients (it owns every bucket, nothing to combine), so the plain norm over
// the buckets, the one-process norm of the sum bit for bit with 2 ranks and the same
// bits on every rank; the factor is max_norm / norm above a positive threshold and exactly 1
// otherwise.
TEST(MpiAllreduce, ClipIsTheNormOfTheSummedGradientsOnEveryRank) {
  tk::reduce::mpi_allreduce r;
  const int n = r.world_size();
  bucketed_gradients m = odd_layout(r.rank());
  tk::host_context ctx;
  r.attach(m, ctx);
  for (std::size_t i = 0; i < m.buckets.size(); ++i) r.bucket_ready(i);
  r.finish();
  std::vector<float> sum = random_floats(m.grads.size(), seed_of(0));
  for (int k = 1; k < n; ++k) {
    const auto other = random_floats(m.grads.size(), seed_of(k));
    for (std::size_t j = 0; j < sum.size(); ++j) sum[j] += other[j];
  }
  const std::span<const float> g(m.grads);
  const double expect = tk::optim::global_norm(std::span<const float>(sum));
  tk::optim::host_grad_clip clip;
  const auto clipped = clip(g, m.gradient_buckets(), r, 10.0, ctx);
  if (n == 2) {
    EXPECT_TRUE(same_bits(clip.norm(), expect)) << clip.norm() << " vs " << expect;
  }
  EXPECT_NEAR(clip.norm(), expect, 1e-6 * expect);
  EXPECT_EQ(clipped.factor, 10.0 / clip.norm()) << "max_norm / norm, no epsilon";
  EXPECT_LT(clipped.factor, 1.0) << "the test's norm is large enough to clip";
  EXPECT_EQ(clip(g, m.gradient_buckets(), r, 2 * expect, ctx).factor, 1.0);
  EXPECT_EQ(clip(g, m.gradient_buckets(), r, 0.0, ctx).factor, 1.0) << "0 = off";
  double root = clip.norm();
  ASSERT_EQ(MPI_Bcast(&root, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_TRUE(same_bits(root, clip.norm())) << "every rank clips by the same factor";
}

// Reductions started in finish() instead of during backward: the same collectives on the same
// ranges, so the same bits, step after step; nothing is reduced before finish().
TEST(MpiAllreduce, AfterBackwardTimingGivesTheOverlappedGradientsBitForBit) {
  tk::reduce::mpi_allreduce overlapped;
  tk::reduce::mpi_allreduce deferred(MPI_COMM_WORLD, tk::reduce::bucket_timing::after_backward);
  EXPECT_EQ(overlapped.timing(), tk::reduce::bucket_timing::with_backward);
  EXPECT_EQ(deferred.timing(), tk::reduce::bucket_timing::after_backward);
  bucketed_gradients a = odd_layout(overlapped.rank()), b = odd_layout(deferred.rank());
  tk::host_context ctx;
  overlapped.attach(a, ctx);
  deferred.attach(b, ctx);
  for (int step = 0; step < 3; ++step) {
    const auto mine = random_floats(a.grads.size(), seed_of(overlapped.rank()) + 50 + step);
    std::copy(mine.begin(), mine.end(), a.grads.begin());
    std::copy(mine.begin(), mine.end(), b.grads.begin());
    for (std::size_t i = 0; i < a.buckets.size(); ++i) {
      overlapped.bucket_ready(i);
      deferred.bucket_ready(i);
    }
    EXPECT_EQ(b.grads, mine) << "after_backward reduced a bucket before finish()";
    overlapped.finish();
    deferred.finish();
    ASSERT_EQ(a.grads, b.grads) << "step " << step;
    EXPECT_NE(b.grads, mine) << "finish() reduced nothing";
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
  EXPECT_EQ(m.grads, (std::vector<double>{n + rank_sum, 2.0 * n, -3.0 * rank_sum, 0.25 * n,
                                          7.0 * (rank_sum + n)}));
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

TEST(MpiTrainer, RanksOfOneMicroBatchMatchOneProcessAccumulatingThemFor20Steps) {
  expect_matches_one_process(1, {.steps = 20, .eval_every = 10, .on_step = {}});
}

TEST(MpiTrainer, RanksOfTwoMicroBatchesMatchOneProcessTo1e5) {
  expect_matches_one_process(2, {.steps = 10, .eval_every = 5, .on_step = {}});
}

TEST(MpiTrainer, RankAwareHooksAgreeOnEveryRank) {
  tk::reduce::mpi_allreduce r;
  const int rank = r.rank(), n = r.world_size();
  std::vector<double> v(std::size_t(n) + 1, 0.0);
  v[std::size_t(rank)] = 1.5 + rank;
  v[std::size_t(n)] = 1;
  r.sum(v);
  for (int k = 0; k < n; ++k) EXPECT_EQ(v[std::size_t(k)], 1.5 + k);
  EXPECT_EQ(v[std::size_t(n)], double(n));
  // average: rank-order sum then division, so 0.1 + 0.2 (+ 0.3 ...) / n exactly as computed here.
  double expect = 0;
  for (int k = 0; k < n; ++k) expect += 0.1 * (k + 1);
  EXPECT_TRUE(same_bits(r.average(0.1 * (rank + 1)), expect / n));
  EXPECT_TRUE(r.any(rank == n - 1));
  EXPECT_FALSE(r.any(false));
}

// The checkpoint of a data-parallel run is rank 0's, and its data position is the one-process
// stream's: one process with 2 micro-batches resumes a 2-rank run's checkpoint and continues
// with exactly the steps an uninterrupted 1 × 2 run takes (2 × 1 == 1 × 2 bit for bit).
TEST(MpiTrainer, OneProcessResumesATwoRankCheckpointBitForBit) {
  tk::reduce::mpi_allreduce reducer;
  const int rank = reducer.rank(), n = reducer.world_size();
  if (n != 2) GTEST_SKIP() << "bit for bit needs 2 ranks of 1 micro-batch";
  // One directory for all ranks: rank 0's pid names it.
  long long id = ::getpid();
  ASSERT_EQ(MPI_Bcast(&id, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD), MPI_SUCCESS);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("trainkit_mpi_resume_" + std::to_string(id));
  // Rank 0 prepares the directory (a checkpointer cleans it when constructed) before the others.
  std::optional<tk::checkpoint::sync_checkpointer> ckpt;
  if (rank == 0) ckpt.emplace(tk::checkpoint::sync_checkpointer_config{dir, 0});
  ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  if (rank != 0) ckpt.emplace(tk::checkpoint::sync_checkpointer_config{dir, 0});
  const run_record dp =
      train(rank, n, 1, std::move(reducer), {.steps = 5, .on_step = {}}, std::move(*ckpt));
  ASSERT_EQ(dp.loss.size(), 5u);
  std::vector<std::string> saved;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    saved.push_back(e.path().filename().string());
  EXPECT_EQ(saved, std::vector<std::string>{"step_00000005"}) << "one save, by rank 0";
  ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);  // every rank has looked
  if (rank == 0) {
    const run_record whole = train(0, 1, 2, tk::reduce::single{}, {.steps = 10, .on_step = {}});
    const run_record resumed = train(0, 1, 2, tk::reduce::single{}, {.steps = 10, .on_step = {}},
                                     tk::checkpoint::sync_checkpointer({dir, 0}), /*resume=*/true);
    ASSERT_EQ(resumed.loss.size(), 5u) << "steps 6..10";
    for (std::size_t s = 0; s < 5; ++s)
      EXPECT_TRUE(same_bits(resumed.loss[s], whole.loss[s + 5])) << "step " << s + 6;
    EXPECT_EQ(std::memcmp(resumed.parameters.data(), whole.parameters.data(),
                          whole.parameters.size() * sizeof(float)),
              0);
    std::filesystem::remove_all(dir);
  }
}

// Through the trainer: the reductions started after backward instead of during it change when
// the sums are computed, not what they are.
TEST(MpiTrainer, AfterBackwardTimingTrainsTheSameBits) {
  tk::reduce::mpi_allreduce overlapped;
  const int rank = overlapped.rank(), n = overlapped.world_size();
  const run_record a =
      train(rank, n, 1, std::move(overlapped), {.steps = 8, .eval_every = 0, .on_step = {}});
  const run_record b =
      train(rank, n, 1,
            tk::reduce::mpi_allreduce(MPI_COMM_WORLD, tk::reduce::bucket_timing::after_backward),
            {.steps = 8, .eval_every = 0, .on_step = {}});
  ASSERT_EQ(a.loss.size(), b.loss.size());
  for (std::size_t s = 0; s < a.loss.size(); ++s) {
    EXPECT_TRUE(same_bits(a.loss[s], b.loss[s])) << "step " << s + 1;
    EXPECT_TRUE(same_bits(a.grad_norm[s], b.grad_norm[s])) << "step " << s + 1;
  }
  ASSERT_EQ(a.parameters.size(), b.parameters.size());
  EXPECT_EQ(
      std::memcmp(a.parameters.data(), b.parameters.data(), a.parameters.size() * sizeof(float)),
      0);
}

// A stop on one rank (its callback, or a signal: both go through the reducer's any()) stops every
// rank after the same step instead of leaving the others waiting in the next all-reduce.
TEST(MpiTrainer, AStopOnOneRankStopsEveryRankAfterTheSameStep) {
  tk::reduce::mpi_allreduce reducer;
  const int rank = reducer.rank(), n = reducer.world_size();
  const run_record r =
      train(rank, n, 1, std::move(reducer), {.steps = 8, .on_step = [&](const tk::step_metrics& m) {
                                               return !(rank == n - 1 && m.step == 3);
                                             }});
  EXPECT_TRUE(r.result.stopped);
  EXPECT_EQ(r.result.last_step, 3u);

  tk::reduce::mpi_allreduce again;
  const run_record s =
      train(rank, n, 1, std::move(again), {.steps = 8, .on_step = [&](const tk::step_metrics& m) {
                                             if (rank == 0 && m.step == 5)
                                               tk::request_stop(SIGTERM);
                                             return true;
                                           }});
  tk::stop_signal().store(0);
  EXPECT_TRUE(s.result.stopped);
  EXPECT_EQ(s.result.last_step, 5u);
}

}  // namespace

// MPI is started once for the whole program; only rank 0 prints gtest's report (a failure on
// any rank still fails the job: mpiexec returns non-zero when a rank does).
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  tk::comm::mpi_session mpi;
  if (mpi.world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  return RUN_ALL_TESTS();
}
