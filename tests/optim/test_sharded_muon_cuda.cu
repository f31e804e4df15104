// GPU + NCCL test for trainkit/optim/sharded_muon_cuda.hpp, run as one process and as 2 ranks
// under mpiexec (one GPU per rank; the 2-rank cases skip with fewer GPUs than ranks, every case
// skips without a device, ctest labels gpu;nccl). Three updates of a d2 gpt2_cuda from fixed random
// gradients (the same on every rank, as an all-reduce leaves them) and a clipping factor of 0.8:
//  - over a world of one (comm::nccl_communicator::single()) the sharded optimizer is muon_cuda:
//    AdamW's half bit for bit, the matrices within the Newton–Schulz tolerance (each optimizer
//    autotunes its own GEMMs), so the gather wrote back what it read;
//  - over the MPI world, every rank ends with the same parameters bit for bit (the gather), equal
//    to this rank's own muon_cuda within the Newton–Schulz tolerance (the batched GEMMs run over
//    fewer matrices per shape, so cuBLASLt may choose another algorithm) and AdamW's half bit for
//    bit; each rank keeps the state of its share only, and the shares' ranges tile the buffer;
//  - the state's names and the sharded checkpoint's split (momentum and master weights sharded,
//    AdamW's half and the step common).
// The host arithmetic of the shares and the gather is tested without a device by
// test_muon_shares.cpp. Never run on a GPU yet.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "../cuda/gpu_test_env.hpp"
#include "trainkit/comm/mpi_session.hpp"
#include "trainkit/comm/nccl_communicator.hpp"
#include "trainkit/comm/nccl_mpi.hpp"
#include "trainkit/core/bf16.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/device.hpp"
#include "trainkit/core/cuda/execution_context.hpp"
#include "trainkit/model/gpt2_cuda.hpp"
#include "trainkit/optim/concepts.hpp"
#include "trainkit/optim/muon_cuda.hpp"
#include "trainkit/optim/sharded_muon_cuda.hpp"

namespace tk = trainkit;
namespace to = trainkit::optim;

static_assert(to::optimizer_for<to::sharded_muon_cuda, tk::model::gpt2_cuda>,
              "sharded_muon_cuda must satisfy optimizer_for<gpt2_cuda>");

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

std::vector<float> download(const tk::model::gpt2_cuda& model) {
  std::vector<float> out(model.num_parameters());
  model.copy_parameters_to_host(out);
  return out;
}

to::muon_config test_config() {
  to::muon_config c;
  c.weight_decay = 0.1f;
  c.adamw.weight_decay = 0.1f;
  c.schedule_max_lr = 1e-3f;
  return c;
}

/// Three updates of `opt` on `model` from gradients seeded alike on every rank.
template <class Optimizer>
void three_updates(tk::model::gpt2_cuda& model, Optimizer& opt) {
  tk::cuda::execution_context ctx;
  tk::cuda::device_buffer<float> clip(2);
  const std::vector<float> norm_and_factor{1.25f, 0.8f};
  tk::cuda::copy_to_device(clip.data(), std::span<const float>(norm_and_factor), ctx.stream());
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.01f);
  const std::size_t n = model.num_parameters();
  const std::vector<float> lrs{1e-3f, 8e-4f, 5e-4f};
  for (float lr : lrs) {
    std::vector<tk::bf16> gb(n);
    for (auto& g : gb) g = tk::bf16::from_float(normal(rng));
    tk::cuda::copy_to_device(model.gradients().data(), std::span<const tk::bf16>(gb), ctx.stream());
    opt.update(model, lr, {clip.data()}, ctx);
  }
  ctx.synchronize();
}

/// `params` against `reference` (both after the same updates from `start`): each matrix's change
/// within the Newton–Schulz tolerance (test_muon_cuda_step.cu's 2e-2: two optimizers autotune
/// their GEMMs apart, so cuBLASLt may pick other algorithms), every other element bit for bit.
void expect_muon_close(const std::vector<float>& params, const std::vector<float>& reference,
                       const std::vector<float>& start, std::span<const to::muon_matrix> matrices,
                       const std::string& what) {
  std::vector<bool> in_matrix(params.size(), false);
  for (const to::muon_matrix& m : matrices) {
    double num = 0, den = 0;
    for (std::size_t e = m.offset; e < m.offset + m.numel(); ++e) {
      in_matrix[e] = true;
      const double ours = double(params[e]) - start[e], theirs = double(reference[e]) - start[e];
      num += (ours - theirs) * (ours - theirs);
      den += theirs * theirs;
    }
    EXPECT_LT(std::sqrt(num / den), 2e-2) << what << ": matrix at " << m.offset;
  }
  std::size_t adamw_differs = 0;
  for (std::size_t i = 0; i < params.size(); ++i)
    adamw_differs += !in_matrix[i] && params[i] != reference[i];
  EXPECT_EQ(adamw_differs, 0u) << what;
}

/// This rank's GPU (one per rank), before any allocation; false when there are too few.
bool select_gpu() {
  if (tk::cuda::device_count() < world_size()) return false;
  TRAINKIT_CUDA_CHECK(cudaSetDevice(world_rank()));
  return true;
}

}  // namespace

TEST(ShardedMuonCuda, WorldOfOneIsMuonCudaBitForBit) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  if (!select_gpu()) GTEST_SKIP() << "fewer GPUs than ranks";
  const tk::model::gpt2_config cfg = tk::model::gpt2_config::preset("d2");
  tk::model::gpt2_cuda a(cfg, /*seed=*/11), b(cfg, /*seed=*/11);
  tk::comm::nccl_communicator one = tk::comm::nccl_communicator::single();
  to::muon_cuda plain(a, test_config());
  to::sharded_muon_cuda sharded(b, {test_config(), one});
  ASSERT_EQ(sharded.shares().size(), 1u);
  EXPECT_EQ(sharded.owned(), (to::muon_matrix_range{0, sharded.matrices().size()}));
  const std::vector<float> start = download(a);
  three_updates(a, plain);
  three_updates(b, sharded);
  expect_muon_close(download(b), download(a), start, sharded.matrices(), "world of one");
  EXPECT_EQ(sharded.steps_taken(), 3u);
}

TEST(ShardedMuonCuda, RanksGatherEveryMatrixAndKeepTheirShareOnly) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  if (world_size() < 2)
    GTEST_SKIP() << "run under mpiexec -n 2 (ctest: optim.sharded_muon_cuda.2_ranks)";
  if (!select_gpu()) GTEST_SKIP() << "fewer GPUs than ranks";
  const int rank = world_rank(), ranks = world_size();
  const tk::model::gpt2_config cfg = tk::model::gpt2_config::preset("d2");
  tk::model::gpt2_cuda shared(cfg, /*seed=*/11), alone(cfg, /*seed=*/11);
  tk::comm::nccl_communicator comm = tk::comm::nccl_communicator_from_mpi();
  to::sharded_muon_cuda sharded(shared, {test_config(), comm});
  to::muon_cuda plain(alone, test_config());
  ASSERT_EQ(sharded.shares().size(), std::size_t(ranks));
  const to::muon_share mine = sharded.shares()[std::size_t(rank)];
  EXPECT_EQ(sharded.owned(), mine.matrices);
  three_updates(shared, sharded);
  three_updates(alone, plain);

  // Every rank the same bits: gather every rank's parameters to every rank and compare.
  const std::vector<float> params = download(shared), reference = download(alone);
  std::vector<float> all(params.size() * std::size_t(ranks));
  ASSERT_EQ(MPI_Allgather(params.data(), int(params.size()), MPI_FLOAT, all.data(),
                          int(params.size()), MPI_FLOAT, MPI_COMM_WORLD),
            MPI_SUCCESS);
  for (int r = 0; r < ranks; ++r)
    EXPECT_TRUE(std::equal(params.begin(), params.end(),
                           all.begin() + std::ptrdiff_t(std::size_t(r) * params.size())))
        << "rank " << rank << " differs from rank " << r;

  // Against one GPU's muon_cuda: AdamW's elements bit for bit, the matrices within tolerance.
  const std::vector<float> start = download(tk::model::gpt2_cuda(cfg, /*seed=*/11));
  expect_muon_close(params, reference, start, sharded.matrices(), "rank " + std::to_string(rank));

  // Only this rank's share is kept: the sharded checkpoint's range is it, the momentum and master
  // weights are its size, and the whole-buffer total is every matrix's.
  tk::checkpoint::optimizer_shard shard = sharded.sharded_state();
  EXPECT_EQ(shard.range.rank, rank);
  EXPECT_EQ(shard.range.world_size, ranks);
  EXPECT_EQ(shard.range.offset, mine.packed.offset);
  EXPECT_EQ(shard.range.count, mine.packed.count);
  EXPECT_EQ(shard.range.total, plain.momentum_elements());
  for (const tk::state_tensor& t : shard.shard)
    EXPECT_EQ(t.shape, (std::vector<std::int64_t>{std::int64_t(mine.packed.count)})) << t.name;
  EXPECT_LT(sharded.state_bytes(), plain.state_bytes());
}

TEST(ShardedMuonCuda, StateNamesAndTheShardedSplit) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  if (!select_gpu()) GTEST_SKIP() << "fewer GPUs than ranks";
  tk::model::gpt2_cuda model(tk::model::gpt2_config::preset("d2"), /*seed=*/11);
  tk::comm::nccl_communicator one = tk::comm::nccl_communicator::single();
  to::sharded_muon_cuda opt(model, {to::muon_config{}, one});
  std::vector<std::string> names;
  for (const tk::state_tensor& t : opt.state()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"optim.adamw.master", "optim.adamw.m", "optim.adamw.v",
                                             "optim.step", "optim.muon.shard.momentum",
                                             "optim.muon.shard.master", "optim.muon.shard"}));
  const tk::checkpoint::optimizer_shard s = opt.sharded_state();
  std::vector<std::string> common, sharded;
  for (const tk::state_tensor& t : s.common) common.push_back(t.name);
  for (const tk::state_tensor& t : s.shard) sharded.push_back(t.name);
  EXPECT_EQ(common, (std::vector<std::string>{"optim.adamw.master", "optim.adamw.m",
                                              "optim.adamw.v", "optim.step"}));
  EXPECT_EQ(sharded, (std::vector<std::string>{"optim.muon.momentum", "optim.muon.master"}));
}

TEST(ShardedMuonCuda, NoCommunicatorIsRefused) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  if (!select_gpu()) GTEST_SKIP() << "fewer GPUs than ranks";
  tk::model::gpt2_cuda model(tk::model::gpt2_config::preset("d2"), /*seed=*/11);
  EXPECT_THROW(to::sharded_muon_cuda(model, to::sharded_muon_cuda_config{}), tk::config_error);
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  tk::comm::mpi_session mpi;
  if (mpi.world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  return RUN_ALL_TESTS();
}
