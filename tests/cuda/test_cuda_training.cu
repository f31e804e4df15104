// End-to-end GPU training: trainer<mmap_token_source, pinned<4>, gpt2_cuda, adamw_cuda,
// no_checkpoint> for 50 steps of d2 on the embedded corpus (real GPT-2 tokens of
// Python documentation), against the CPU composition (training_reference.cpp, g++) from the same
// bf16-rounded weights on the same batches. bf16 activations and gradients move the loss a little
// each step, so the curves are compared within 5% per step (a wrong optimizer, prefetcher or
// gradient sends them apart within a few steps) and the GPU loss must fall by 15%. In
// deterministic mode two runs give bit-identical losses. Also: sync checkpoint through
// host_staged_checkpointer, resumed run continues with the same losses. With NCCL: the NCCL
// reducer over a world of one GPU gives the single-process losses bit for bit (its buckets are
// published, reduced on its own stream and ordered back); ZeRO-1 over NCCL (nccl_zero1 +
// zero1_adamw_cuda) over a world of one GPU tracks the single-process losses and norms to 1e-4,
// holds 12 bytes of optimizer state per parameter of its shard, refuses another rank's restored
// shard, and its sharded sync checkpoint resumes bit for bit (and resumes adamw_cuda). The
// micro-step replayed as a CUDA graph gives the eager losses bit for bit. Skips without a device.
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
#include "trainkit/model/gpt2/cuda.hpp"
#include "trainkit/optim/adamw_cuda.hpp"
#include "trainkit/prefetch/pinned_prefetcher.hpp"
#include "trainkit/trainer/trainer.hpp"
#if defined(TRAINKIT_TEST_NCCL)
#include "trainkit/checkpoint/asio_checkpointer.hpp"
#include "trainkit/checkpoint/cuda_stager.hpp"
#include "trainkit/core/cuda/device.hpp"
#include "trainkit/optim/zero1_adamw_cuda.hpp"
#include "trainkit/reduce/nccl_allreduce.hpp"
#include "trainkit/reduce/nccl_zero1.hpp"
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
  tc.grad_clip = s.grad_clip;
  return tc;
}

tk::optim::adamw_config optimizer_config(const training_setup& s) {
  tk::optim::adamw_config ac;
  ac.weight_decay = s.weight_decay;
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
// program does not link the cuDNN engine (trainkit_cudnn_engine): attention=cudnn must say
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
  const auto comm = tk::comm::nccl_communicator::single();
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

// ---- ZeRO-1 over NCCL ----

namespace ck = tk::checkpoint;
using staged_sync = ck::host_staged_checkpointer<ck::sync_checkpointer>;
using cuda_async = ck::basic_asio_checkpointer<ck::cuda_stager>;
static_assert(tk::reduce::gradient_reducer_for<tk::reduce::nccl_zero1, tk::model::gpt2_cuda>);
static_assert(tk::reduce::nccl_zero1::delivered_gradients == tk::gradient_layout::reduce_scattered);
static_assert(tk::optim::zero1_adamw_cuda::expected_gradients ==
              tk::gradient_layout::reduce_scattered);
static_assert(tk::reduce::rank_aware<tk::reduce::nccl_zero1>);
static_assert(ck::save_communicator<tk::reduce::nccl_zero1>);
static_assert(tk::optim::optimizer_for<tk::optim::zero1_adamw_cuda, tk::model::gpt2_cuda>);
static_assert(ck::sharded_optimizer<tk::optim::zero1_adamw_cuda>);
static_assert(!ck::sharded_optimizer<tk::optim::adamw_cuda>);
// The DDP reducer leaves every rank the whole summed gradient, which adamw_cuda reads: its
// clipping step is the plain norm over the buckets.
static_assert(tk::reduce::gradient_reducer_for<tk::reduce::nccl_allreduce, tk::model::gpt2_cuda>);
static_assert(tk::reduce::nccl_allreduce::delivered_gradients == tk::gradient_layout::replicated);
static_assert(tk::optim::adamw_cuda::expected_gradients == tk::gradient_layout::replicated);
// Sharded checkpoints of device state: sync through the host stage; never the async writer, whose
// thread cannot join the ranks' collectives (a trainer composing it does not compile).
static_assert(ck::sharded_checkpointer<staged_sync, tk::reduce::nccl_zero1>);
static_assert(!ck::sharded_checkpointer<cuda_async, tk::reduce::nccl_zero1>);
static_assert(!ck::checkpointer_for_optimizer<cuda_async, tk::optim::zero1_adamw_cuda,
                                              tk::reduce::nccl_zero1>);
static_assert(ck::checkpointer_for_optimizer<ck::no_checkpoint, tk::optim::zero1_adamw_cuda,
                                             tk::reduce::nccl_zero1>);

template <class Checkpointer>
using zero1_trainer =
    tk::trainer<tk::data::mmap_token_source, tk::prefetch::pinned<4>, tk::model::gpt2_cuda,
                tk::optim::zero1_adamw_cuda, Checkpointer, tk::reduce::nccl_zero1>;

// One rank: the reduction is the identity, the shard is the whole buffer and the update is
// adamw_cuda's kernel over it. What may differ from the single-GPU composition is the norm's
// summation order (the chunk grid's fixed tree against CUB's), hence the clip factor's last bit
// on the steps where clipping acts: losses and norms within 1e-4 relative. An ordering error (a
// bucket reduced before backward wrote it, the update before the norm, the all-gather before the
// update) or a shard offset off by anything moves them by far more.
TEST(CudaTraining, NcclZero1OverOneGpuTracksTheSingleProcessLosses) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  temp_dir dir;
  training_setup s;
  s.steps = 20;
  s.shard = tk::test_ref::write_corpus_shard(dir.path.string());
  const auto cfg = tk::model::gpt2_config::preset(s.preset);
  tk::trainer_config tc = loop_config(s);
  tc.total_batch_tokens = std::size_t(2) * s.batch * s.seq;  // two micro-steps per step
  std::vector<tk::step_metrics> single;
  {
    gpu_trainer<tk::checkpoint::no_checkpoint> t(tc, source(s, cfg.vocab_size), std::nullopt,
                                                 tk::model::gpt2_cuda(cfg, s.seed),
                                                 optimizer_config(s), {});
    single = t.run().steps;
  }
  const auto comm = tk::comm::nccl_communicator::single();
  zero1_trainer<tk::checkpoint::no_checkpoint> t(
      tc, source(s, cfg.vocab_size), std::nullopt, tk::model::gpt2_cuda(cfg, s.seed),
      tk::optim::zero1_adamw_cuda_config(optimizer_config(s), comm),
      tk::checkpoint::no_checkpoint{}, tk::reduce::nccl_zero1(comm));
  const auto r = t.run();
  ASSERT_EQ(r.steps.size(), single.size());
  int identical = 0, clipped = 0;
  for (std::size_t i = 0; i < single.size(); ++i) {
    const double loss = r.steps[i].loss, ref = single[i].loss;
    EXPECT_LT(std::fabs(loss - ref), 1e-4 * ref) << "step " << i + 1;
    EXPECT_LT(std::fabs(r.steps[i].grad_norm - single[i].grad_norm), 1e-4 * single[i].grad_norm)
        << "step " << i + 1;
    identical += loss == ref;
    clipped += single[i].grad_norm > s.grad_clip;
  }
  std::printf(
      "[ zero1 x 1 GPU ] %d of %zu steps' losses bit-identical to adamw_cuda (%d clipped)\n",
      identical, single.size(), clipped);
  EXPECT_GT(clipped, 0) << "the test must exercise the sharded clipping factor";
  EXPECT_LT(r.steps.back().loss, r.steps.front().loss);
  // One rank's shard is the whole buffer: 12 bytes of state per parameter, as adamw_cuda.
  const std::size_t n = t.model().num_parameters();
  EXPECT_EQ(t.optimizer().shard(), (tk::model::gradient_range{0, n}));
  EXPECT_EQ(t.optimizer().state_bytes(), 12 * n);
  EXPECT_EQ(t.reducer().shard(), t.optimizer().shard());
  // The reducer: nothing beside its scalars (in-place reductions; the norm's partials, one double
  // per chunk, are the trainer's clipping step's), within the old bound of two doubles per chunk.
  const std::size_t chunks =
      (n + tk::optim::norm_chunk_elements - 1) / tk::optim::norm_chunk_elements;
  EXPECT_LE(t.reducer().buffer_bytes(), 2 * 8 * chunks + 64);
}

// The optimizer's device memory per rank is its shard's 12 bytes per element: measured by the
// driver's free memory around its construction (cudaMalloc rounds to 2 MiB pages). A first
// optimizer, destroyed, loads the kernels beforehand (lazy module loading takes device memory).
TEST(CudaTraining, NcclZero1OptimizerHoldsTwelveBytesPerShardElement) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  const auto cfg = tk::model::gpt2_config::preset("d2");
  tk::model::gpt2_cuda model(cfg, 3);
  const auto comm = tk::comm::nccl_communicator::single();
  { tk::optim::zero1_adamw_cuda warm_up(model, tk::optim::zero1_adamw_cuda_config({}, comm)); }
  TRAINKIT_CUDA_CHECK(cudaDeviceSynchronize());
  const std::size_t before = tk::cuda::device_memory_info().free;
  tk::optim::zero1_adamw_cuda opt(model, tk::optim::zero1_adamw_cuda_config({}, comm));
  TRAINKIT_CUDA_CHECK(cudaDeviceSynchronize());
  const std::size_t after = tk::cuda::device_memory_info().free;
  const std::size_t expected = 12 * opt.shard().count;
  EXPECT_EQ(opt.state_bytes(), expected);
  EXPECT_GE(before - after, expected);
  EXPECT_LE(before - after, expected + 3 * (std::size_t(2) << 20));
  std::printf("[ zero1 memory ] d2: %.1f MiB of optimizer state on 1 of 1 ranks\n",
              double(before - after) / (1 << 20));
}

// MpiZero1.ARestoredShardOfAnotherRankIsRefused on the GPU: a descriptor naming another rank
// (restored from a plain checkpoint of another rank) makes the next update throw, naming both.
TEST(CudaTraining, NcclZero1RestoredShardOfAnotherRankIsRefused) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  tk::model::gpt2_cuda model(tk::model::gpt2_config::preset("d2"), 3);
  model.zero_grad();
  const auto comm = tk::comm::nccl_communicator::single();
  tk::optim::zero1_adamw_cuda opt(model, tk::optim::zero1_adamw_cuda_config({}, comm));
  tk::cuda::execution_context ctx;
  tk::cuda::device_buffer<float> norm_and_factor(2);
  const float unclipped[2] = {0.0f, 1.0f};
  tk::cuda::copy_to_device(norm_and_factor.data(), std::span<const float>(unclipped), ctx.stream());
  opt.update(model, 1e-3f, {norm_and_factor.data()}, ctx);  // its own shard: fine
  ctx.synchronize();
  for (auto& st : opt.state()) {
    if (st.name != "optim.zero1.shard") continue;
    ASSERT_EQ(st.shape, std::vector<std::int64_t>{4});
    reinterpret_cast<std::uint64_t*>(st.data)[1] = std::uint64_t(opt.world_size());  // no rank
  }
  try {
    opt.update(model, 1e-3f, {norm_and_factor.data()}, ctx);
    FAIL() << "another rank's shard was accepted";
  } catch (const tk::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 of 1's shard"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tk::optim::zero1_adamw_cuda(model, tk::optim::zero1_adamw_cuda_config{}),
               tk::config_error)
      << "no communicator";
}

// A sharded checkpoint of device state (host_staged_checkpointer<sync_checkpointer>): 6 steps,
// saved, a new trainer resumes to 12 with the straight run's losses bit for bit; adamw_cuda
// resumes the same checkpoint (its shards reassembled into optim.master/m/v) to 1e-4.
TEST(CudaTraining, NcclZero1SyncCheckpointResumesExactly) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  temp_dir dir;
  training_setup s;
  s.steps = 12;
  s.shard = tk::test_ref::write_corpus_shard((dir.path / "data").string());
  const auto cfg = tk::model::gpt2_config::preset(s.preset);
  const auto comm = tk::comm::nccl_communicator::single();
  const fs::path ckpt = dir.path / "ckpt";
  auto make = [&](bool resume) {
    tk::trainer_config tc = loop_config(s);
    tc.resume = resume;
    tc.ckpt_at_end = true;
    return std::make_unique<zero1_trainer<staged_sync>>(
        tc, source(s, cfg.vocab_size), std::nullopt, tk::model::gpt2_cuda(cfg, s.seed),
        tk::optim::zero1_adamw_cuda_config(optimizer_config(s), comm),
        staged_sync(ck::sync_checkpointer({ckpt, 0})), tk::reduce::nccl_zero1(comm));
  };
  std::vector<double> straight;
  {
    zero1_trainer<tk::checkpoint::no_checkpoint> t(
        loop_config(s), source(s, cfg.vocab_size), std::nullopt, tk::model::gpt2_cuda(cfg, s.seed),
        tk::optim::zero1_adamw_cuda_config(optimizer_config(s), comm), {},
        tk::reduce::nccl_zero1(comm));
    for (const auto& m : t.run().steps) straight.push_back(m.loss);
  }
  {
    auto t = make(false);
    t->on_step([](const tk::step_metrics& m) { return m.step < 6; });  // stop (and save) at 6
    const auto r = t->run();
    ASSERT_TRUE(r.stopped);
    ASSERT_EQ(r.last_step, 6u);
  }
  ASSERT_TRUE(fs::exists(ckpt / "step_00000006" / "shard_00000"))
      << "a sharded checkpoint has one folder per rank";
  {
    auto t = make(true);
    const auto r = t->run();
    ASSERT_TRUE(r.resumed);
    ASSERT_EQ(r.steps.size(), 6u);
    for (std::size_t i = 0; i < 6; ++i)
      EXPECT_EQ(r.steps[i].loss, straight[6 + i]) << "resumed step " << 7 + i;
  }
  // adamw_cuda (one GPU, no ZeRO) resumes the step-6 checkpoint, its shards reassembled (the
  // resumed run above saved step 12 at its end: removed, so step 6 is the newest).
  fs::remove_all(ckpt / "step_00000012");
  tk::trainer_config tc = loop_config(s);
  tc.resume = true;
  gpu_trainer<staged_sync> plain(tc, source(s, cfg.vocab_size), std::nullopt,
                                 tk::model::gpt2_cuda(cfg, s.seed), optimizer_config(s),
                                 staged_sync(ck::sync_checkpointer({ckpt, 0})));
  const auto r = plain.run();
  ASSERT_TRUE(r.resumed);
  ASSERT_EQ(r.steps.size(), 6u);
  for (std::size_t i = 0; i < 6; ++i)
    EXPECT_LT(std::fabs(r.steps[i].loss - straight[6 + i]), 1e-4 * straight[6 + i])
        << "adamw_cuda resuming ZeRO-1's step 6, step " << 7 + i;
}
#endif

}  // namespace
