// End-to-end GPU training: trainer<mmap_token_source, pinned<4>, gpt2_cuda, adamw_cuda,
// no_checkpoint> for 50 steps of d2 on the embedded corpus (real GPT-2 tokens of
// Python documentation), against the CPU composition (training_reference.cpp, g++) from the same
// bf16-rounded weights on the same batches. bf16 activations and gradients move the loss a little
// each step, so the curves are compared within 5% per step (a wrong optimizer, prefetcher or
// gradient sends them apart within a few steps) and the GPU loss must fall by 15%. In
// deterministic mode two runs give bit-identical losses. Also: sync checkpoint through
// host_staged_checkpointer, resumed run continues with the same losses. With NCCL: the NCCL
// reducer over a world of one GPU gives the single-process losses bit for bit (its buckets are
// published, reduced on its own stream and ordered back). The micro-step replayed as a CUDA graph
// gives the eager losses bit for bit. Skips without a device.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "gpu_test_support.cuh"
#include "training_reference.hpp"
#include "trainkit/checkpoint/host_staged_checkpointer.hpp"
#include "trainkit/checkpoint/no_checkpoint.hpp"
#include "trainkit/checkpoint/sync_checkpointer.hpp"
#include "trainkit/data/mmap_token_source.hpp"
#include "trainkit/model/gpt2_cuda.hpp"
#include "trainkit/optim/adamw_cuda.hpp"
#include "trainkit/prefetch/pinned_prefetcher.hpp"
#include "trainkit/trainer/trainer.hpp"
#if defined(TRAINKIT_TEST_NCCL)
#include "trainkit/reduce/nccl_allreduce.hpp"
#endif

namespace {

namespace tk = trainkit;
namespace fs = std::filesystem;
using tk::test_ref::training_setup;

template <class Checkpointer>
using gpu_trainer = tk::trainer<tk::data::mmap_token_source, tk::prefetch::pinned<4>,
                                tk::model::gpt2_cuda, tk::optim::adamw_cuda, Checkpointer>;

struct temp_dir {
  fs::path path =
      fs::temp_directory_path() / ("trainkit-cuda-training-" + std::to_string(::getpid()));
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

tk::trainer_config loop_config(const training_setup& s) {
  tk::trainer_config tc;
  tc.steps = s.steps;
  tc.schedule.kind = tk::optim::schedule_kind::cosine;
  tc.schedule.max_lr = s.lr;
  tc.schedule.warmup_steps = s.warmup;
  tc.schedule.final_lr_frac = 0.1f;
  tc.ckpt_at_end = false;
  tc.output.console.quiet = true;
  return tc;
}

tk::optim::adamw_config optimizer_config(const training_setup& s) {
  tk::optim::adamw_config ac;
  ac.weight_decay = s.weight_decay;
  ac.grad_clip = s.grad_clip;
  return ac;
}

tk::data::mmap_token_source source(const training_setup& s, int vocab) {
  return tk::data::mmap_token_source(
      {s.shard, s.batch, s.seq, vocab, tk::data::order_kind::sequential, 0});
}

std::vector<double> gpu_training_losses(const training_setup& s) {
  const auto cfg = tk::model::gpt2_config::preset(s.preset);
  gpu_trainer<tk::checkpoint::no_checkpoint> t(
      loop_config(s), source(s, cfg.vocab_size), std::nullopt, tk::model::gpt2_cuda(cfg, s.seed),
      optimizer_config(s), tk::checkpoint::no_checkpoint{});
  std::vector<double> losses;
  for (const auto& step : t.run().steps) {
    losses.push_back(step.loss);
    EXPECT_GE(step.h2d_ms, 0.0);
  }
  return losses;
}

// The attention choice is checked before any device work, so these run in CI without a GPU. This
// program does not link the cuDNN engine (support/cudnn_engine.cpp): attention=cudnn must say
// how to get it instead of failing later.
TEST(CudaTraining, AttentionChoiceIsCheckedBeforeTouchingTheDevice) {
  const tk::model::gpt2_config cfg = tk::model::gpt2_config::preset("d2");
  tk::model::gpt2_cuda_options opt;
  opt.attention = tk::model::gpt2_attention::cudnn;
  ASSERT_EQ(tk::model::kernels::cudnn_attention_factory(), nullptr);
  try {
    tk::model::gpt2_cuda model(cfg, 1, opt);
    FAIL() << "attention=cudnn without the engine linked was accepted";
  } catch (const tk::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("model/cuda/cudnn_attention.hpp"), std::string::npos)
        << e.what();
  }
  opt.attention = tk::model::gpt2_attention::flash;  // not bit-reproducible: refused by default
  EXPECT_THROW(tk::model::gpt2_cuda(cfg, 1, opt), tk::config_error);
  opt.recompute = 3;
  opt.attention = tk::model::gpt2_attention::naive;
  EXPECT_THROW(tk::model::gpt2_cuda(cfg, 1, opt), tk::config_error);
}

TEST(CudaTraining, D2TracksTheCpuCompositionFor50Steps) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  temp_dir dir;
  training_setup s;
  s.shard = tk::test_ref::write_corpus_shard(dir.path.string());
  const std::vector<double> gpu = gpu_training_losses(s);
  const std::vector<double> cpu = tk::test_ref::cpu_training_losses(s);
  ASSERT_EQ(gpu.size(), 50u);
  ASSERT_EQ(cpu.size(), 50u);
  double worst = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    const double rel = std::fabs(gpu[i] - cpu[i]) / cpu[i];
    worst = std::max(worst, rel);
    EXPECT_LT(rel, 0.05) << "step " << i + 1 << ": gpu " << gpu[i] << " cpu " << cpu[i];
  }
  std::printf("[ d2 50 steps ] loss gpu %.4f -> %.4f, cpu %.4f -> %.4f, worst step gap %.2f%%\n",
              gpu.front(), gpu.back(), cpu.front(), cpu.back(), 100 * worst);
  EXPECT_LT(gpu.back(), gpu.front() * 0.85) << "training must lower the loss";
}

TEST(CudaTraining, DeterministicModeRepeatsLossesBitForBit) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  temp_dir dir;
  training_setup s;
  s.steps = 20;
  s.shard = tk::test_ref::write_corpus_shard(dir.path.string());
  const std::vector<double> a = gpu_training_losses(s);
  const std::vector<double> b = gpu_training_losses(s);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i], b[i]) << "step " << i + 1 << " differs between two identical runs";
}

TEST(CudaTraining, SyncCheckpointOfDeviceStateResumesExactly) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  temp_dir dir;
  training_setup s;
  s.steps = 12;
  s.shard = tk::test_ref::write_corpus_shard((dir.path / "data").string());
  const auto cfg = tk::model::gpt2_config::preset(s.preset);
  using staged = tk::checkpoint::host_staged_checkpointer<tk::checkpoint::sync_checkpointer>;
  auto make = [&](int steps, bool resume) {
    tk::trainer_config tc = loop_config(s);
    tc.steps = steps;
    tc.resume = resume;
    tc.ckpt_at_end = true;
    return std::make_unique<gpu_trainer<staged>>(
        tc, source(s, cfg.vocab_size), std::nullopt, tk::model::gpt2_cuda(cfg, s.seed),
        optimizer_config(s), staged(tk::checkpoint::sync_checkpointer({dir.path / "ckpt", 0})));
  };
  // Straight through 12 steps, vs 6 steps, a checkpoint, a new process-like trainer resuming to 12.
  // (Same schedule: total_steps is the run's length in both, so the first run uses 12 too.)
  std::vector<double> straight;
  {
    tk::trainer_config tc = loop_config(s);
    gpu_trainer<tk::checkpoint::no_checkpoint> t(tc, source(s, cfg.vocab_size), std::nullopt,
                                                 tk::model::gpt2_cuda(cfg, s.seed),
                                                 optimizer_config(s), {});
    for (const auto& m : t.run().steps) straight.push_back(m.loss);
  }
  {
    auto t = make(12, false);
    t->on_step([](const tk::step_metrics& m) { return m.step < 6; });  // stop (and save) at 6
    const auto r = t->run();
    ASSERT_TRUE(r.stopped);
    ASSERT_EQ(r.last_step, 6u);
  }
  auto t = make(12, true);
  const auto r = t->run();
  ASSERT_TRUE(r.resumed);
  ASSERT_EQ(r.steps.size(), 6u);
  for (std::size_t i = 0; i < 6; ++i)
    EXPECT_EQ(r.steps[i].loss, straight[6 + i]) << "resumed step " << 7 + i;
}

// The whole micro-step as a CUDA graph (gpt2_cuda_options::cuda_graph) through the trainer: two
// micro-steps per step (the first and the last micro-step differ outside the graph: the loss sum
// restarts, the buckets are published between the graph's pieces), pinned prefetcher slots
// rotating under the graph's fixed token buffers, the optimizer and clipping after it. Same
// kernels in the same order, so in deterministic mode every loss equals the eager run's bit for
// bit; a slot copied late, a piece replayed twice or a loss sum not restarted would not.
TEST(CudaTraining, CudaGraphReplayGivesTheEagerLossesBitForBit) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  temp_dir dir;
  training_setup s;
  s.steps = 20;
  s.shard = tk::test_ref::write_corpus_shard(dir.path.string());
  const auto cfg = tk::model::gpt2_config::preset(s.preset);
  tk::trainer_config tc = loop_config(s);
  tc.total_batch_tokens = std::size_t(2) * s.batch * s.seq;  // two micro-steps per step
  auto run = [&](bool graph, int* replays) {
    tk::model::gpt2_cuda_options mo;
    mo.cuda_graph = graph;
    gpu_trainer<tk::checkpoint::no_checkpoint> t(tc, source(s, cfg.vocab_size), std::nullopt,
                                                 tk::model::gpt2_cuda(cfg, s.seed, mo),
                                                 optimizer_config(s), {});
    std::vector<double> losses;
    for (const auto& m : t.run().steps) losses.push_back(m.loss);
    if (replays) *replays = t.model().graph_replays();
    return losses;
  };
  int replays = 0;
  const std::vector<double> eager = run(false, nullptr);
  const std::vector<double> graph = run(true, &replays);
  ASSERT_EQ(graph.size(), eager.size());
  for (std::size_t i = 0; i < eager.size(); ++i) EXPECT_EQ(graph[i], eager[i]) << "step " << i + 1;
  EXPECT_EQ(replays, 2 * s.steps - 1) << "every micro-step but the first replays a graph";
  EXPECT_LT(graph.back(), graph.front());
}

#if defined(TRAINKIT_TEST_NCCL)
static_assert(tk::reduce::gradient_reducer_for<tk::reduce::nccl_allreduce, tk::model::gpt2_cuda>);

// One rank: a sum over one GPU is the identity, so any difference from reduce::single is the
// reducer's ordering (a bucket reduced while backward still writes it, the optimizer running
// before the comm stream) or a bucket it never handed back.
TEST(CudaTraining, NcclReducerOverOneGpuGivesTheSingleProcessLosses) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  temp_dir dir;
  training_setup s;
  s.steps = 20;
  s.shard = tk::test_ref::write_corpus_shard(dir.path.string());
  const auto cfg = tk::model::gpt2_config::preset(s.preset);
  tk::trainer_config tc = loop_config(s);
  tc.total_batch_tokens = std::size_t(2) * s.batch * s.seq;  // two micro-steps per step
  std::vector<double> single;
  {
    gpu_trainer<tk::checkpoint::no_checkpoint> t(tc, source(s, cfg.vocab_size), std::nullopt,
                                                 tk::model::gpt2_cuda(cfg, s.seed),
                                                 optimizer_config(s), {});
    for (const auto& m : t.run().steps) single.push_back(m.loss);
  }
  const auto comm = tk::reduce::nccl_communicator::single();
  EXPECT_EQ(comm.world_size(), 1);
  tk::trainer<tk::data::mmap_token_source, tk::prefetch::pinned<4>, tk::model::gpt2_cuda,
              tk::optim::adamw_cuda, tk::checkpoint::no_checkpoint, tk::reduce::nccl_allreduce>
      t(tc, source(s, cfg.vocab_size), std::nullopt, tk::model::gpt2_cuda(cfg, s.seed),
        optimizer_config(s), tk::checkpoint::no_checkpoint{}, tk::reduce::nccl_allreduce(comm));
  const auto r = t.run();
  ASSERT_EQ(r.steps.size(), single.size());
  for (std::size_t i = 0; i < single.size(); ++i)
    EXPECT_EQ(r.steps[i].loss, single[i]) << "step " << i + 1;
  EXPECT_LT(single.back(), single.front());
}
#endif

}  // namespace
