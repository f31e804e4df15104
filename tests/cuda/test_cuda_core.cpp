// Tests for trainkit/core/cuda and the host side of the CUDA GPT-2: the cuda_error message format,
// device detection, the Eigen-free initialisation (must equal gpt2_cpu's bit for bit) and the
// activation-arena plan against an independent count — these run on any machine — and buffers,
// streams and events (these skip without a CUDA device); the cuBLASLt cache key and autotune pick
// (core/linalg/detail/gemm_tuning.hpp) run anywhere. Compiled by g++: the utilities are
// host-compilable by design.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "gpu_test_env.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/device.hpp"
#include "trainkit/core/cuda/execution_context.hpp"
#include "trainkit/core/cuda/stream.hpp"
#include "trainkit/core/linalg/detail/gemm_tuning.hpp"
#include "trainkit/model/gpt2/cuda_memory.hpp"
#include "trainkit/model/gpt2/init.hpp"
#include "trainkit/model/gpt2/cpu.hpp"

namespace {

TEST(CudaError, MessageNamesFileLineCallAndError) {
  const std::string m = trainkit::cuda::detail::format_failure(
      "/a/b/gpt2_cuda.hpp", 212, "cudaMalloc(&p, n)", "cudaErrorMemoryAllocation", "out of memory");
  EXPECT_EQ(m,
            "gpt2_cuda.hpp:212: cudaMalloc(&p, n) failed: cudaErrorMemoryAllocation (out of "
            "memory)");
}

TEST(CudaError, CheckMacroThrowsCudaErrorDerivedFromTrainkitError) {
  // cudaErrorInvalidValue needs no device: the macro must turn it into an exception.
  try {
    TRAINKIT_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "no exception";
  } catch (const trainkit::error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("test_cuda_core.cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaErrorInvalidValue"), std::string::npos) << what;
    EXPECT_NE(what.find("failed"), std::string::npos) << what;
    const auto* ce = dynamic_cast<const trainkit::cuda_error*>(&e);
    ASSERT_NE(ce, nullptr);
    EXPECT_EQ(ce->code(), int(cudaErrorInvalidValue));
  }
  EXPECT_NO_THROW(TRAINKIT_CUDA_CHECK(cudaSuccess));
}

TEST(CudaError, CublasCheckNamesTheStatus) {
  try {
    TRAINKIT_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED);
    FAIL() << "no exception";
  } catch (const trainkit::cuda_error& e) {
    EXPECT_NE(std::string(e.what()).find("CUBLAS_STATUS_NOT_SUPPORTED"), std::string::npos)
        << e.what();
    EXPECT_EQ(e.code(), int(CUBLAS_STATUS_NOT_SUPPORTED));
  }
}

TEST(CudaDevice, CountNeverThrows) {
  int n = -1;
  EXPECT_NO_THROW(n = trainkit::cuda::device_count());
  EXPECT_GE(n, 0);
  EXPECT_EQ(trainkit::cuda::device_present(), n > 0);
}

TEST(CudaDevice, PropertiesAndPeak) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  const auto p = trainkit::cuda::query_device();
  EXPECT_FALSE(p.name.empty());
  EXPECT_GT(p.sm_count, 0);
  EXPECT_GT(p.total_memory, std::size_t(1) << 30);
  EXPECT_GE(p.major, 9) << "trainkit::cuda builds for sm_90a; running on " << p.name;
  if (p.name.find("H200") != std::string::npos || p.name.find("H100") != std::string::npos) {
    EXPECT_TRUE(trainkit::cuda::device_peak_tflops(p).has_value());
  }
  const auto m = trainkit::cuda::device_memory_info();
  EXPECT_GT(m.free, 0u);
  EXPECT_LE(m.free, m.total);
}

TEST(CudaBuffer, RoundTripThroughPinnedAndDevice) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  trainkit::cuda::stream s;
  constexpr std::size_t n = 12345;  // odd: no accidental alignment to a vector width
  trainkit::cuda::pinned_buffer<std::int32_t> host(n), back(n);
  std::iota(host.data(), host.data() + n, 7);
  std::fill(back.data(), back.data() + n, -1);
  trainkit::cuda::device_buffer<std::int32_t> dev(n);
  dev.fill_bytes_async(0xff, s);
  trainkit::cuda::copy_to_device_async(dev, std::span<const std::int32_t>(host.span()), s);
  trainkit::cuda::copy_to_host_async(back.span(), dev, s);
  s.synchronize();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], std::int32_t(7 + i)) << i;

  trainkit::cuda::device_buffer<std::int32_t> moved = std::move(dev);
  EXPECT_EQ(dev.data(), nullptr);
  EXPECT_EQ(moved.size(), n);
  std::vector<std::int32_t> small(n - 1);
  EXPECT_THROW(trainkit::cuda::copy_to_host_async(std::span<std::int32_t>(small), moved, s),
               trainkit::config_error);
}

TEST(CudaStream, EventsMeasureElapsedTime) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  trainkit::cuda::stream s;
  trainkit::cuda::event a, b;
  trainkit::cuda::device_buffer<float> big(std::size_t(1) << 26);  // 256 MiB: measurable
  a.record(s);
  big.fill_bytes_async(0, s);
  b.record(s);
  const float ms = trainkit::cuda::elapsed_ms(a, b);
  EXPECT_GT(ms, 0.0f);
  EXPECT_TRUE(b.ready());
}

// Device phases: the stream time between a phase's two events, including a wait the host never
// sees (here a host function holding the stream for 50 ms, as a reduction on another stream would).
TEST(CudaExecutionContext, TimesDevicePhasesOnTheStream) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  trainkit::cuda::execution_context ctx;
  static_assert(trainkit::times_device_phases<trainkit::cuda::execution_context>);
  for (int step = 0; step < 2; ++step) {  // the event pool is reused by the second step
    ctx.begin_phase(trainkit::device_phase::comm);
    TRAINKIT_CUDA_CHECK(cudaLaunchHostFunc(
        ctx.stream(),
        [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }, nullptr));
    ctx.end_phase(trainkit::device_phase::comm);
    ctx.begin_phase(trainkit::device_phase::optimizer);
    ctx.end_phase(trainkit::device_phase::optimizer);
    ctx.synchronize();
    const trainkit::device_phase_times t = ctx.device_phase_ms();
    EXPECT_GE(t[std::size_t(trainkit::device_phase::comm)], 45.0) << "step " << step;
    EXPECT_LT(t[std::size_t(trainkit::device_phase::optimizer)], 5.0) << "step " << step;
    EXPECT_EQ(t[std::size_t(trainkit::device_phase::ckpt_stall)], 0.0);
  }
  EXPECT_EQ(ctx.device_phase_ms(), trainkit::device_phase_times{}) << "read once per step";
  ctx.begin_phase(trainkit::device_phase::comm);
  EXPECT_THROW(ctx.begin_phase(trainkit::device_phase::h2d), trainkit::config_error);
  EXPECT_THROW(ctx.end_phase(trainkit::device_phase::h2d), trainkit::config_error);
  ctx.end_phase(trainkit::device_phase::comm);
}

// ---- host side of the cuBLASLt GEMM cache and autotuner ----------------------------------------

TEST(GemmTuning, AlignmentIsTheLowestSetBitOfAddressAndStrideUpTo256) {
  namespace d = trainkit::linalg::detail;
  EXPECT_EQ(d::alignment_of(std::uintptr_t(0x10000)), 256);
  EXPECT_EQ(d::alignment_of(std::uintptr_t(0x10080)), 128);
  EXPECT_EQ(d::alignment_of(std::uintptr_t(0x10002)), 2);
  EXPECT_EQ(d::alignment_of(std::uintptr_t(0x10000), 2 * 67), 2);  // an odd T's bf16 stride
  EXPECT_EQ(d::alignment_of(nullptr), 256);
}

// The fused GELU epilogue has a bias and an aux matrix: an algorithm chosen for one pair of
// alignments must not be reused for another (d48's biases are 128-byte aligned, d12's 256).
TEST(GemmTuning, CacheKeyKeepsTheBiasAndAuxAlignmentsApart) {
  namespace d = trainkit::linalg::detail;
  const auto at = [](std::uintptr_t a) { return reinterpret_cast<const void*>(a); };
  const auto k256_128 = d::epilogue_alignments(at(0x10000), at(0x20080));
  const auto k128_256 = d::epilogue_alignments(at(0x10080), at(0x20000));
  const auto k128_64 = d::epilogue_alignments(at(0x10080), at(0x20040));
  EXPECT_NE(k256_128, k128_256);
  EXPECT_NE(k256_128, k128_64);
  EXPECT_NE(k128_256, k128_64);
  EXPECT_EQ(k256_128, (std::array<std::int64_t, 2>{256, 128}));
  EXPECT_EQ(d::epilogue_alignments(at(0x10080), nullptr), (std::array<std::int64_t, 2>{128, 256}));
}

TEST(GemmTuning, PickSkipsFailedCandidatesAndTimesTheFirstThatRan) {
  namespace d = trainkit::linalg::detail;
  const std::vector<float> all_ran{0.5f, 0.3f, 0.4f, 0.3f};
  auto p = d::pick_fastest(all_ran);
  EXPECT_EQ(p.chosen, 1);  // the first of two equal times: the heuristic's order breaks ties
  EXPECT_EQ(p.first_ran, 0);
  EXPECT_FLOAT_EQ(p.first_ms, 0.5);
  EXPECT_FLOAT_EQ(p.best_ms, 0.3);
  // The heuristic's first choice failed: its reference is the first that ran, never 0 ms.
  const std::vector<float> first_failed{-1.0f, 0.7f, 0.9f, 0.6f};
  p = d::pick_fastest(first_failed);
  EXPECT_EQ(p.first_ran, 1);
  EXPECT_FLOAT_EQ(p.first_ms, 0.7);
  EXPECT_EQ(p.chosen, 3);
  EXPECT_FLOAT_EQ(p.best_ms, 0.6);
  const std::vector<float> none_ran{-1.0f, -1.0f};
  p = d::pick_fastest(none_ran);
  EXPECT_EQ(p.chosen, -1);
  EXPECT_EQ(p.first_ran, -1);
}

// ---- host side of the CUDA GPT-2 -------------------------------------------------------------

// gpt2_cuda(cfg, seed) starts from detail::gpt2_initial_parameters<float>: the CPU model's weights.
TEST(Gpt2CudaHost, InitialParametersEqualGpt2Cpu) {
  for (const char* preset : {"d2", "d6"}) {
    const auto cfg = trainkit::model::gpt2_config::preset(preset);
    const std::vector<float> mine =
        trainkit::model::detail::gpt2_initial_parameters<float>(cfg, 1234);
    trainkit::model::gpt2_cpu cpu(cfg, 1234);
    ASSERT_EQ(mine.size(), cpu.parameters().size());
    for (std::size_t i = 0; i < mine.size(); ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(mine[i]),
                std::bit_cast<std::uint32_t>(cpu.parameters()[i]))
          << preset << " parameter " << i;
  }
}

// Activation bytes counted from the model's description (docs/cuda.md), not from the plan code.
std::size_t independent_activation_bytes(const trainkit::model::gpt2_config& c, std::size_t B,
                                         std::size_t T, int recompute) {
  const std::size_t L = c.num_layers, C = c.channels, H = c.num_heads, N = B * T,
                    Vp = c.padded_vocab_size, ld = (T + 7) / 8 * 8;
  const std::size_t ln = recompute >= 2 ? 1 : L, gl = recompute >= 1 ? 1 : L;
  std::size_t bf16 = N * C                             // encoded
                     + 2 * ln * N * C                  // ln1, ln2
                     + L * 3 * N * C                   // qkvr
                     + L * B * H * T * ld              // att
                     + 3 * L * N * C                   // atty, res2, res3
                     + L * 4 * N * C + gl * 4 * N * C  // fch, fch_gelu
                     + N * C + N * Vp;                 // lnf, logits
  std::size_t f32 = 4 * L * N + 2 * N + (N + 4);       // LN stats, lnf stats, losses + flags
  return 2 * bf16 + 4 * f32;
}

TEST(Gpt2CudaHost, ArenaPlanMatchesAnIndependentCount) {
  struct shape {
    const char* preset;
    int B, T, recompute;
  };
  for (const shape s : {shape{"d12", 16, 1024, 0}, shape{"d12", 3, 67, 1}, shape{"d48", 8, 1024, 2},
                        shape{"d48", 4, 1024, 0}, shape{"d2", 1, 1, 0}}) {
    const auto cfg = trainkit::model::gpt2_config::preset(s.preset);
    const auto plan = trainkit::model::plan_gpt2_cuda_arena(cfg, s.B, s.T, s.recompute);
    const std::size_t expected = independent_activation_bytes(cfg, s.B, s.T, s.recompute);
    constexpr std::size_t slots = 19, pad = trainkit::model::gpt2_cuda_arena_plan::alignment;
    EXPECT_GE(plan.activation_bytes, expected) << s.preset;
    EXPECT_LT(plan.activation_bytes, expected + slots * pad) << s.preset;
    // Slots are aligned and do not overlap.
    const trainkit::model::arena_slot all[] = {
        plan.encoded,   plan.ln1,    plan.ln1_mean, plan.ln1_rstd, plan.qkvr,     plan.att,
        plan.atty,      plan.res2,   plan.ln2,      plan.ln2_mean, plan.ln2_rstd, plan.fch,
        plan.fch_gelu,  plan.res3,   plan.lnf,      plan.lnf_mean, plan.lnf_rstd, plan.logits,
        plan.losses,    plan.qkv,    plan.proj,     plan.scores,   plan.dscores,  plan.heads,
        plan.dqkvr,     plan.dres,   plan.dln,      plan.datty,    plan.dfch,     plan.ln_partial,
        plan.bias_grad, plan.buckets};  // attention_workspace: 0 bytes here (cuDNN only)
    std::size_t end = 0;
    for (const auto& a : all) {
      EXPECT_EQ(a.offset % pad, 0u);
      EXPECT_GE(a.offset, end);
      EXPECT_GT(a.bytes, 0u);
      end = a.offset + a.bytes;
    }
    EXPECT_LE(end, plan.total_bytes);
    EXPECT_EQ(plan.total_bytes, plan.activation_bytes + plan.scratch_bytes);
  }
}

TEST(Gpt2CudaHost, RecomputeSavesWhatItShould) {
  const auto cfg = trainkit::model::gpt2_config::preset("d48");
  const std::size_t L = 48, C = 1600, N = 8 * 1024;
  const auto r0 = trainkit::model::plan_gpt2_cuda_arena(cfg, 8, 1024, 0);
  const auto r1 = trainkit::model::plan_gpt2_cuda_arena(cfg, 8, 1024, 1);
  const auto r2 = trainkit::model::plan_gpt2_cuda_arena(cfg, 8, 1024, 2);
  EXPECT_EQ(r0.activation_bytes - r1.activation_bytes, (L - 1) * N * 4 * C * 2);
  EXPECT_EQ(r1.activation_bytes - r2.activation_bytes, 2 * (L - 1) * N * C * 2);
  EXPECT_EQ(r0.scratch_bytes, r2.scratch_bytes);
}

TEST(Gpt2CudaHost, FlashAndCudnnAttentionKeepNoTxTMatrix) {
  using trainkit::model::gpt2_attention;
  for (const char* preset : {"d12", "d48"}) {
    const auto cfg = trainkit::model::gpt2_config::preset(preset);
    const std::size_t L = cfg.num_layers, C = cfg.channels, H = cfg.num_heads, B = 16, T = 1024,
                      N = B * T;
    const auto naive = trainkit::model::plan_gpt2_cuda_arena(cfg, 16, 1024, 0);
    const auto flash =
        trainkit::model::plan_gpt2_cuda_arena(cfg, 16, 1024, 0, gpt2_attention::flash);
    const auto cudnn =
        trainkit::model::plan_gpt2_cuda_arena(cfg, 16, 1024, 0, gpt2_attention::cudnn);
    EXPECT_EQ(flash.att.bytes, 0u);
    EXPECT_EQ(flash.scores.bytes + flash.dscores.bytes + flash.heads.bytes + flash.dqkvr.bytes, 0u);
    EXPECT_EQ(flash.lse.bytes, L * B * H * T * 4);
    EXPECT_EQ(flash.dq_accum.bytes, N * C * 4);
    EXPECT_EQ(cudnn.dq_accum.bytes + cudnn.att_delta.bytes, 0u);  // cuDNN has its own workspace
    // Kept: L bf16 (B, H, T, T) matrices become L fp32 (B, H, T) rows (T is a multiple of 8).
    EXPECT_EQ(naive.activation_bytes - flash.activation_bytes, L * B * H * T * (T * 2 - 4));
    EXPECT_LT(flash.scratch_bytes, naive.scratch_bytes);
    EXPECT_LE(cudnn.total_bytes, flash.total_bytes);
    std::printf("%s B=16 T=1024: naive arena %.2f GiB, flash %.2f GiB, cudnn %.2f GiB\n", preset,
                double(naive.total_bytes) / double(1 << 30),
                double(flash.total_bytes) / double(1 << 30),
                double(cudnn.total_bytes) / double(1 << 30));
  }
}

TEST(Gpt2CudaHost, MemoryReport) {
  const auto cfg = trainkit::model::gpt2_config::preset("d12");
  const auto r = trainkit::model::gpt2_cuda_memory(cfg, 16, 1024, 0);
  EXPECT_EQ(r.parameters, cfg.num_parameters() * 2);
  EXPECT_EQ(r.gradients, r.parameters);
  EXPECT_EQ(r.optimizer, cfg.num_parameters() * 12);
  EXPECT_GE(r.workspace, trainkit::model::gpt2_cuda_cublas_workspace_bytes);
  EXPECT_EQ(r.total(), r.parameters + r.gradients + r.optimizer + r.activations + r.workspace);
  // d12 at B=16, T=1024 with everything kept: llm.c needs ~10 GiB of activations; ours keeps
  // fp32-free bf16 activations plus bf16 attention matrices, so it must stay in that range.
  EXPECT_GT(r.activations, std::size_t(8) << 30);
  EXPECT_LT(r.activations, std::size_t(20) << 30);
  const std::string text = r.to_string();
  char want[96];  // 124,475,904 parameters (padded vocabulary): 2 B, 2 B and 12 B each
  std::snprintf(want, sizeof want, "parameters 237.4 MiB, gradients 237.4 MiB, optimizer %.1f MiB",
                double(cfg.num_parameters()) * 12 / double(1 << 20));
  EXPECT_NE(text.find(want), std::string::npos) << text;
  EXPECT_NE(text.find("workspace"), std::string::npos) << text;
  EXPECT_NE(text.find("total"), std::string::npos) << text;
  EXPECT_THROW(trainkit::model::gpt2_cuda_memory(cfg, 1, 2048, 0), trainkit::config_error);
  EXPECT_THROW(trainkit::model::gpt2_cuda_memory(cfg, 1, 64, 3), trainkit::config_error);
}

// cuDNN's attention workspace is a slot of the arena (scratch), so the memory report counts it:
// the deterministic backward's dP (B·H·T·T bf16: ~805 MB at d12 B=32 T=1024) against the fast
// one's fp32 dQ accumulator.
TEST(Gpt2CudaHost, CudnnAttentionWorkspaceIsPlannedInTheArena) {
  using trainkit::model::gpt2_attention;
  const auto cfg = trainkit::model::gpt2_config::preset("d12");
  const std::size_t det = trainkit::model::cudnn_attention_workspace_estimate(cfg, 32, 1024, true);
  const std::size_t fast =
      trainkit::model::cudnn_attention_workspace_estimate(cfg, 32, 1024, false);
  EXPECT_EQ(det, std::size_t(32) * 12 * 1024 * 1024 * 2);
  EXPECT_LT(fast * 4, det) << "the fast backward needs far less";
  const auto without = trainkit::model::plan_gpt2_cuda_arena(cfg, 32, 1024, 0, gpt2_attention::cudnn);
  const auto with =
      trainkit::model::plan_gpt2_cuda_arena(cfg, 32, 1024, 0, gpt2_attention::cudnn, det);
  EXPECT_EQ(without.attention_workspace.bytes, 0u);
  EXPECT_EQ(with.attention_workspace.bytes, det);
  EXPECT_EQ(with.attention_workspace.offset % with.alignment, 0u);
  EXPECT_GE(with.attention_workspace.offset, with.activation_bytes) << "scratch, not activations";
  EXPECT_LE(with.attention_workspace.offset + det, with.total_bytes);
  EXPECT_GE(with.total_bytes, without.total_bytes + det);
  EXPECT_EQ(with.activation_bytes, without.activation_bytes);
  const auto r0 = trainkit::model::gpt2_cuda_memory(cfg, 32, 1024, 0, gpt2_attention::cudnn);
  const auto r1 = trainkit::model::gpt2_cuda_memory(cfg, 32, 1024, 0, gpt2_attention::cudnn, det);
  EXPECT_GE(r1.workspace, r0.workspace + det);
}

// The run trainkit exists for: GPT-2 XL (d48) at B=16, T=1024 with nothing recomputed fits one
// H200 (about 139 GiB usable) with flash or cuDNN attention, with room for the CUDA context and
// cuDNN's workspace; with the naive attention's T×T matrices it would not leave that room.
TEST(Gpt2CudaHost, D48AtB16FitsAnH200WithoutRecomputation) {
  using trainkit::model::gpt2_attention;
  const auto cfg = trainkit::model::gpt2_config::preset("d48");
  constexpr double gib = double(1 << 30);
  for (const auto attention : {gpt2_attention::flash, gpt2_attention::cudnn}) {
    // cuDNN's deterministic backward keeps dP in its workspace: 16·25·1024²·2 bytes, in the plan.
    const std::size_t ws =
        attention == gpt2_attention::cudnn
            ? trainkit::model::cudnn_attention_workspace_estimate(cfg, 16, 1024, true)
            : 0;
    const auto r = trainkit::model::gpt2_cuda_memory(cfg, 16, 1024, 0, attention, ws);
    std::printf("d48 B=16 T=1024 recompute 0: %s\n", r.to_string().c_str());
    EXPECT_LT(double(r.total()) / gib, 120.0) << r.to_string();
  }
  const auto naive = trainkit::model::gpt2_cuda_memory(cfg, 16, 1024, 0, gpt2_attention::naive);
  EXPECT_GT(double(naive.total()) / gib, 100.0) << naive.to_string();
}

}  // namespace
