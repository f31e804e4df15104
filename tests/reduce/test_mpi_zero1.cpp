// Tests of ZeRO-1 on the CPU (reduce::mpi_zero1 + optim::zero1_adamw_cpu), run by ctest under
// mpiexec with 2 ranks (default transports and TCP) and 3: the shard cut lies on the norm chunk
// grid and tiles the buffer; every rank receives exactly the sum over ranks of its shard, and the
// sharded norm is one process's norm bit for bit; a trainer with 2 ranks × 1 micro-batch equals
// 1 process × 2 micro-batches bit for bit over 20 steps with clipping on every step (losses,
// validation losses, norms, weights), to 1e-5 with more micro-batches or ranks; per-rank optimizer
// state is 1/N of one process's; a restored shard of another rank is refused. Sharded
// checkpoints: every rank writes its shard and the manifest lists them all; a 2-rank checkpoint
// resumes bit for bit on 2 ranks, to 1e-5 on 1 process (ZeRO-1 or whole-state AdamW) and on 3
// ranks (under -n 3); a DDP checkpoint resumes under ZeRO-1 bit for bit; a save that fails on one
// rank's shard commits nothing, leaves no temporary, and the previous checkpoint resumes.
#include <gtest/gtest.h>
#include <mpi.h>

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "mpi_training.hpp"
#include "trainkit/checkpoint/detail/posix_file.hpp"
#include "trainkit/checkpoint/format.hpp"
#include "trainkit/checkpoint/read.hpp"
#include "trainkit/checkpoint/sync_checkpointer.hpp"
#include "trainkit/comm/mpi_session.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/model/gpt2/cpu.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/grad_clip.hpp"
#include "trainkit/optim/zero1_adamw_cpu.hpp"
#include "trainkit/optim/zero1_shards.hpp"
#include "trainkit/reduce/mpi_allreduce.hpp"
#include "trainkit/reduce/mpi_zero1.hpp"

namespace tk = trainkit;

// The shipped ZeRO-1 pair satisfies its roles (kept here, not in the generic headers, so that
// they do not pull in a concrete model).
static_assert(tk::reduce::gradient_reducer_for<tk::reduce::mpi_zero1, tk::model::gpt2_cpu>);
static_assert(tk::optim::optimizer_for<tk::optim::zero1_adamw_cpu, tk::model::gpt2_cpu>);
// ... and is a pair: the reducer delivers the reduce-scattered gradients the optimizer reads, which
// neither DDP's reducer nor its optimizer does (the trainer refuses the mixed pairs;
// tests/trainer/mnc/zero1_reducer_*.cpp).
static_assert(tk::reduce::mpi_zero1::delivered_gradients == tk::gradient_layout::reduce_scattered);
static_assert(tk::optim::zero1_adamw_cpu::expected_gradients ==
              tk::gradient_layout::reduce_scattered);
static_assert(tk::reduce::mpi_allreduce::delivered_gradients == tk::gradient_layout::replicated);
static_assert(tk::optim::adamw_cpu::expected_gradients == tk::gradient_layout::replicated);

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
  // The trainer's clipping step over the reducer's facts: this rank sums its shard's chunks only,
  // the reducer sums the ranks' partials.
  ASSERT_EQ(r.owned_gradients().size(), 1u);
  EXPECT_EQ(r.owned_gradients()[0], s);
  tk::optim::host_grad_clip clip;
  const std::span<const float> g(m.grads);
  const auto scale = clip(g, m.gradient_buckets(), r, 10.0, ctx);
  const double expect = tk::optim::global_norm(std::span<const float>(sum));
  if (n == 2) {
    EXPECT_TRUE(same_bits(clip.norm(), expect)) << clip.norm() << " vs " << expect;
  }
  EXPECT_NEAR(clip.norm(), expect, 1e-6 * expect);
  EXPECT_EQ(scale.factor, 10.0 / clip.norm()) << "max_norm / norm, no epsilon";
  EXPECT_LT(scale.factor, 1.0) << "the test's norm is large enough to clip";
  EXPECT_EQ(clip(g, m.gradient_buckets(), r, 2 * expect, ctx).factor, 1.0)
      << "a threshold above the norm leaves the step unscaled";
  EXPECT_EQ(clip(g, m.gradient_buckets(), r, 0.0, ctx).factor, 1.0) << "0 = off";
  // Every rank has the same norm.
  double root = clip.norm();
  ASSERT_EQ(MPI_Bcast(&root, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_TRUE(same_bits(root, clip.norm()));
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

// ---- sharded checkpoints ----

namespace fs = std::filesystem;

// Ranks 0 and 1 of the world, the ranks that write the checkpoints these tests resume (under
// -n 3 the third rank joins for the resharded resume). MPI_COMM_NULL on the others.
struct two_ranks {
  MPI_Comm comm = MPI_COMM_NULL;
  two_ranks() {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    EXPECT_EQ(MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &comm),
              MPI_SUCCESS);
  }
  ~two_ranks() {
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
  two_ranks(const two_ranks&) = delete;
  two_ranks& operator=(const two_ranks&) = delete;
};

// One fresh directory for every rank of `comm`, named after its rank 0's pid.
fs::path shared_dir(MPI_Comm comm, const std::string& what) {
  long long id = ::getpid();
  EXPECT_EQ(MPI_Bcast(&id, 1, MPI_LONG_LONG, 0, comm), MPI_SUCCESS);
  return fs::temp_directory_path() / ("trainkit_zero1_" + what + "_" + std::to_string(id));
}

// A checkpointer cleans its directory when constructed: rank 0 of `comm` first, alone.
tk::checkpoint::sync_checkpointer checkpointer_on(MPI_Comm comm, const fs::path& dir) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank != 0) {
    EXPECT_EQ(MPI_Barrier(comm), MPI_SUCCESS);
  }
  tk::checkpoint::sync_checkpointer c({dir, 0});
  if (rank == 0) {
    EXPECT_EQ(MPI_Barrier(comm), MPI_SUCCESS);
  }
  return c;
}

// ZeRO-1 on the ranks of `comm` (world size `ranks`), `micro` micro-batches each.
run_record zero1_run(MPI_Comm comm, int micro, run_options o,
                     std::optional<fs::path> dir = std::nullopt, bool resume = false) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  o.optimizer_comm = comm;
  if (!dir)
    return train<tk::reduce::mpi_zero1, tk::checkpoint::no_checkpoint, tk::optim::zero1_adamw_cpu>(
        rank, ranks, micro, tk::reduce::mpi_zero1(comm), o);
  return train<tk::reduce::mpi_zero1, tk::checkpoint::sync_checkpointer,
               tk::optim::zero1_adamw_cpu>(rank, ranks, micro, tk::reduce::mpi_zero1(comm), o,
                                           checkpointer_on(comm, *dir), resume);
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Rank 0's losses on every rank of the world (the third rank under -n 3 ran no 2-rank run).
std::vector<double> from_rank0(std::vector<double> v, std::size_t n) {
  v.resize(n);
  EXPECT_EQ(MPI_Bcast(v.data(), int(n), MPI_DOUBLE, 0, MPI_COMM_WORLD), MPI_SUCCESS);
  return v;
}

void expect_near_losses(const std::vector<double>& got, const std::vector<double>& whole,
                        const std::string& what) {
  ASSERT_EQ(got.size(), 5u) << what << ": steps 6..10";
  for (std::size_t s = 0; s < 5; ++s)
    EXPECT_NEAR(got[s], whole[s + 5], 1e-5 * whole[s + 5]) << what << ", step " << s + 6;
}

// Runs a part of a test that only some ranks run: an exception there (a diverged resume, say)
// becomes a failure instead of leaving those ranks out of the collectives the others wait in.
void guarded(const std::function<void()>& part) {
  try {
    part();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw: " << e.what();
  }
}

// 6 micro-batches per step over all ranks: 2 ranks × 3, 3 ranks × 2, 1 process × 6 see the same
// global batches, so every resume below continues the same run.
constexpr int global_micro = 6;

TEST(MpiZero1Checkpoint, TwoRanksShardsResumeBitForBitOnTwoRanksAndReshardedOnOneAndN) {
  two_ranks pair;
  const int world_rank = [] {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
  }();
  const int world = [] {
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
  }();
  const fs::path dir = shared_dir(MPI_COMM_WORLD, "resume");
  std::vector<double> whole_loss;
  if (pair.comm != MPI_COMM_NULL)
    guarded([&] {
      const run_record whole = zero1_run(pair.comm, 3, {.steps = 10, .on_step = {}});
      whole_loss = whole.loss;
      const run_record first = zero1_run(pair.comm, 3, {.steps = 5, .on_step = {}}, dir);
      ASSERT_EQ(first.loss.size(), 5u);
      for (std::size_t s = 0; s < 5; ++s)
        EXPECT_TRUE(same_bits(first.loss[s], whole.loss[s])) << "step " << s + 1;

      // The manifest lists every rank's shard, where the optimizer cut the buffer.
      if (world_rank == 0) {
        EXPECT_EQ(names_in(dir), std::vector<std::string>{"step_00000005"});
        const fs::path ckpt = dir / "step_00000005";
        EXPECT_EQ(names_in(ckpt), (std::vector<std::string>{"manifest.json", "shard_00000",
                                                            "shard_00001", "tensors.bin"}));
        const tk::checkpoint::manifest m = tk::checkpoint::verify_checkpoint(ckpt);
        EXPECT_EQ(m.version, tk::checkpoint::sharded_format_version);
        const std::size_t n = first.parameters.size();
        // EXPECT, not ASSERT, on one rank: returning early would leave the others in a collective.
        EXPECT_EQ(m.shards.size(), 2u);
        for (std::uint64_t r = 0; r < std::min<std::uint64_t>(2, m.shards.size()); ++r) {
          const auto& sh = m.shards[r];
          const auto cut = tk::optim::zero1_shard(n, 2, int(r));
          EXPECT_EQ(sh.rank, r);
          EXPECT_EQ(sh.offset, cut.offset) << "shard " << r;
          EXPECT_EQ(sh.count, cut.count) << "shard " << r;
          EXPECT_EQ(sh.tensors.size(), 2u);
          if (sh.tensors.size() != 2) continue;
          EXPECT_EQ(sh.tensors[0].name, "optim.m");
          EXPECT_EQ(sh.tensors[1].name, "optim.v");
          EXPECT_EQ(sh.tensors[0].shape, std::vector<std::int64_t>{std::int64_t(cut.count)});
        }
        EXPECT_NE(m.find("model.wte"), nullptr) << "the parameters are in rank 0's part";
        EXPECT_NE(m.find("optim.step"), nullptr);
        EXPECT_EQ(m.find("optim.m"), nullptr) << "the moments are in the shards only";
        EXPECT_EQ(m.find("optim.zero1.shard"), nullptr);
      }

      // The same two ranks: every rank loads its own shard, and the run continues bit for bit.
      const run_record again = zero1_run(pair.comm, 3, {.steps = 10, .on_step = {}}, dir, true);
      ASSERT_EQ(again.loss.size(), 5u) << "steps 6..10";
      EXPECT_TRUE(again.result.resumed);
      for (std::size_t s = 0; s < 5; ++s)
        EXPECT_TRUE(same_bits(again.loss[s], whole.loss[s + 5]))
            << "step " << s + 6 << ": " << again.loss[s] << " vs " << whole.loss[s + 5];
      EXPECT_EQ(std::memcmp(again.parameters.data(), whole.parameters.data(),
                            whole.parameters.size() * sizeof(float)),
                0);
    });
  whole_loss = from_rank0(whole_loss, 10);
  ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  // The resumed run saved step 10 at its end: the resumes below start from step 5 again.
  if (world_rank == 0) fs::remove_all(dir / "step_00000010");
  ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);

  // Every rank of the world: the moments reassembled from the two shards and cut for this world
  // size (under -n 2 the same cut, so bit for bit; under -n 3 another).
  if (global_micro % world == 0) {
    const run_record resharded =
        zero1_run(MPI_COMM_WORLD, global_micro / world, {.steps = 10, .on_step = {}}, dir, true);
    EXPECT_TRUE(resharded.result.resumed);
    if (world == 2) {
      ASSERT_EQ(resharded.loss.size(), 5u);
      for (std::size_t s = 0; s < 5; ++s)
        EXPECT_TRUE(same_bits(resharded.loss[s], whole_loss[s + 5])) << "step " << s + 6;
    } else {
      // 3 ranks × 2 micro-batches group the gradient sums differently from 2 × 3 (the loss of
      // step 6 too: its mean over ranks is summed in another grouping), so 1e-5, not bits.
      expect_near_losses(resharded.loss, whole_loss, std::to_string(world) + " ranks");
    }
  }
  ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);

  if (world_rank == 0)
    guarded([&] {
      fs::remove_all(dir / "step_00000010");  // the world's resume saved it
      // One process, ZeRO-1 over a world of one: its one shard is the whole buffer (the pair on
      // MPI_COMM_SELF: reduce::single delivers replicated gradients, which the trainer refuses
      // to hand a ZeRO-1 optimizer).
      const run_record one_zero1 = train<tk::reduce::mpi_zero1, tk::checkpoint::sync_checkpointer,
                                         tk::optim::zero1_adamw_cpu>(
          0, 1, global_micro, tk::reduce::mpi_zero1(MPI_COMM_SELF),
          {.steps = 10, .on_step = {}, .ckpt_every = 0, .optimizer_comm = MPI_COMM_SELF},
          tk::checkpoint::sync_checkpointer({dir, 0}), true);
      // One process with the whole-state AdamW: load_checkpoint reassembles "optim.m" and
      // "optim.v" from the shards.
      fs::remove_all(dir / "step_00000010");
      const run_record one_adamw =
          train(0, 1, global_micro, tk::reduce::single{}, {.steps = 10, .on_step = {}},
                tk::checkpoint::sync_checkpointer({dir, 0}), true);
      // 1 × 6 groups the micro-batches' gradients differently from 2 × 3: 1e-5.
      expect_near_losses(one_zero1.loss, whole_loss, "one process, ZeRO-1");
      expect_near_losses(one_adamw.loss, whole_loss, "one process, adamw_cpu");
      // The two one-process optimizers run the same AdamW over the same reassembled moments.
      EXPECT_EQ(one_zero1.loss.size(), one_adamw.loss.size());
      for (std::size_t s = 0; s < std::min(one_zero1.loss.size(), one_adamw.loss.size()); ++s)
        EXPECT_TRUE(same_bits(one_zero1.loss[s], one_adamw.loss[s])) << "step " << s + 6;
      fs::remove_all(dir);
    });
  ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
}

// A DDP checkpoint (rank 0's whole state) resumed by ZeRO-1: each rank takes its slice of the
// whole moments. 2 × 3 through mpi_allreduce and through mpi_zero1 are the same arithmetic
// (docs/distributed.md), so the continuation is the uninterrupted ZeRO-1 run's, bit for bit.
TEST(MpiZero1Checkpoint, ADdpCheckpointResumesUnderZero1BitForBit) {
  two_ranks pair;
  if (pair.comm == MPI_COMM_NULL) return;
  const fs::path dir = shared_dir(pair.comm, "ddp");
  int rank = 0;
  MPI_Comm_rank(pair.comm, &rank);
  const run_record whole = zero1_run(pair.comm, 3, {.steps = 10, .on_step = {}});
  const run_record ddp = train<tk::reduce::mpi_allreduce, tk::checkpoint::sync_checkpointer>(
      rank, 2, 3, tk::reduce::mpi_allreduce(pair.comm), {.steps = 5, .on_step = {}},
      checkpointer_on(pair.comm, dir));
  ASSERT_EQ(ddp.loss.size(), 5u);
  const run_record resumed = zero1_run(pair.comm, 3, {.steps = 10, .on_step = {}}, dir, true);
  ASSERT_EQ(resumed.loss.size(), 5u);
  for (std::size_t s = 0; s < 5; ++s)
    EXPECT_TRUE(same_bits(resumed.loss[s], whole.loss[s + 5])) << "step " << s + 6;
  EXPECT_EQ(std::memcmp(resumed.parameters.data(), whole.parameters.data(),
                        whole.parameters.size() * sizeof(float)),
            0);
  ASSERT_EQ(MPI_Barrier(pair.comm), MPI_SUCCESS);
  if (rank == 0) fs::remove_all(dir);
}

// Rank 1's shard of step 5 cannot be written (a full disk, through the writer's test seam): no
// rank commits, every rank throws, no temporary is left, and step 3 resumes bit for bit.
TEST(MpiZero1Checkpoint, AFailedShardCommitsNothingOnAnyRankAndThePreviousCheckpointResumes) {
  two_ranks pair;
  if (pair.comm == MPI_COMM_NULL) return;
  const fs::path dir = shared_dir(pair.comm, "fail");
  int rank = 0;
  MPI_Comm_rank(pair.comm, &rank);
  const run_record whole = zero1_run(pair.comm, 1, {.steps = 10, .on_step = {}});
  auto& disk = tk::checkpoint::detail::simulated_disk_space;
  try {
    zero1_run(pair.comm, 1,
              {.steps = 5,
               .on_step =
                   [&](const tk::step_metrics& m) {
                     if (m.step == 4 && rank == 1) disk = 0;  // after step 3's save
                     return true;
                   },
               .ckpt_every = 3},
              dir);
    ADD_FAILURE() << "the save of step 5 failed on rank 1 but run() returned on rank " << rank;
  } catch (const tk::io_error& e) {
    const std::string what = e.what();
    if (rank == 1) {
      EXPECT_NE(what.find("No space left"), std::string::npos) << what;
    } else {
      EXPECT_NE(what.find("rank 1 failed"), std::string::npos) << what;
      EXPECT_NE(what.find("step 5"), std::string::npos) << what;
    }
  }
  disk = -1;
  ASSERT_EQ(MPI_Barrier(pair.comm), MPI_SUCCESS);
  if (rank == 0) {
    EXPECT_EQ(names_in(dir), std::vector<std::string>{"step_00000003"})
        << "no step 5, no .tmp.step_00000005";
  }
  ASSERT_EQ(MPI_Barrier(pair.comm), MPI_SUCCESS);
  const run_record resumed = zero1_run(pair.comm, 1, {.steps = 10, .on_step = {}}, dir, true);
  ASSERT_EQ(resumed.loss.size(), 7u) << "steps 4..10";
  for (std::size_t s = 0; s < 7; ++s)
    EXPECT_TRUE(same_bits(resumed.loss[s], whole.loss[s + 3])) << "step " << s + 4;
  ASSERT_EQ(MPI_Barrier(pair.comm), MPI_SUCCESS);
  if (rank == 0) fs::remove_all(dir);
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
