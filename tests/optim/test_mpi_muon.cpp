// Tests for trainkit/optim/sharded_muon_cpu.hpp under mpiexec (2 ranks): each rank keeps only its
// share of Muon's momentum, a training run of 2 ranks × 1 micro-batch (mpi_allreduce) equals one
// process accumulating 2 micro-batches with muon_cpu bit for bit, and the sharded state saves
// through the sharded-checkpoint path and resumes bit for bit on 2 ranks and in one process; the
// same with NorMuon (its second moment sharded with the momentum), and a checkpoint of the other
// NorMuon setting is refused naming it.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "trainkit/checkpoint/no_checkpoint.hpp"
#include "trainkit/checkpoint/sync_checkpointer.hpp"
#include "trainkit/comm/mpi_session.hpp"
#include "trainkit/data/synthetic_source.hpp"
#include "trainkit/model/gpt2/cpu.hpp"
#include "trainkit/optim/muon_cpu.hpp"
#include "trainkit/optim/sharded_muon_cpu.hpp"
#include "trainkit/prefetch/threaded_prefetcher.hpp"
#include "trainkit/reduce/mpi_allreduce.hpp"
#include "trainkit/reduce/single.hpp"
#include "trainkit/trainer/trainer.hpp"

namespace tk = trainkit;
namespace fs = std::filesystem;

static_assert(tk::optim::optimizer_for<tk::optim::sharded_muon_cpu, tk::model::gpt2_cpu>);

namespace {

// d2's shape with a small vocabulary and context: a step takes milliseconds on one thread.
tk::model::gpt2_config d2_small_vocab() {
  return {.max_seq_len = 16,
          .vocab_size = 100,
          .padded_vocab_size = 128,
          .num_layers = 2,
          .num_heads = 2,
          .channels = 128};
}

struct run_record {
  std::vector<double> loss, grad_norm;
  std::vector<float> parameters;
  tk::run_result result;
};

// `micro` micro-batches per rank on the rank's slice of the synthetic stream, Optimizer's config
// built from a muon_config; with rank 0 of 1 it is the one-process reference.
template <class Optimizer, class Reducer, class Checkpointer = tk::checkpoint::no_checkpoint>
run_record train(int rank, int ranks, int micro, Reducer reducer, int steps,
                 Checkpointer checkpointer = {}, bool resume = false, int ckpt_every = 0,
                 bool normuon = false) {
  constexpr int B = 2, T = 8;
  tk::trainer_config cfg;
  cfg.steps = steps;
  cfg.resume = resume;
  cfg.ckpt_every = ckpt_every;
  cfg.output.console.quiet = true;
  cfg.total_batch_tokens = std::size_t(micro) * std::size_t(ranks) * B * T;
  cfg.schedule.kind = tk::optim::schedule_kind::cosine;
  cfg.schedule.warmup_steps = 2;
  cfg.schedule.max_lr = 3e-3f;
  cfg.grad_clip = 0.5f;  // small: clipping acts on every step
  tk::optim::muon_config m;
  m.lr_ratio = double(0.02f) / double(cfg.schedule.max_lr);  // Muon's 0.02 at the peak
  m.weight_decay = 0.01f;
  m.normuon = normuon;
  tk::trainer<tk::data::synthetic_source, tk::prefetch::threaded<2>, tk::model::gpt2_cpu, Optimizer,
              Checkpointer, Reducer>
      t(cfg,
        tk::data::synthetic_source({.batch_size = B,
                                    .seq_len = T,
                                    .vocab_size = 100,
                                    .alphabet = 20,
                                    .branching = 2,
                                    .seed = 5,
                                    .rank = rank,
                                    .world_size = ranks}),
        std::nullopt, tk::model::gpt2_cpu(d2_small_vocab(), 11), typename Optimizer::config_type(m),
        std::move(checkpointer), std::move(reducer));
  run_record r;
  t.on_step([&](const tk::step_metrics& s) {
    r.loss.push_back(s.loss);
    r.grad_norm.push_back(s.grad_norm);
    return true;
  });
  r.result = t.run();
  const auto p = t.model().parameters();
  r.parameters.assign(p.begin(), p.end());
  return r;
}

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

void expect_same_run(const run_record& got, const run_record& want, std::size_t from,
                     const std::string& what) {
  ASSERT_EQ(got.loss.size() + from, want.loss.size()) << what;
  for (std::size_t s = 0; s < got.loss.size(); ++s) {
    EXPECT_TRUE(same_bits(got.loss[s], want.loss[s + from]))
        << what << ", step " << s + from + 1 << ": " << got.loss[s] << " vs "
        << want.loss[s + from];
    EXPECT_TRUE(same_bits(got.grad_norm[s], want.grad_norm[s + from]))
        << what << ", step " << s + from + 1;
  }
  ASSERT_EQ(got.parameters.size(), want.parameters.size());
  EXPECT_EQ(std::memcmp(got.parameters.data(), want.parameters.data(),
                        want.parameters.size() * sizeof(float)),
            0)
      << what << ": weights";
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// One fresh directory for every rank, named after rank 0's pid.
fs::path shared_dir(const std::string& what) {
  long long id = ::getpid();
  EXPECT_EQ(MPI_Bcast(&id, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD), MPI_SUCCESS);
  return fs::temp_directory_path() / ("trainkit_muon_" + what + "_" + std::to_string(id));
}

// A checkpointer cleans its directory when constructed: rank 0 first, alone.
tk::checkpoint::sync_checkpointer checkpointer_at(const fs::path& dir) {
  if (world_rank() != 0) {
    EXPECT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  }
  tk::checkpoint::sync_checkpointer c({dir, 0});
  if (world_rank() == 0) {
    EXPECT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  }
  return c;
}

using tk::optim::muon_cpu;
using tk::optim::sharded_muon_cpu;

}  // namespace

TEST(ShardedMuon, EachRankKeepsOnlyItsShareOfTheMomentum) {
  tk::model::gpt2_cpu model(d2_small_vocab(), 11);
  sharded_muon_cpu sharded(model, tk::optim::muon_config{});
  muon_cpu whole(model, {});
  const auto own = sharded.owned();
  EXPECT_LT(own.last - own.first, whole.matrices().size()) << "with 2 ranks, not every matrix";
  EXPECT_GT(own.last, own.first);
  double mine = double(sharded.state_bytes()), sum = mine;
  MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  // AdamW's moments are whole on every rank; the momentum is split.
  const double adamw_bytes = 2.0 * double(whole.adamw_elements()) * sizeof(float);
  EXPECT_EQ(sum - world_size() * adamw_bytes, double(whole.state_bytes()) - adamw_bytes);
  auto s = sharded.sharded_state();
  ASSERT_EQ(s.shard.size(), 1u);
  EXPECT_EQ(s.shard[0].name, "optim.muon.momentum");
  EXPECT_EQ(s.range.total, whole.momentum_elements());
}

TEST(ShardedMuon, TwoRanksOfOneMicroBatchEqualOneProcessOfTwoBitForBit) {
  tk::reduce::mpi_allreduce reducer;
  const int rank = reducer.rank(), n = reducer.world_size();
  const run_record one = train<muon_cpu>(0, 1, n, tk::reduce::single{}, 8);
  const run_record dp = train<sharded_muon_cpu>(rank, n, 1, std::move(reducer), 8);
  expect_same_run(dp, one, 0, "2 ranks vs 1 process");
  std::vector<float> root = dp.parameters;
  ASSERT_EQ(MPI_Bcast(root.data(), int(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(root, dp.parameters) << "every rank holds the same weights";
}

TEST(ShardedMuon, ShardedCheckpointResumesBitForBitOnTwoRanksAndInOneProcess) {
  const int n = world_size();
  const fs::path dir = shared_dir("resume");
  const run_record whole =
      train<sharded_muon_cpu>(world_rank(), n, 1, tk::reduce::mpi_allreduce{}, 6);
  const run_record first = train<sharded_muon_cpu>(world_rank(), n, 1, tk::reduce::mpi_allreduce{},
                                                   3, checkpointer_at(dir), false, 3);
  ASSERT_EQ(first.loss.size(), 3u);
  if (world_rank() == 0) {
    const auto m = tk::checkpoint::read_manifest(dir / "step_00000003" / "manifest.json");
    EXPECT_EQ(m.shards.size(), std::size_t(n)) << "one shard of momentum per rank";
  }
  ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  tk::checkpoint::sync_checkpointer again({dir, 0});
  const run_record resumed = train<sharded_muon_cpu>(
      world_rank(), n, 1, tk::reduce::mpi_allreduce{}, 6, std::move(again), true, 3);
  ASSERT_TRUE(resumed.result.resumed);
  expect_same_run(resumed, whole, 3, "resumed on 2 ranks");
  ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  // One process with muon_cpu reads the momentum reassembled (2 micro-batches: the same batches).
  if (world_rank() == 0) {
    const fs::path solo = dir.string() + "_solo";
    fs::remove_all(solo);
    fs::create_directories(solo);
    fs::copy(dir / "step_00000003", solo / "step_00000003", fs::copy_options::recursive);
    const run_record one = train<muon_cpu>(0, 1, n, tk::reduce::single{}, 6,
                                           tk::checkpoint::sync_checkpointer({solo, 0}), true, 0);
    ASSERT_TRUE(one.result.resumed);
    expect_same_run(one, whole, 3, "resumed in one process");
    fs::remove_all(solo);
    fs::remove_all(dir);
  }
  ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
}

TEST(ShardedMuon, NorMuonTwoRanksEqualOneProcessBitForBit) {
  tk::reduce::mpi_allreduce reducer;
  const int rank = reducer.rank(), n = reducer.world_size();
  const run_record one = train<muon_cpu>(0, 1, n, tk::reduce::single{}, 8, {}, false, 0, true);
  const run_record dp =
      train<sharded_muon_cpu>(rank, n, 1, std::move(reducer), 8, {}, false, 0, true);
  expect_same_run(dp, one, 0, "NorMuon, 2 ranks vs 1 process");
  const run_record plain = train<muon_cpu>(0, 1, n, tk::reduce::single{}, 8);
  EXPECT_NE(plain.parameters, one.parameters) << "NorMuon changes the run";
}

TEST(ShardedMuon, NorMuonShardedCheckpointResumesBitForBit) {
  const int n = world_size();
  const fs::path dir = shared_dir("normuon");
  const run_record whole = train<sharded_muon_cpu>(world_rank(), n, 1, tk::reduce::mpi_allreduce{},
                                                   6, {}, false, 0, true);
  const run_record first = train<sharded_muon_cpu>(world_rank(), n, 1, tk::reduce::mpi_allreduce{},
                                                   3, checkpointer_at(dir), false, 3, true);
  ASSERT_EQ(first.loss.size(), 3u);
  if (world_rank() == 0) {
    const auto m = tk::checkpoint::read_manifest(dir / "step_00000003" / "manifest.json");
    ASSERT_EQ(m.shards.size(), std::size_t(n));
    EXPECT_NE(m.shards[0].find("optim.muon.normuon.second_moment"), nullptr);
  }
  ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  tk::checkpoint::sync_checkpointer again({dir, 0});
  const run_record resumed = train<sharded_muon_cpu>(
      world_rank(), n, 1, tk::reduce::mpi_allreduce{}, 6, std::move(again), true, 3, true);
  ASSERT_TRUE(resumed.result.resumed);
  expect_same_run(resumed, whole, 3, "NorMuon resumed on 2 ranks");
  ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  if (world_rank() == 0) fs::remove_all(dir);
  ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
}

// Resumes `dir`'s step 3 with NorMuon `on` and returns the error's text ("" when none).
std::string resume_error(const fs::path& dir, bool on) {
  EXPECT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  try {
    train<sharded_muon_cpu>(world_rank(), world_size(), 1, tk::reduce::mpi_allreduce{}, 6,
                            tk::checkpoint::sync_checkpointer({dir, 0}), true, 3, on);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(ShardedMuon, ACheckpointOfTheOtherNorMuonSettingIsRefused) {
  for (const bool written_with : {false, true}) {
    const fs::path dir = shared_dir(written_with ? "with_normuon" : "without_normuon");
    train<sharded_muon_cpu>(world_rank(), world_size(), 1, tk::reduce::mpi_allreduce{}, 3,
                            checkpointer_at(dir), false, 3, written_with);
    const std::string error = resume_error(dir, !written_with);
    EXPECT_NE(error.find("normuon"), std::string::npos)
        << "written " << (written_with ? "with" : "without") << " NorMuon: '" << error << "'";
    EXPECT_EQ(resume_error(dir, written_with), "") << "the same setting resumes";
    ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
    if (world_rank() == 0) fs::remove_all(dir);
    ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  }
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
