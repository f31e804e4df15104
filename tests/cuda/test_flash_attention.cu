// GPU tests of trainkit's flash attention (model/cuda/flash_attention.cuh) against the naive CPU
// attention (out, dq, dk, dv), the CPU twin of its tiling (the saved log-sum-exp) and the
// lane-level CPU emulations of the forward and backward kernels (flash_mma_port.hpp,
// flash_mma_backward_port.hpp: the same MMA fragments, roundings and online softmax, so the
// kernels must match them to a flipped bf16 rounding here and there, mma_port_rounding_distance,
// and the lse to fp32 ulps): head sizes 64 and 128, T on and
// off the 64-row tile (1000, 67, 17) and at the training shape (head size 64, T = 1024), outputs
// poisoned first. Tolerances are sized to the kernels' real error: a CPU port of their
// arithmetic with their bf16 roundings (flash_port.hpp) gives the error they should have against
// the naive attention, and the kernels must come within 1.5× of it (a rounding flip here and there
// from another fp32 summation order) and close to the port itself. Without a GPU: the port shows
// that a slip of the kernel (the last query tile's diagonal block skipped) would exceed that
// tolerance, where the former fixed 2e-2 let it pass at T = 1000. Grouped-query attention (KV < H):
// the naive reference runs on the qkv with its k, v heads repeated per query head and its dk, dv
// are summed back over each group (gqa_expand.hpp), the port and the emulation take KV too.
#include "trainkit/model/cuda/flash_attention.cuh"  // first: compiles on its own

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>

#include "flash_mma_backward_port.hpp"
#include "flash_mma_port.hpp"
#include "flash_port.hpp"
#include "gpu_test_support.cuh"
#include "gqa_expand.hpp"
#include "reference.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/model/detail/flash_attention_reference.hpp"
#include "window_reference.hpp"

namespace k = trainkit::model::kernels;
namespace ref = trainkit::test_ref;
using namespace trainkit::test_gpu;

namespace {

// The lse is fp32 from fp32 scores: only summation order separates kernel and twin.
constexpr double tol_lse = 1e-3;

/// The tolerance of a kernel output whose port (same roundings) is `port_error` off the naive
/// attention: another fp32 summation order flips a bf16 rounding here and there, no more.
double sized_tolerance(double port_error) {
  return 1.5 * port_error + 2e-4;
}

struct port_errors {
  fvec out, lse, dqkv;  // the port's results
  double out_error = 0;
  double d_error[3] = {};  // dq, dk, dv against the naive backward
};

/// Inputs of one case: bf16 values; spread 1.5 gives peaked rows, so the running maximum moves
/// between key tiles. KV 0: as many key/value heads as query heads (GPT-2).
struct attention_case {
  int B, T, C, H, KV;
  fvec qkv, dout, exp_out, exp_att, exp_dqkv;
  attention_case(int b, int t, int c, int h, std::uint64_t seed, int kv = 0)
      : B(b), T(t), C(c), H(h), KV(kv ? kv : h) {
    std::mt19937_64 rng(seed);
    const std::size_t n = std::size_t(B) * T * C;
    qkv = random_bf16(std::size_t(B) * T * row(), rng, 1.5f);
    dout = random_bf16(n, rng);
    const fvec mha = expand_gqa(qkv, B * T, H, KV, C / H);  // itself when KV = H
    fvec dmha;
    ref::attention_forward(exp_out, exp_att, mha, B, T, C, H);
    ref::attention_backward(dmha, dout, mha, exp_att, B, T, C, H);
    exp_dqkv = fold_gqa_gradient(dmha, B * T, H, KV, C / H);
  }
  int row() const { return C + 2 * KV * (C / H); }
  fvec part(const fvec& dqkv, int p) const { return part_of_gqa(dqkv, B * T, H, KV, C / H, p); }
};

port_errors run_port(const attention_case& a, bool skip_last_diagonal = false) {
  port_errors p;
  flash_forward_port(p.out, p.lse, a.qkv, a.B, a.T, a.C, a.H, a.KV, skip_last_diagonal);
  flash_backward_port(p.dqkv, a.dout, a.qkv, p.out, p.lse, a.B, a.T, a.C, a.H, a.KV);
  p.out_error = relative_error(p.out, a.exp_out);
  for (int part = 0; part < 3; ++part)
    p.d_error[part] = relative_error(a.part(p.dqkv, part), a.part(a.exp_dqkv, part));
  return p;
}

void check_flash_attention(int B, int T, int C, int H, std::uint64_t seed, int kv = 0) {
  const attention_case a(B, T, C, H, seed, kv);
  const int KV = a.KV;
  const fvec& qkv = a.qkv;
  const fvec& dout = a.dout;
  const fvec& exp_out = a.exp_out;
  const fvec& exp_dqkv = a.exp_dqkv;
  const std::size_t n = std::size_t(B) * T * C, nl = std::size_t(B) * H * T;
  const port_errors port = run_port(a);
  fvec twin_out(n), exp_lse(nl);
  trainkit::model::detail::flash_attention_forward_reference(twin_out.data(), exp_lse.data(),
                                                             qkv.data(), B, T, C, H, KV);

  auto d_qkv = to_device(qkv), d_dout = to_device(dout);
  auto out = poisoned(n), dqkv = poisoned(std::size_t(B) * T * a.row());
  auto lse = poisoned_f32(nl), delta = poisoned_f32(nl), dq_accum = poisoned_f32(n);
  k::flash_attention_forward(dev(out), lse.data(), dev(d_qkv), B, T, C, H, KV, 0);
  const fvec out_h = to_host(out);
  EXPECT_LT(relative_error(out_h, exp_out), sized_tolerance(port.out_error))
      << "out, T=" << T << " C=" << C << "; the port's error is " << port.out_error;
  EXPECT_LT(relative_error(out_h, port.out), port.out_error) << "out vs the port";
  EXPECT_LT(relative_error(to_host_raw(lse), exp_lse), tol_lse) << "lse, T=" << T;
  // The forward kernel against its lane-level emulation: same fragments, same roundings.
  fvec emu_out, emu_lse;
  flash_forward_mma_port(emu_out, emu_lse, qkv, B, T, C, H, KV);
  EXPECT_LT(relative_error(out_h, emu_out), mma_port_rounding_distance)
      << "out vs the emulation, T=" << T << " C=" << C << " H=" << H;
  {
    const fvec lse_h = to_host_raw(lse);
    double worst = 0;
    for (std::size_t i = 0; i < nl; ++i)
      worst = std::isfinite(lse_h[i]) ? std::max(worst, double(std::abs(lse_h[i] - emu_lse[i])))
                                      : INFINITY;
    EXPECT_LT(worst, mma_port_lse_distance) << "lse vs the emulation, T=" << T;
  }

  k::flash_attention_backward(dev(dqkv), delta.data(), dq_accum.data(), dev(d_dout), dev(d_qkv),
                              dev(out), lse.data(), B, T, C, H, KV, 0);
  const fvec dqkv_h = to_host(dqkv);
  // The backward kernel against its lane-level emulation, fed the kernel's own out and lse.
  fvec emu_dqkv;
  flash_backward_mma_port(emu_dqkv, dout, qkv, out_h, to_host_raw(lse), B, T, C, H, KV);
  for (int part = 0; part < 3; ++part)
    EXPECT_LT(relative_error(a.part(dqkv_h, part), a.part(emu_dqkv, part)),
              mma_port_rounding_distance)
        << "d"
        << "qkv"[part] << " vs the emulation, T=" << T << " C=" << C << " H=" << H << " KV=" << KV;
  for (int part = 0; part < 3; ++part) {
    const fvec got = a.part(dqkv_h, part);
    EXPECT_LT(relative_error(got, a.part(exp_dqkv, part)), sized_tolerance(port.d_error[part]))
        << "d"
        << "qkv"[part] << ", T=" << T << " C=" << C << " H=" << H << " KV=" << KV
        << "; the port's error is " << port.d_error[part];
    EXPECT_LT(relative_error(got, a.part(port.dqkv, part)), port.d_error[part])
        << "d"
        << "qkv"[part] << " vs the port";
  }
}

TEST(CudaFlashAttention, Head64OddT) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_flash_attention(2, 67, 128, 2, 21);
}

TEST(CudaFlashAttention, Head64Gpt2WidthTileMultiple) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_flash_attention(1, 256, 768, 12, 22);
}

TEST(CudaFlashAttention, Head128PastTheTile) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_flash_attention(2, 129, 256, 2, 23);
}

TEST(CudaFlashAttention, Head128Long) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_flash_attention(1, 1000, 512, 4, 24);
}

// Ragged T off the tile at the training head size, and a sequence shorter than one tile.
TEST(CudaFlashAttention, Head64RaggedLong) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_flash_attention(1, 1000, 128, 2, 27);
}

TEST(CudaFlashAttention, ShorterThanOneTile) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_flash_attention(2, 17, 128, 2, 28);  // head size 64
  check_flash_attention(1, 17, 256, 2, 29);  // head size 128
}

// Head size 64 runs 128-row forward blocks (two row groups a warp): one row past a block, and a
// block whose second half is partly past T.
TEST(CudaFlashAttention, Head64AroundTheForwardBlock) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_flash_attention(1, 129, 128, 2, 30);
  check_flash_attention(2, 193, 64, 1, 31);
}

// The training shape: GPT-2's head size 64 at T = 1024 (d12's 12 heads).
TEST(CudaFlashAttention, Head64TrainingShape) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_flash_attention(1, 1024, 768, 12, 25);
}

// Grouped-query attention: Llama d12's heads (12 query heads, 6 KV heads, hs 64) at T = 1024;
// groups of 3 and 4 (one KV head: multi-query) with ragged T; head size 128 with groups of 2.
TEST(CudaFlashAttention, GroupedQueryLlamaD12Shape) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_flash_attention(1, 1024, 768, 12, 41, /*kv=*/6);
}

TEST(CudaFlashAttention, GroupedQueryRaggedAndMultiQuery) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_flash_attention(2, 67, 384, 6, 42, /*kv=*/2);   // groups of 3
  check_flash_attention(1, 200, 256, 4, 43, /*kv=*/1);  // one KV head
  check_flash_attention(2, 17, 256, 4, 44, /*kv=*/2);   // shorter than a tile
  check_flash_attention(1, 129, 512, 4, 45, /*kv=*/2);  // head size 128
}

// No device: the sized tolerance would catch a kernel that skips the last query tile's diagonal
// block (the keys nearest the last queries), at the training shape and at T = 1000; the former
// fixed 2e-2 is printed beside it.
TEST(CudaFlashAttention, SizedToleranceCatchesASkippedDiagonalBlockOnTheCpuPort) {
  struct shape {
    int T, C, H;
  };
  for (const shape sh : {shape{1024, 128, 2}, shape{1000, 256, 2}}) {
    const attention_case a(1, sh.T, sh.C, sh.H, 26);
    const port_errors good = run_port(a), slip = run_port(a, true);
    std::printf("T=%d hs=%d: port out %.5f dq %.5f dk %.5f dv %.5f; skipped diagonal: out %.5f\n",
                sh.T, sh.C / sh.H, good.out_error, good.d_error[0], good.d_error[1],
                good.d_error[2], slip.out_error);
    EXPECT_LT(good.out_error, 5e-3) << "the port rounds like the kernel: a few bf16 ulps";
    EXPECT_GT(slip.out_error, sized_tolerance(good.out_error))
        << "T=" << sh.T << ": the slip would pass the sized tolerance";
  }
}

// Sliding-window attention (window W: query i sees keys i − W < j ≤ i): the kernels' windowed
// instantiations against their lane-level emulations with the same window (same fragments and
// roundings: mma_port_rounding_distance, lse to mma_port_lse_distance) and against the fp64
// windowed attention (window_reference.hpp) at the bf16 chain's 2e-2. Windows smaller than a row
// group, than a tile, not a multiple of it, one tile; hs 64 and 128; grouped queries; T ragged.
void check_flash_window(window_ref::shape s, int window, std::uint64_t seed) {
  const int B = s.B, T = s.T, C = s.C, H = s.H, KV = s.kv();
  std::mt19937_64 rng(seed);
  const std::size_t n = std::size_t(B) * T * C, nl = std::size_t(B) * H * T;
  const fvec qkv = random_bf16(std::size_t(B) * T * s.row(), rng, 1.5f), dout = random_bf16(n, rng);
  auto d_qkv = to_device(qkv), d_dout = to_device(dout);
  auto out = poisoned(n), dqkv = poisoned(std::size_t(B) * T * s.row());
  auto lse = poisoned_f32(nl), delta = poisoned_f32(nl), dq_accum = poisoned_f32(n);
  k::flash_attention_forward(dev(out), lse.data(), dev(d_qkv), B, T, C, H, KV, 0, window);
  const fvec out_h = to_host(out), lse_h = to_host_raw(lse);
  k::flash_attention_backward(dev(dqkv), delta.data(), dq_accum.data(), dev(d_dout), dev(d_qkv),
                              dev(out), lse.data(), B, T, C, H, KV, 0, window);
  const fvec dqkv_h = to_host(dqkv);

  fvec emu_out, emu_lse, emu_dqkv;
  flash_forward_mma_port(emu_out, emu_lse, qkv, B, T, C, H, KV, {.window = window});
  flash_backward_mma_port(emu_dqkv, dout, qkv, out_h, lse_h, B, T, C, H, KV, {.window = window});
  std::vector<double> want_out, want_lse, want_dqkv;
  const std::vector<double> qkv_d(qkv.begin(), qkv.end()), dout_d(dout.begin(), dout.end());
  window_ref::naive_forward(want_out, want_lse, qkv_d, s, window);
  window_ref::naive_backward(want_dqkv, dout_d, qkv_d, want_out, want_lse, s, window);
  const fvec exp_out(want_out.begin(), want_out.end()), exp_lse(want_lse.begin(), want_lse.end());
  const fvec exp_dqkv(want_dqkv.begin(), want_dqkv.end());

  EXPECT_LT(relative_error(out_h, emu_out), mma_port_rounding_distance)
      << "out vs the emulation, T=" << T << " W=" << window;
  EXPECT_LT(relative_error(out_h, exp_out), 2e-2) << "out vs fp64, T=" << T << " W=" << window;
  double worst = 0;
  for (std::size_t i = 0; i < nl; ++i)
    worst = std::isfinite(lse_h[i]) ? std::max(worst, double(std::abs(lse_h[i] - emu_lse[i])))
                                    : INFINITY;
  EXPECT_LT(worst, mma_port_lse_distance) << "lse vs the emulation, T=" << T << " W=" << window;
  EXPECT_LT(relative_error(lse_h, exp_lse), tol_lse) << "lse vs fp64, W=" << window;
  for (int part = 0; part < 3; ++part) {
    const fvec got = part_of_gqa(dqkv_h, B * T, H, KV, C / H, part);
    EXPECT_LT(relative_error(got, part_of_gqa(emu_dqkv, B * T, H, KV, C / H, part)),
              mma_port_rounding_distance)
        << "d"
        << "qkv"[part] << " vs the emulation, T=" << T << " W=" << window;
    EXPECT_LT(relative_error(got, part_of_gqa(exp_dqkv, B * T, H, KV, C / H, part)), 2e-2)
        << "d"
        << "qkv"[part] << " vs fp64, T=" << T << " W=" << window;
  }
}

TEST(CudaFlashAttention, SlidingWindowHead64) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_flash_window({1, 300, 128, 2}, 5, 51);      // smaller than a row group
  check_flash_window({1, 300, 128, 2}, 79, 52);     // not a multiple of the tile, on an edge
  check_flash_window({2, 193, 128, 2}, 64, 53);     // one tile, around the 128-row block
  check_flash_window({1, 1024, 768, 12}, 256, 54);  // d12 shape, a short layer's window
}

TEST(CudaFlashAttention, SlidingWindowHead128AndGroupedQueries) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_flash_window({1, 200, 256, 2}, 70, 55);        // hs 128
  check_flash_window({1, 193, 384, 6, 2}, 50, 56);     // groups of 3
  check_flash_window({1, 1024, 768, 12, 6}, 128, 57);  // Llama d12's heads
  check_flash_window({2, 17, 256, 4, 1}, 3, 58);       // shorter than a tile, one KV head
}

TEST(CudaFlashAttention, SlidingWindowOfTIsTheFullCausal) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  const int B = 1, T = 200, C = 128, H = 2;
  std::mt19937_64 rng(59);
  const fvec qkv = random_bf16(std::size_t(B) * T * 3 * C, rng, 1.5f);
  auto d_qkv = to_device(qkv);
  auto out0 = poisoned(std::size_t(B) * T * C), out1 = poisoned(std::size_t(B) * T * C);
  auto lse0 = poisoned_f32(std::size_t(B) * H * T), lse1 = poisoned_f32(std::size_t(B) * H * T);
  k::flash_attention_forward(dev(out0), lse0.data(), dev(d_qkv), B, T, C, H, H, 0);
  k::flash_attention_forward(dev(out1), lse1.data(), dev(d_qkv), B, T, C, H, H, 0, T);
  EXPECT_EQ(to_host(out0), to_host(out1)) << "a window of T runs the windowless kernel";
}

TEST(CudaFlashAttention, RejectsHeadSizesNotBuilt) {
  // No device needed: the shape check runs before any launch.
  EXPECT_THROW(k::flash_attention_forward(nullptr, nullptr, nullptr, 1, 8, 96, 1, 1, 0),
               trainkit::config_error);
  EXPECT_THROW(k::flash_attention_forward(nullptr, nullptr, nullptr, 1, 8, 128, 3, 3, 0),
               trainkit::config_error);
  // KV must divide H.
  EXPECT_THROW(k::flash_attention_forward(nullptr, nullptr, nullptr, 1, 8, 256, 4, 3, 0),
               trainkit::config_error);
  // A negative window.
  EXPECT_THROW(k::flash_attention_forward(nullptr, nullptr, nullptr, 1, 8, 128, 2, 2, 0, -1),
               trainkit::config_error);
  // The backward adds dQ in float pairs: its accumulator must be 8-byte aligned.
  float* misaligned = reinterpret_cast<float*>(std::uintptr_t(4));
  EXPECT_THROW(k::flash_attention_backward(nullptr, nullptr, misaligned, nullptr, nullptr, nullptr,
                                           nullptr, 1, 8, 128, 2, 2, 0),
               trainkit::config_error);
}

}  // namespace
