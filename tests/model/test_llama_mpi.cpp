// tests/model/test_llama_mpi.cpp — llama_cpu data parallel with the unchanged MPI all-reduce
// (run under mpiexec with 2 ranks): 2 ranks of 1 micro-batch equal one process accumulating 2
// micro-batches bit for bit (losses, gradient norms, weights), because llama_cpu computes every
// micro-step's gradient from zero and adds it bucket by bucket, the arithmetic the reducer does.
#include <gtest/gtest.h>
#include <mpi.h>

#include "llama_training.hpp"
#include "trainkit/checkpoint/no_checkpoint.hpp"
#include "trainkit/reduce/mpi_allreduce.hpp"
#include "trainkit/comm/mpi_session.hpp"
#include "trainkit/reduce/single.hpp"

namespace {

using namespace llama_test;

TEST(LlamaMpi, TwoRanksOfOneMicroBatchEqualOneProcessOfTwoBitForBit) {
  tk::reduce::mpi_allreduce reducer;
  const int rank = reducer.rank(), n = reducer.world_size();
  if (n != 2) GTEST_SKIP() << "bit for bit needs 2 ranks of 1 micro-batch";
  constexpr int steps = 8;
  const run_record one =
      train(0, 1, 2, steps, tk::checkpoint::no_checkpoint{}, tk::reduce::single{});
  const run_record dp =
      train(rank, n, 1, steps, tk::checkpoint::no_checkpoint{}, std::move(reducer));
  ASSERT_EQ(one.loss.size(), std::size_t(steps));
  ASSERT_EQ(dp.loss.size(), one.loss.size());
  EXPECT_LT(one.loss.back(), one.loss.front()) << "it trains";
  for (std::size_t s = 0; s < one.loss.size(); ++s) {
    EXPECT_TRUE(same_bits(dp.loss[s], one.loss[s]))
        << "step " << s + 1 << ": " << dp.loss[s] << " vs " << one.loss[s];
    EXPECT_TRUE(same_bits(dp.grad_norm[s], one.grad_norm[s])) << "step " << s + 1;
  }
  ASSERT_EQ(dp.parameters.size(), one.parameters.size());
  EXPECT_EQ(std::memcmp(dp.parameters.data(), one.parameters.data(),
                        one.parameters.size() * sizeof(float)),
            0);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  tk::comm::mpi_session mpi;
  if (mpi.world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  return RUN_ALL_TESTS();
}
