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
//    AdamW's half and the step common);
//  - checkpoints inside the trainer: muon_cuda's state through a host-staged sync checkpoint, and
//    sharded_muon_cuda's sharded checkpoint (world of one, nccl_allreduce) resumed by itself and
//    by muon_cuda, each within 1e-4 of the straight run's losses;
//  - NorMuon (issue 38): over a world of one and 2 ranks as above, its second moment through the
//    sharded state (each owned matrix's lines at its momentum offset) into a fresh optimizer,
//    a sharded NorMuon checkpoint resumed inside the trainer, and the other setting refused.
// The host arithmetic of the shares and the gather is tested without a device by
// test_muon_shares.cpp, and the pack/unpack kernels' indexing walked on the host here (the one
// case that runs without a device). Never run on a GPU yet.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "../cuda/gpu_test_env.hpp"
#include "trainkit/checkpoint/host_staged_checkpointer.hpp"
#include "trainkit/checkpoint/no_checkpoint.hpp"
#include "trainkit/checkpoint/sync_checkpointer.hpp"
#include "trainkit/comm/mpi_session.hpp"
#include "trainkit/comm/nccl_communicator.hpp"
#include "trainkit/comm/nccl_mpi.hpp"
#include "trainkit/core/bf16.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/device.hpp"
#include "trainkit/core/cuda/execution_context.hpp"
#include "trainkit/data/mmap_token_source.hpp"
#include "trainkit/data/shard_format.hpp"
#include "trainkit/model/gpt2/config.hpp"
#include "trainkit/model/gpt2/cuda.hpp"
#include "trainkit/model/llama/config.hpp"
#include "trainkit/optim/concepts.hpp"
#include "trainkit/optim/muon_cuda.hpp"
#include "trainkit/optim/sharded_muon_cuda.hpp"
#include "trainkit/prefetch/pinned_prefetcher.hpp"
#include "trainkit/reduce/nccl_allreduce.hpp"
#include "trainkit/trainer/trainer.hpp"

namespace tk = trainkit;
namespace to = trainkit::optim;

static_assert(to::optimizer_for<to::sharded_muon_cuda, tk::model::gpt2_cuda>,
              "sharded_muon_cuda must satisfy optimizer_for<gpt2_cuda>");

namespace {

// MPI is initialised only under a launcher (mpiexec sets these), so the one-process run needs no
// MPI runtime on the machine (a device machine may carry Open MPI's libraries but no launcher):
// it is then a world of one.
bool launched_by_mpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

bool mpi_running() {
  int on = 0;
  MPI_Initialized(&on);
  return on != 0;
}

int world_rank() {
  int r = 0;
  if (mpi_running()) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 1;
  if (mpi_running()) MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

std::vector<float> download(const tk::model::gpt2_cuda& model) {
  std::vector<float> out(model.num_parameters());
  model.copy_parameters_to_host(out);
  return out;
}

to::muon_config test_config(bool normuon = false) {
  to::muon_config c;
  c.normuon = normuon;
  c.weight_decay = 0.1f;
  c.adamw.weight_decay = 0.1f;
  c.lr_ratio = double(0.02f) / double(1e-3f);  // Muon's 0.02 at a 1e-3 schedule peak
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

TEST(ShardedMuonCuda, WorldOfOneTracksMuonCuda) {
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

TEST(ShardedMuonCuda, WorldOfOneNorMuonTracksMuonCuda) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  if (!select_gpu()) GTEST_SKIP() << "fewer GPUs than ranks";
  const tk::model::gpt2_config cfg = tk::model::gpt2_config::preset("d2");
  tk::model::gpt2_cuda a(cfg, /*seed=*/11), b(cfg, /*seed=*/11);
  tk::comm::nccl_communicator one = tk::comm::nccl_communicator::single();
  to::muon_cuda plain(a, test_config(true));
  to::sharded_muon_cuda sharded(b, {test_config(true), one});
  const std::vector<float> start = download(a);
  three_updates(a, plain);
  three_updates(b, sharded);
  expect_muon_close(download(b), download(a), start, sharded.matrices(), "NorMuon, world of one");
}

/// A device tensor's fp32 elements on the host.
std::vector<float> tensor_to_host(const tk::state_tensor& t) {
  std::vector<float> out(t.numel());
  TRAINKIT_CUDA_CHECK(cudaMemcpy(out.data(), t.data, t.bytes(), cudaMemcpyDeviceToHost));
  return out;
}

/// `from`'s sharded state written into `to`'s (what a resume does): device tensors copied on the
/// device, host tensors on the host, matched by name.
void restore(tk::checkpoint::optimizer_shard from, tk::checkpoint::optimizer_shard to) {
  for (auto* part : {&to.common, &to.shard})
    for (tk::state_tensor& t : *part) {
      const tk::state_tensor* src = nullptr;
      for (auto* other : {&from.common, &from.shard})
        for (const tk::state_tensor& f : *other)
          if (f.name == t.name) src = &f;
      ASSERT_NE(src, nullptr) << t.name;
      ASSERT_EQ(src->bytes(), t.bytes()) << t.name;
      TRAINKIT_CUDA_CHECK(
          cudaMemcpy(t.data, src->data, t.bytes(),
                     t.on_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToHost));
    }
}

/// NorMuon's second moment as the sharded checkpoint carries it: each owned matrix's lines at
/// its momentum offset, zeros after; restored into a fresh optimizer, whose next update then
/// starts from it (its second moment tracks the original's, not a fresh one's); a restore of the
/// other NorMuon setting is refused at that update naming muon_config.normuon.
TEST(ShardedMuonCuda, NorMuonSecondMomentTravelsInTheShardedState) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  if (!select_gpu()) GTEST_SKIP() << "fewer GPUs than ranks";
  const tk::model::gpt2_config cfg = tk::model::gpt2_config::preset("d2");
  tk::comm::nccl_communicator one = tk::comm::nccl_communicator::single();
  tk::model::gpt2_cuda a(cfg, 11), b(cfg, 11), c(cfg, 11);
  to::sharded_muon_cuda first(a, {test_config(true), one});
  three_updates(a, first);
  const tk::checkpoint::optimizer_shard saved = first.sharded_state();
  const tk::state_tensor* by_matrix = nullptr;
  for (const tk::state_tensor& t : saved.shard)
    if (t.name == "optim.muon.normuon.second_moment") by_matrix = &t;
  ASSERT_NE(by_matrix, nullptr);
  const std::vector<float> padded = tensor_to_host(*by_matrix);
  const tk::state_tensor* inner = nullptr;
  const std::vector<tk::state_tensor> whole = first.state();
  for (const tk::state_tensor& t : whole)
    if (t.name == "optim.muon.second_moment") inner = &t;
  ASSERT_NE(inner, nullptr);
  const std::vector<float> lines = tensor_to_host(*inner);
  std::size_t line = 0, nonzero = 0;
  for (const to::muon_matrix& m : first.matrices()) {
    const std::size_t n = std::size_t(std::max(m.rows, m.cols));
    for (std::size_t k = 0; k < m.numel(); ++k) {
      const float want = k < n ? lines[line + k] : 0.0f;
      EXPECT_EQ(padded[m.state_offset + k], want) << "matrix at " << m.offset << ", " << k;
      nonzero += k < n && want != 0.0f;
    }
    line += n;
  }
  EXPECT_GT(nonzero, 0u) << "three updates leave a second moment";

  // Restored into a fresh optimizer (parameters copied, fp32 masters restored), the next update's
  // second moment follows the original's; a fresh one's would be (1 - beta2) of it.
  std::vector<float> params = download(a);
  b.copy_parameters_from_host(params);
  to::sharded_muon_cuda second(b, {test_config(true), one});
  restore(first.sharded_state(), second.sharded_state());
  three_updates(a, first);
  three_updates(b, second);
  std::vector<float> want, got;
  for (const tk::state_tensor& t : first.state())
    if (t.name == "optim.muon.second_moment") want = tensor_to_host(t);
  for (const tk::state_tensor& t : second.state())
    if (t.name == "optim.muon.second_moment") got = tensor_to_host(t);
  ASSERT_EQ(got.size(), want.size());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  EXPECT_LT(std::sqrt(num / den), 2e-2) << "the restored second moment carried on";

  // Without NorMuon, a NorMuon state is refused at the first update.
  to::sharded_muon_cuda plain(c, {test_config(false), one});
  tk::checkpoint::optimizer_shard target = plain.sharded_state();
  for (tk::state_tensor& t : target.common)
    if (t.name == "optim.muon.normuon") *reinterpret_cast<std::uint64_t*>(t.data) = 1;
  try {
    three_updates(c, plain);
    ADD_FAILURE() << "a NorMuon state resumed without NorMuon";
  } catch (const tk::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("muon_config.normuon"), std::string::npos) << e.what();
  }
}

TEST(ShardedMuonCuda, RanksGatherEveryMatrixAndKeepTheirShareOnly) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  if (world_size() < 2)
    GTEST_SKIP() << "run under mpiexec -n 2 (ctest: optim.sharded_muon_cuda.2_ranks)";
  if (!select_gpu()) GTEST_SKIP() << "fewer GPUs than ranks";
  const int rank = world_rank(), ranks = world_size();
  for (const bool normuon : {false, true}) {
    SCOPED_TRACE(normuon ? "NorMuon" : "Muon");
    const tk::model::gpt2_config cfg = tk::model::gpt2_config::preset("d2");
    tk::model::gpt2_cuda shared(cfg, /*seed=*/11), alone(cfg, /*seed=*/11);
    tk::comm::nccl_communicator comm = tk::comm::nccl_communicator_from_mpi();
    to::sharded_muon_cuda sharded(shared, {test_config(normuon), comm});
    to::muon_cuda plain(alone, test_config(normuon));
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
    EXPECT_EQ(shard.shard.size(), normuon ? 3u : 2u) << "NorMuon's second moment is sharded too";
    EXPECT_LT(sharded.state_bytes(), plain.state_bytes());
  }
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
  EXPECT_EQ(common,
            (std::vector<std::string>{"optim.adamw.master", "optim.adamw.m", "optim.adamw.v",
                                      "optim.step", "optim.muon.normuon"}));
  EXPECT_EQ(sharded, (std::vector<std::string>{"optim.muon.momentum", "optim.muon.master"}));
}

// No device needed: the pack and unpack kernels' indexing (kernels::find_matrix over
// gather_table, element by element as each thread does) walked on the host equals the host twin
// (optim::muon_pack / muon_unpack, which test_muon_shares.cpp proves), for every rank of 1-4.
TEST(ShardedMuonCuda, KernelIndexingOnTheHostMatchesTheTwin) {
  const tk::model::gpt2_config cfg = tk::model::gpt2_config::preset("d2");
  const std::vector<tk::tensor_info> layout = tk::model::gpt2_parameter_layout(cfg);
  const std::size_t n = layout.back().offset + layout.back().numel();
  const std::vector<to::muon_matrix> ms =
      to::muon_matrices(layout, to::muon_config{}.muon_roles, "test");
  const std::vector<to::kernels::matrix_entry> table = to::sharded_muon_cuda::gather_table(ms);
  const int count = int(table.size());
  std::size_t total = 0;
  for (const auto& m : ms) total += m.numel();
  std::vector<float> flat(n);
  for (std::size_t i = 0; i < n; ++i) flat[i] = float(i) * 0.5f + 1.0f;
  for (int world = 1; world <= 4; ++world)
    for (const to::muon_share& share : to::muon_share_layout(ms, world, 5)) {
      std::vector<float> by_kernel(total, -1.0f), by_twin(total, -1.0f);
      for (std::uint64_t i = share.packed.offset; i < share.packed.offset + share.packed.count;
           ++i) {  // muon_pack_kernel's body
        const to::kernels::matrix_entry& m = to::kernels::find_matrix(table.data(), count, i);
        by_kernel[i] = flat[m.offset + (i - m.state_offset)];
      }
      to::muon_pack(std::span<const to::muon_matrix>(ms), share.matrices, flat.data(),
                    by_twin.data());
      EXPECT_EQ(by_kernel, by_twin) << "pack, " << world << " ranks";
    }
  std::vector<float> packed(total);
  for (std::size_t i = 0; i < total; ++i) packed[i] = -float(i) - 1.0f;
  std::vector<float> by_kernel = flat, by_twin = flat;
  for (std::uint64_t i = 0; i < total; ++i) {  // muon_unpack_kernel's body
    const to::kernels::matrix_entry& m = to::kernels::find_matrix(table.data(), count, i);
    by_kernel[m.offset + (i - m.state_offset)] = packed[i];
  }
  to::muon_unpack(std::span<const to::muon_matrix>(ms), packed.data(), by_twin.data());
  EXPECT_EQ(by_kernel, by_twin) << "unpack";
}

// No device needed: muon_cuda's plan for each rank's share (what the momentum, apply and
// load-master kernels index by), walked on the host: packed element i of the share is element
// share.offset + i of the buffer of every matrix and lands where that matrix is in the flat
// buffer; the work offsets cover [0, elements) once each, every matrix inside its shape group's
// run; the shape scale is √max(1, rows/cols); NorMuon's lines (line offsets and normuon_line)
// give each line of each owned matrix its min(rows, cols) elements. GPT-2 and Llama layouts, 1-4
// ranks.
TEST(ShardedMuonCuda, SharePlanOnTheHostIndexesEveryOwnedElementOnce) {
  const auto gpt2 = tk::model::gpt2_parameter_layout(tk::model::gpt2_config::preset("d2"));
  const auto llama = tk::model::llama_parameter_layout(tk::model::llama_config::preset("d2"));
  for (const auto* layout : {&gpt2, &llama}) {
    const std::vector<to::muon_matrix> ms =
        to::muon_matrices(*layout, to::muon_config{}.muon_roles, "test");
    for (int world = 1; world <= 4; ++world)
      for (const to::muon_share& share : to::muon_share_layout(ms, world, 5)) {
        const to::muon_cuda::share_plan plan = to::muon_cuda::plan_share(ms, share.matrices);
        ASSERT_EQ(plan.elements, share.packed.count);
        ASSERT_EQ(plan.table.size(), share.matrices.last - share.matrices.first);
        std::vector<int> work_hits(plan.elements, 0);
        std::vector<int> line_hits(plan.lines, 0);  // NorMuon's lines (issue 38)
        std::size_t wrong_flat = 0, outside_group = 0;
        for (std::uint64_t i = 0; i < plan.elements; ++i) {
          const to::kernels::matrix_entry& e =
              to::kernels::find_matrix(plan.table.data(), int(plan.table.size()), i);
          // The matrix holding element share.offset + i of the buffer of every matrix.
          const std::size_t whole = share.packed.offset + i;
          std::size_t k = share.matrices.first;
          while (ms[k].state_offset + ms[k].numel() <= whole) ++k;
          wrong_flat +=
              e.offset + (i - e.state_offset) != ms[k].offset + (whole - ms[k].state_offset);
          const std::uint64_t w = e.work_offset + (i - e.state_offset);
          ASSERT_LT(w, plan.elements);
          ++work_hits[w];
          bool inside = false;
          for (const auto& g : plan.groups)
            inside =
                inside || (g.rows == ms[k].rows && g.cols == ms[k].cols && w >= g.work_offset &&
                           w < g.work_offset + std::size_t(g.count) * ms[k].numel());
          outside_group += !inside;
          EXPECT_EQ(e.shape_scale,
                    float(std::sqrt(std::max(1.0, double(ms[k].rows) / double(ms[k].cols)))));
          ASSERT_EQ(std::int64_t(e.rows), ms[k].rows);
          ASSERT_EQ(std::int64_t(e.cols), ms[k].cols);
          const std::uint64_t line =
              e.line_offset + to::kernels::normuon_line(e, i - e.state_offset);
          ASSERT_LT(line, plan.lines);
          ++line_hits[line];
        }
        // Every line of every owned matrix gathers exactly its min(rows, cols) elements: the
        // normuon kernel's lines and the apply kernel's normuon_line agree, lines do not overlap.
        std::vector<int> want_hits(plan.lines, 0);
        for (const to::kernels::matrix_entry& e : plan.table)
          for (int l = 0; l < std::max(e.rows, e.cols); ++l)
            want_hits[e.line_offset + std::uint64_t(l)] = std::min(e.rows, e.cols);
        EXPECT_EQ(line_hits, want_hits) << world << " ranks";
        EXPECT_EQ(wrong_flat, 0u) << world << " ranks";
        EXPECT_EQ(outside_group, 0u) << world << " ranks";
        EXPECT_EQ(std::count(work_hits.begin(), work_hits.end(), 1), std::ptrdiff_t(plan.elements))
            << world << " ranks";
      }
  }
  // One share of everything: GPT-2 has three shapes (C×C, 4C×C, C×4C).
  const std::vector<to::muon_matrix> all =
      to::muon_matrices(gpt2, to::muon_config{}.muon_roles, "t");
  EXPECT_EQ(to::muon_cuda::plan_share(all, {0, all.size()}).groups.size(), 3u);
}

TEST(ShardedMuonCuda, NoCommunicatorIsRefused) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  if (!select_gpu()) GTEST_SKIP() << "fewer GPUs than ranks";
  tk::model::gpt2_cuda model(tk::model::gpt2_config::preset("d2"), /*seed=*/11);
  EXPECT_THROW(to::sharded_muon_cuda(model, to::sharded_muon_cuda_config{}), tk::config_error);
}

namespace {

namespace fs = std::filesystem;
namespace ck = trainkit::checkpoint;
using staged_sync = ck::host_staged_checkpointer<ck::sync_checkpointer>;

template <class Optimizer, class Checkpointer, class Reducer = tk::reduce::single>
using muon_trainer = tk::trainer<tk::data::mmap_token_source, tk::prefetch::pinned<4>,
                                 tk::model::gpt2_cuda, Optimizer, Checkpointer, Reducer>;

/// A scratch folder with a shard of random tokens (never zeros) for d2 training.
struct training_dir {
  fs::path path =
      fs::temp_directory_path() / ("trainkit-sharded-muon-cuda-" + std::to_string(::getpid()) +
                                   "-" + std::to_string(world_rank()));
  std::string shard = (path / "train.bin").string();
  training_dir() {
    fs::create_directories(path);
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> token(0, 50256);
    std::vector<std::uint16_t> tokens(1 << 15);
    for (auto& t : tokens) t = std::uint16_t(token(rng));
    tk::data::write_shard(shard, std::span<const std::uint16_t>(tokens));
  }
  ~training_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  tk::data::mmap_token_source source(int vocab) const {
    return tk::data::mmap_token_source({shard, 4, 32, vocab, tk::data::order_kind::sequential, 0});
  }
};

tk::trainer_config loop_config(int steps, bool resume) {
  tk::trainer_config tc;
  tc.steps = steps;
  tc.schedule.max_lr = 1e-3f;
  tc.schedule.warmup_steps = 2;
  tc.ckpt_at_end = false;
  tc.resume = resume;
  tc.output.console.quiet = true;
  return tc;
}

/// The resumed losses against the straight run's: within 1e-4 relative, not bit for bit, because
/// the resumed optimizer autotunes its Newton–Schulz GEMMs anew (cuBLASLt may time another
/// algorithm fastest; on the CPU Muon resumes bit for bit, test_muon_training.cpp).
void expect_resumed(const tk::run_result& r, const std::vector<double>& straight, std::size_t from,
                    const std::string& what) {
  ASSERT_TRUE(r.resumed) << what;
  ASSERT_EQ(r.steps.size(), straight.size() - from) << what;
  for (std::size_t i = 0; i < r.steps.size(); ++i)
    EXPECT_LT(std::fabs(r.steps[i].loss - straight[from + i]), 1e-4 * straight[from + i])
        << what << ", step " << from + i + 1;
}

}  // namespace

// Muon's state in a (host-staged) sync checkpoint of a one-GPU run: 8 steps straight; 4, saved,
// then a new trainer resumes to 8 with the straight run's losses.
TEST(MuonCudaCheckpoint, SyncCheckpointResumes) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  if (!select_gpu()) GTEST_SKIP() << "fewer GPUs than ranks";
  training_dir dir;
  const fs::path ckpt = dir.path / "ckpt";
  const auto cfg = tk::model::gpt2_config::preset("d2");
  std::vector<double> straight;
  {
    muon_trainer<to::muon_cuda, ck::no_checkpoint> t(
        loop_config(8, false), dir.source(cfg.vocab_size), std::nullopt,
        tk::model::gpt2_cuda(cfg, 7), test_config(), {});
    for (const auto& m : t.run().steps) straight.push_back(m.loss);
  }
  auto make = [&](bool resume) {
    tk::trainer_config tc = loop_config(8, resume);
    tc.ckpt_at_end = true;
    return std::make_unique<muon_trainer<to::muon_cuda, staged_sync>>(
        tc, dir.source(cfg.vocab_size), std::nullopt, tk::model::gpt2_cuda(cfg, 7), test_config(),
        staged_sync(ck::sync_checkpointer({ckpt, 0})));
  };
  {
    auto t = make(false);
    t->on_step([](const tk::step_metrics& m) { return m.step < 4; });  // stop (and save) at 4
    ASSERT_EQ(t->run().last_step, 4u);
  }
  expect_resumed(make(true)->run(), straight, 4, "muon_cuda resumed");
}

// sharded_muon_cuda's sharded checkpoint over a world of one GPU (nccl_allreduce): saved at step
// 4 (one shard_RRRRR/ folder per rank), resumed by itself and by muon_cuda without a reducer (the
// shards of optim.muon.momentum and optim.muon.master reassembled).
TEST(MuonCudaCheckpoint, ShardedCheckpointResumesShardedAndWhole) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  if (!select_gpu()) GTEST_SKIP() << "fewer GPUs than ranks";
  training_dir dir;
  const fs::path ckpt = dir.path / "ckpt";
  const auto cfg = tk::model::gpt2_config::preset("d2");
  const auto comm = tk::comm::nccl_communicator::single();
  using sharded = muon_trainer<to::sharded_muon_cuda, staged_sync, tk::reduce::nccl_allreduce>;
  std::vector<double> straight;
  {
    muon_trainer<to::sharded_muon_cuda, ck::no_checkpoint, tk::reduce::nccl_allreduce> t(
        loop_config(8, false), dir.source(cfg.vocab_size), std::nullopt,
        tk::model::gpt2_cuda(cfg, 7), to::sharded_muon_cuda_config(test_config(), comm), {},
        tk::reduce::nccl_allreduce(comm));
    for (const auto& m : t.run().steps) straight.push_back(m.loss);
  }
  auto make = [&](bool resume) {
    tk::trainer_config tc = loop_config(8, resume);
    tc.ckpt_at_end = true;
    return std::make_unique<sharded>(
        tc, dir.source(cfg.vocab_size), std::nullopt, tk::model::gpt2_cuda(cfg, 7),
        to::sharded_muon_cuda_config(test_config(), comm),
        staged_sync(ck::sync_checkpointer({ckpt, 0})), tk::reduce::nccl_allreduce(comm));
  };
  {
    auto t = make(false);
    t->on_step([](const tk::step_metrics& m) { return m.step < 4; });
    ASSERT_EQ(t->run().last_step, 4u);
  }
  ASSERT_TRUE(fs::exists(ckpt / "step_00000004" / "shard_00000"))
      << "a sharded checkpoint has one folder per rank";
  expect_resumed(make(true)->run(), straight, 4, "sharded_muon_cuda resumed");
  fs::remove_all(ckpt / "step_00000008");  // the resumed run saved step 8 at its end
  muon_trainer<to::muon_cuda, staged_sync> whole(
      loop_config(8, true), dir.source(cfg.vocab_size), std::nullopt, tk::model::gpt2_cuda(cfg, 7),
      test_config(), staged_sync(ck::sync_checkpointer({ckpt, 0})));
  expect_resumed(whole.run(), straight, 4, "muon_cuda resuming the sharded checkpoint");
}

// The same with NorMuon: sharded_muon_cuda's sharded checkpoint (its second moment in the
// momentum's range) resumed by itself within 1e-4 of the straight run's losses; resuming it with
// NorMuon off is refused naming muon_config.normuon.
TEST(MuonCudaCheckpoint, ShardedNorMuonCheckpointResumes) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  if (!select_gpu()) GTEST_SKIP() << "fewer GPUs than ranks";
  training_dir dir;
  const fs::path ckpt = dir.path / "ckpt";
  const auto cfg = tk::model::gpt2_config::preset("d2");
  const auto comm = tk::comm::nccl_communicator::single();
  using sharded = muon_trainer<to::sharded_muon_cuda, staged_sync, tk::reduce::nccl_allreduce>;
  std::vector<double> straight;
  {
    muon_trainer<to::sharded_muon_cuda, ck::no_checkpoint, tk::reduce::nccl_allreduce> t(
        loop_config(8, false), dir.source(cfg.vocab_size), std::nullopt,
        tk::model::gpt2_cuda(cfg, 7), to::sharded_muon_cuda_config(test_config(true), comm), {},
        tk::reduce::nccl_allreduce(comm));
    for (const auto& m : t.run().steps) straight.push_back(m.loss);
  }
  auto make = [&](bool resume, bool normuon) {
    tk::trainer_config tc = loop_config(8, resume);
    tc.ckpt_at_end = true;
    return std::make_unique<sharded>(
        tc, dir.source(cfg.vocab_size), std::nullopt, tk::model::gpt2_cuda(cfg, 7),
        to::sharded_muon_cuda_config(test_config(normuon), comm),
        staged_sync(ck::sync_checkpointer({ckpt, 0})), tk::reduce::nccl_allreduce(comm));
  };
  {
    auto t = make(false, true);
    t->on_step([](const tk::step_metrics& m) { return m.step < 4; });
    ASSERT_EQ(t->run().last_step, 4u);
  }
  expect_resumed(make(true, true)->run(), straight, 4, "sharded NorMuon resumed");
  fs::remove_all(ckpt / "step_00000008");  // the resumed run saved step 8 at its end
  try {
    make(true, false)->run();
    ADD_FAILURE() << "a NorMuon checkpoint resumed without NorMuon";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("normuon"), std::string::npos) << e.what();
  }
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::optional<tk::comm::mpi_session> mpi;
  if (launched_by_mpi()) mpi.emplace();
  if (world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  return RUN_ALL_TESTS();
}
