// Tests of ZeRO-1 on the CPU (reduce::mpi_zero1 + optim::zero1_adamw_cpu), run by ctest under
// mpiexec with 2 ranks (default transports and TCP) and 3: the shard cut lies on the norm chunk
// grid and tiles the buffer; every rank receives exactly the sum over ranks of its shard, and the
// sharded norm is one process's norm bit for bit; a trainer with 2 ranks × 1 micro-batch equals
// 1 process × 2 micro-batches bit for bit over 20 steps with clipping on every step (losses,
// validation losses, norms, weights), to 1e-5 with more micro-batches or ranks; per-rank optimizer
// state is 1/N of one process's; a restored shard of another rank is refused.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "mpi_training.hpp"
#include "trainkit/model/gpt2_cpu.hpp"
#include "trainkit/model/step_protocol.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/grad_clip.hpp"
#include "trainkit/optim/zero1_adamw_cpu.hpp"
#include "trainkit/optim/zero1_shards.hpp"
#include "trainkit/reduce/mpi_session.hpp"
#include "trainkit/reduce/mpi_zero1.hpp"

namespace tk = trainkit;

namespace {

using namespace trainkit_test;
constexpr std::size_t chunk = tk::optim::norm_chunk_elements;

TEST(Zero1Shards, CutOnTheNormChunkGridTileTheBufferAndDifferByAtMostOneChunk) {
  for (int ranks : {1, 2, 3, 5}) {
    for (std::size_t n :
         {std::size_t{0}, std::size_t{1}, chunk - 1, chunk, 3 * chunk + 7, 13 * chunk + 1000}) {
      const auto shards = tk::optim::zero1_shards(n, ranks);
      ASSERT_EQ(shards.size(), std::size_t(ranks));
      std::size_t cursor = 0, smallest = n, largest = 0;
      for (const auto& s : shards) {
        EXPECT_EQ(s.offset, cursor) << n << " over " << ranks;
        EXPECT_TRUE(s.offset % chunk == 0 || s.offset == n) << "offset " << s.offset;
        cursor += s.count;
        smallest = std::min(smallest, s.count);
        largest = std::max(largest, s.count);
      }
      EXPECT_EQ(cursor, n);
      EXPECT_LE(largest - smallest, chunk) << n << " over " << ranks;
    }
  }
  EXPECT_THROW(tk::optim::zero1_shard(10, 2, 2), tk::config_error);
}

// 4 chunks and a bit: ranges that cross shard boundaries, one inside a shard, buckets published
// in an order other than the buffer's, one empty.
constexpr std::size_t layout_size = 4 * chunk + 1234;
bucketed_gradients odd_layout(int rank) {
  bucketed_gradients m;
  m.grads = random_floats(layout_size, 500 + 31 * std::uint64_t(rank));
  m.buckets = {{"tail", {{3 * chunk + 5, layout_size - 3 * chunk - 5}}},
               {"across", {{100, 3 * chunk - 95}}},
               {"empty", {}},
               {"head", {{0, 100}}}};
  tk::model::check_buckets_tile(m.buckets, m.grads.size(), "test layout");
  return m;
}

TEST(MpiZero1, EachRankReceivesTheSumOfItsShardAndTheShardedNormIsOneProcesssBitForBit) {
  tk::reduce::mpi_zero1 r;
  const int n = r.world_size(), rank = r.rank();
  bucketed_gradients m = odd_layout(rank);
  const std::vector<float> mine = m.grads;
  tk::host_context ctx;
  r.attach(m, ctx);
  for (std::size_t b : {0u, 1u, 2u, 3u}) r.bucket_ready(b);
  r.finish();
  // The sum one process would see, in rank order (with 2 ranks the order cannot matter).
  std::vector<float> sum(layout_size, 0.0f);
  for (int k = 0; k < n; ++k) {
    const std::vector<float> v = odd_layout(k).grads;
    for (std::size_t i = 0; i < layout_size; ++i) sum[i] += v[i];
  }
  const tk::model::gradient_range s = r.shard();
  EXPECT_EQ(s, tk::optim::zero1_shard(layout_size, n, rank));
  for (std::size_t i = 0; i < layout_size; ++i) {
    const bool in_shard = i >= s.offset && i < s.offset + s.count;
    if (in_shard && n <= 2) {
      ASSERT_EQ(m.grads[i], sum[i]) << "element " << i;
    } else if (in_shard) {
      ASSERT_NEAR(m.grads[i], sum[i], 1e-5f * std::max(1.0f, std::abs(sum[i]))) << i;
    } else {
      ASSERT_EQ(m.grads[i], mine[i]) << "element " << i << " outside the shard was written";
    }
  }
  const auto scale = r.clip(std::span<const float>(m.grads), m.gradient_buckets(), 10.0, ctx);
  const double expect = tk::optim::global_norm(std::span<const float>(sum));
  if (n == 2) {
    EXPECT_TRUE(same_bits(r.norm(), expect)) << r.norm() << " vs " << expect;
  }
  EXPECT_NEAR(r.norm(), expect, 1e-6 * expect);
  EXPECT_DOUBLE_EQ(scale.factor, tk::optim::clip_factor(r.norm(), 10.0));
  EXPECT_LT(scale.factor, 1.0) << "the test's norm is large enough to clip";
  // Every rank has the same norm.
  double root = r.norm();
  ASSERT_EQ(MPI_Bcast(&root, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_TRUE(same_bits(root, r.norm()));
}

TEST(MpiZero1, AMissingBucketThrowsOnEveryRank) {
  tk::reduce::mpi_zero1 r;
  bucketed_gradients m = odd_layout(r.rank());
  tk::host_context ctx;
  r.attach(m, ctx);
  r.bucket_ready(0);
  EXPECT_THROW(r.bucket_ready(0), tk::config_error);
  try {
    r.finish();
    ADD_FAILURE() << "finish() without every bucket";
  } catch (const tk::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("'across'"), std::string::npos) << e.what();
  }
}

// The optimizer state of one rank is its shard's: the ranks' figures add up to one process's,
// and none exceeds an even share by more than one norm chunk (d2 proper, 50304-token vocabulary).
TEST(MpiZero1, OptimizerStatePerRankIsOneNthOfOneProcesss) {
  const tk::model::gpt2_cpu model(tk::model::gpt2_config::preset("d2"), 1);
  const tk::optim::adamw_cpu one(model, tk::optim::adamw_config{});
  const tk::optim::zero1_adamw_cpu sharded(model, tk::optim::adamw_config{});
  const int n = sharded.world_size();
  unsigned long long mine = sharded.state_bytes(), total = 0;
  ASSERT_EQ(MPI_Allreduce(&mine, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD),
            MPI_SUCCESS);
  EXPECT_EQ(one.state_bytes(), 2 * model.num_parameters() * sizeof(float));
  EXPECT_EQ(total, one.state_bytes());
  EXPECT_EQ(mine, 2 * sharded.shard().count * sizeof(float));
  EXPECT_LE(double(mine), double(one.state_bytes()) / n + 2.0 * chunk * sizeof(float));
  EXPECT_GE(double(mine), double(one.state_bytes()) / n - 2.0 * chunk * sizeof(float));
}

TEST(MpiZero1, ARestoredShardOfAnotherRankIsRefused) {
  tk::model::gpt2_cpu model(d2_small_vocab(), 3);
  tk::optim::zero1_adamw_cpu opt(model, tk::optim::adamw_config{});
  tk::host_context ctx;
  opt.update(model, 1e-3f, {1.0}, ctx);  // its own shard: fine
  for (auto& t : opt.state()) {
    if (t.name != "optim.zero1.shard") continue;
    ASSERT_EQ(t.shape, std::vector<std::int64_t>{4});
    reinterpret_cast<std::uint64_t*>(t.data)[1] = std::uint64_t(opt.world_size());  // no rank
  }
  EXPECT_THROW(opt.update(model, 1e-3f, {1.0}, ctx), tk::config_error);
}

TEST(MpiZero1Trainer, RanksOfOneMicroBatchMatchOneProcessAccumulatingThemFor20Steps) {
  expect_matches_one_process<tk::reduce::mpi_zero1, tk::optim::zero1_adamw_cpu>(
      1, {.steps = 20, .eval_every = 10, .on_step = {}});
}

TEST(MpiZero1Trainer, RanksOfTwoMicroBatchesMatchOneProcessTo1e5) {
  expect_matches_one_process<tk::reduce::mpi_zero1, tk::optim::zero1_adamw_cpu>(
      2, {.steps = 10, .eval_every = 5, .on_step = {}});
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  tk::reduce::mpi_session mpi;
  if (mpi.world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  return RUN_ALL_TESTS();
}
