// Tests for trainkit/model/detail/llama_cuda_twins.hpp: each CPU twin of a Llama CUDA kernel
// against the fp32 CPU kernel llama_cpu runs (cpu/rmsnorm_rope_kernels.hpp), on random
// bf16-representable inputs at the d12 shape (C = 768, H = 12, KV = 6, hs = 64, F = 2048) and
// ragged ones. The twins round to bf16 where the kernels store bf16, so they are held to a relative
// norm ‖twin − cpu‖/‖cpu‖ of 1e-2 (one rounding is at most 2⁻⁹ relative, ~2e-3 in norm; a pairing
// or sign slip lands near 1). The RoPE table the CUDA policy uploads must equal llama_cpu's bit for
// bit. RMSNorm is also run on rows with mean(x²) ≈ 1e-6, where ε = 1e-5 dominates and putting ε
// outside the root would be visible. The kernels' shared index maps (RMSNorm backward's
// shared-memory slots, its dw reduce's grid, RoPE's thread-to-pairs map) are walked over whole
// grids. The GPU kernels
// are held to these twins by tests/cuda/test_llama_kernels.cu.
#include "trainkit/model/detail/llama_cuda_twins.hpp"  // first: the header compiles on its own

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "trainkit/model/cpu/rmsnorm_rope_kernels.hpp"
#include "trainkit/model/llama/config.hpp"

namespace {

namespace d = trainkit::model::detail;
using fvec = std::vector<float>;

constexpr double tol = 1e-2;

fvec random_bf16(std::size_t n, std::mt19937_64& rng, float stddev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, stddev);
  fvec v(n);
  for (auto& x : v) x = d::round_to_bf16(dist(rng));
  return v;
}

double relative_error(const fvec& a, const fvec& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += double(a[i] - b[i]) * (a[i] - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

bool all_bf16(const fvec& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return d::round_to_bf16(x) == x; });
}

struct rms_case {
  std::int64_t N;
  int C;
  float stddev;
};

TEST(LlamaCudaTwins, Presets) {  // the shapes below are d12's
  const auto c = trainkit::model::llama_config::preset("d12");
  EXPECT_EQ(c.channels, 768);
  EXPECT_EQ(c.num_heads, 12);
  EXPECT_EQ(c.num_kv_heads, 6);
  EXPECT_EQ(c.head_size(), 64);
  EXPECT_EQ(c.hidden_size, 2048);
}

TEST(LlamaCudaTwins, RmsnormForwardWithResidualMatchesCpu) {
  std::mt19937_64 rng(1);
  for (const auto& [N, C, sd] : {rms_case{64, 768, 1.0f}, rms_case{37, 264, 1.0f},
                                 rms_case{16, 768, 1e-3f}}) {  // last: ε dominates mean(x²)
    for (const bool gain : {true, false}) {
      const fvec a = random_bf16(std::size_t(N) * C, rng, sd),
                 b = random_bf16(std::size_t(N) * C, rng, sd), w = random_bf16(C, rng, 0.5f);
      fvec res(a.size()), out(a.size()), rstd(static_cast<std::size_t>(N));
      const float* wp = gain ? w.data() : nullptr;
      d::rmsnorm_forward_twin(res.data(), out.data(), rstd.data(), a.data(), b.data(), wp, N, C,
                              1e-5f);
      EXPECT_TRUE(all_bf16(out) && all_bf16(res));
      fvec x(a.size());  // the residual stream, as the kernel stores it
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = d::round_to_bf16(a[i] + b[i]);
      EXPECT_EQ(res, x);
      fvec want(a.size()), want_rstd(static_cast<std::size_t>(N));
      d::rmsnorm_forward<float>(want.data(), want_rstd.data(), x.data(), wp, N, C, 1e-5f);
      EXPECT_LT(relative_error(out, want), tol) << N << "x" << C << " sd " << sd;
      EXPECT_LT(relative_error(rstd, want_rstd), 1e-5) << N << "x" << C << " sd " << sd;

      fvec out2(a.size()), rstd2(static_cast<std::size_t>(N));  // no residual: the final norm
      d::rmsnorm_forward_twin(nullptr, out2.data(), rstd2.data(), x.data(), nullptr, wp, N, C,
                              1e-5f);
      EXPECT_EQ(out2, out);
    }
  }
}

TEST(LlamaCudaTwins, RmsnormBackwardMatchesCpu) {
  std::mt19937_64 rng(2);
  for (const auto& [N, C, sd] :
       {rms_case{64, 768, 1.0f}, rms_case{37, 264, 1.0f}, rms_case{16, 768, 1e-3f}}) {
    for (const bool gain : {true, false}) {
      const fvec x = random_bf16(std::size_t(N) * C, rng, sd), w = random_bf16(C, rng, 0.5f),
                 dout = random_bf16(std::size_t(N) * C, rng),
                 dinp0 = random_bf16(std::size_t(N) * C, rng), dw0 = random_bf16(C, rng, 0.1f);
      const float* wp = gain ? w.data() : nullptr;
      fvec scratch(x.size()), rstd(static_cast<std::size_t>(N));
      d::rmsnorm_forward<float>(scratch.data(), rstd.data(), x.data(), wp, N, C, 1e-5f);
      fvec dinp = dinp0, dw = dw0;
      d::rmsnorm_backward_twin(dinp.data(), gain ? dw.data() : nullptr, dout.data(), x.data(), wp,
                               rstd.data(), N, C);
      EXPECT_TRUE(all_bf16(dinp) && all_bf16(dw));
      // The CPU kernel adds into dinp and dw: compare the increments, which the residual's
      // gradient would otherwise hide.
      fvec want_d(x.size(), 0.0f), want_w(std::size_t(C), 0.0f);
      d::rmsnorm_backward<float>(want_d.data(), gain ? want_w.data() : nullptr, dout.data(),
                                 x.data(), wp, rstd.data(), N, C);
      fvec got_d(x.size()), got_w(static_cast<std::size_t>(C));
      for (std::size_t i = 0; i < x.size(); ++i) {
        got_d[i] = dinp[i] - dinp0[i];
        want_d[i] = d::round_to_bf16(dinp0[i] + want_d[i]) - dinp0[i];
      }
      EXPECT_LT(relative_error(got_d, want_d), tol) << N << "x" << C << " sd " << sd;
      if (gain) {
        for (int c = 0; c < C; ++c) {
          got_w[std::size_t(c)] = dw[std::size_t(c)] - dw0[std::size_t(c)];
          want_w[std::size_t(c)] =
              d::round_to_bf16(dw0[std::size_t(c)] + want_w[std::size_t(c)]) - dw0[std::size_t(c)];
        }
        EXPECT_LT(relative_error(got_w, want_w), tol) << N << "x" << C;
      } else {
        EXPECT_EQ(dw, dw0);
      }
    }
  }
}

// The kernels, the twins and llama_cpu read one table (detail/rope_table.hpp); here it is held to
// the angles t·θ^(−2i/hs) in double (float's angle rounding at t < 1024 is < 1e-4 rad).
TEST(LlamaCudaTwins, RopeTableHoldsTheAnglesCosAndSin) {
  for (const float theta : {10000.0f, 500000.0f, 100.0f}) {
    const d::rope_table table(1024, 64, theta);
    EXPECT_EQ(table.T, 1024);
    EXPECT_EQ(table.half, 32);
    ASSERT_EQ(table.cos.size(), std::size_t(1024 * 32));
    double worst = 0;
    for (int t = 0; t < 1024; ++t)
      for (int i = 0; i < 32; ++i) {
        const double angle = double(t) * std::pow(double(theta), -2.0 * i / 64.0);
        worst = std::max({worst, std::abs(table.cos[std::size_t(t) * 32 + i] - std::cos(angle)),
                          std::abs(table.sin[std::size_t(t) * 32 + i] - std::sin(angle))});
      }
    EXPECT_LT(worst, 2e-4) << "theta " << theta;
  }
}

// q (H heads) and k (KV heads) are the first H + KV heads of each fused QKV row; v is untouched.
TEST(LlamaCudaTwins, RopeOnFusedQkvMatchesCpu) {
  std::mt19937_64 rng(3);
  struct shape {
    int B, T, H, KV, hs;
  };
  for (const auto& [B, T, H, KV, hs] :
       {shape{2, 64, 12, 6, 64}, shape{3, 37, 4, 1, 16}, shape{1, 1024, 12, 6, 64}}) {
    const std::int64_t N = std::int64_t(B) * T, D = std::int64_t(H + 2 * KV) * hs;
    const d::rope_table cpu(T, hs, 10000.0f);
    const d::rope_table table(T, hs, 10000.0f);
    for (const bool inverse : {false, true}) {
      const fvec qkv = random_bf16(std::size_t(N * D), rng);
      fvec got = qkv, want = qkv;
      d::rope_twin(got.data(), table, N, T, H + KV, hs, D, inverse);
      d::rope_rotate<float>(want.data(), cpu, N, T, H + KV, hs, D, inverse);
      EXPECT_TRUE(all_bf16(got));
      EXPECT_LT(relative_error(got, want), tol) << B << "x" << T << " H" << H << " inv " << inverse;
      for (std::int64_t r = 0; r < N; ++r)  // v is left alone
        for (std::int64_t i = std::int64_t(H + KV) * hs; i < D; ++i)
          ASSERT_EQ(got[std::size_t(r * D + i)], qkv[std::size_t(r * D + i)]);
    }
  }
}

// The inverse rotation undoes the forward one up to two bf16 roundings: the backward of a
// rotation is its transpose.
TEST(LlamaCudaTwins, RopeInverseUndoesForward) {
  std::mt19937_64 rng(4);
  const int T = 128, heads = 3, hs = 64;
  const d::rope_table table(T, hs, 10000.0f);
  const fvec x = random_bf16(std::size_t(T) * heads * hs, rng);
  fvec y = x;
  d::rope_twin(y.data(), table, T, T, heads, hs, heads * hs, false);
  EXPECT_GT(relative_error(y, x), 0.1);
  d::rope_twin(y.data(), table, T, T, heads, hs, heads * hs, true);
  EXPECT_LT(relative_error(y, x), tol);
}

TEST(LlamaCudaTwins, QkNormMatchesCpu) {
  std::mt19937_64 rng(5);
  const int B = 2, T = 37, H = 12, KV = 6, hs = 64;
  const std::int64_t N = std::int64_t(B) * T, D = std::int64_t(H + 2 * KV) * hs;
  for (const float sd : {1.0f, 1e-3f}) {
    const fvec qkv = random_bf16(std::size_t(N * D), rng, sd);
    fvec got = qkv, want = qkv, rstd(std::size_t(N) * (H + KV)), want_rstd(rstd.size());
    d::head_rmsnorm_forward_twin(got.data(), rstd.data(), N, H + KV, hs, D, 1e-5f);
    d::head_rmsnorm_forward<float>(want.data(), want_rstd.data(), N, H + KV, hs, D, 1e-5f);
    EXPECT_TRUE(all_bf16(got));
    EXPECT_LT(relative_error(got, want), tol) << sd;
    EXPECT_LT(relative_error(rstd, want_rstd), 1e-5) << sd;

    // Backward from the normalised output, rows `D` apart, in place; v's slots untouched.
    const fvec dy = random_bf16(std::size_t(N * D), rng);
    fvec dgot = dy, dwant = dy;
    d::head_rmsnorm_backward_twin(dgot.data(), got.data(), rstd.data(), N, H + KV, hs, D);
    d::head_rmsnorm_backward<float>(dwant.data(), got.data(), rstd.data(), N, H + KV, hs, D);
    EXPECT_TRUE(all_bf16(dgot));
    EXPECT_LT(relative_error(dgot, dwant), tol) << sd;
  }
}

TEST(LlamaCudaTwins, SwigluMatchesCpu) {
  std::mt19937_64 rng(6);
  struct shape {
    std::int64_t N;
    int F;
  };
  for (const auto& [N, F] : {shape{64, 2048}, shape{37, 72}}) {
    const fvec fc = random_bf16(std::size_t(N) * 2 * F, rng, 2.0f),
               dout = random_bf16(std::size_t(N) * F, rng);
    fvec out(std::size_t(N) * F), want(out.size());
    d::swiglu_forward_twin(out.data(), fc.data(), N, F);
    d::swiglu_forward<float>(want.data(), fc.data(), N, F);
    EXPECT_TRUE(all_bf16(out));
    EXPECT_LT(relative_error(out, want), tol) << N << "x" << F;
    fvec dfc(fc.size()), dwant(fc.size());
    d::swiglu_backward_twin(dfc.data(), fc.data(), dout.data(), N, F);
    d::swiglu_backward<float>(dwant.data(), fc.data(), dout.data(), N, F);
    EXPECT_TRUE(all_bf16(dfc));
    // gate and up halves separately: a slip in one half must not hide behind the other
    fvec gate_got, gate_want, up_got, up_want;
    for (std::int64_t r = 0; r < N; ++r)
      for (int i = 0; i < 2 * F; ++i) {
        const std::size_t k = std::size_t(r * 2 * F + i);
        (i < F ? gate_got : up_got).push_back(dfc[k]);
        (i < F ? gate_want : up_want).push_back(dwant[k]);
      }
    EXPECT_LT(relative_error(gate_got, gate_want), tol) << "dgate " << N << "x" << F;
    EXPECT_LT(relative_error(up_got, up_want), tol) << "dup " << N << "x" << F;
  }
}

TEST(LlamaCudaTwins, ReluSquaredMatchesCpu) {
  std::mt19937_64 rng(7);
  for (const std::int64_t n : {std::int64_t(64) * 2048, std::int64_t(37) * 72}) {
    const fvec x = random_bf16(std::size_t(n), rng), dout = random_bf16(std::size_t(n), rng);
    fvec out(x.size()), want(x.size());
    d::relu_squared_forward_twin(out.data(), x.data(), n);
    d::relu_squared_forward<float>(want.data(), x.data(), n);
    EXPECT_TRUE(all_bf16(out));
    EXPECT_LT(relative_error(out, want), tol) << n;
    fvec dx = dout, dwant(x.size());  // in place: dinp aliases dout
    d::relu_squared_backward_twin(dx.data(), x.data(), dx.data(), n);
    d::relu_squared_backward<float>(dwant.data(), x.data(), dout.data(), n);
    EXPECT_TRUE(all_bf16(dx));
    EXPECT_LT(relative_error(dx, dwant), tol) << n;
  }
}

}  // namespace

// ---- the kernels' index maps, walked over whole grids (no GPU runs here) -----------------------
namespace {

// RMSNorm backward: every channel of the padded width has its own slot and the slot gives back
// the channel, for widths on and off the 256-channel pass (the slots are a permutation).
TEST(LlamaCudaTwins, RmsnormSlotMapIsABijection) {
  for (const int C : {8, 264, 768, 1600}) {
    const int padded = (C + d::rmsnorm_pass - 1) / d::rmsnorm_pass * d::rmsnorm_pass;
    std::vector<int> seen(std::size_t(padded), 0);
    for (int j = 0; j * d::rmsnorm_pass < C; ++j)
      for (int lane = 0; lane < d::llama_kernel_warp; ++lane)
        for (int k = 0; k < d::llama_kernel_pack; ++k) {
          const int c = j * d::rmsnorm_pass + lane * d::llama_kernel_pack + k;
          const int q = d::rmsnorm_channel_slot(j, lane, k);
          ASSERT_GE(q, 0);
          ASSERT_LT(q, padded);
          ++seen[std::size_t(q)];
          ASSERT_EQ(d::rmsnorm_slot_channel(q), c) << "C " << C;
          if (lane + 1 < d::llama_kernel_warp) {  // lanes of one (j, k): consecutive floats
            ASSERT_EQ(d::rmsnorm_channel_slot(j, lane + 1, k) - q, 1);
          }
        }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; })) << C;
  }
}

// RMSNorm backward's dw reduce: every chunk's partial of every channel read once, the sums those of
// the partials, and the grid wide enough to fill the GPU (24 blocks of 512 threads at d12, where
// one 128-thread block per 128 channels gave 6).
TEST(LlamaCudaTwins, RmsnormDwReduceReadsEveryPartialOnceOverManyBlocks) {
  std::mt19937_64 rng(31);
  for (const auto& [chunks, C] :
       {std::pair{1024, 768}, std::pair{37, 264}, std::pair{1, 8}, std::pair{17, 40}}) {
    const std::size_t n = std::size_t(chunks) * std::size_t(C);
    const fvec partial = random_bf16(n, rng);
    std::vector<int> reads(n, 0);
    fvec sums(std::size_t(C), NAN);
    d::rmsnorm_dw_reduce_twin(sums.data(), partial.data(), chunks, C, reads.data());
    EXPECT_TRUE(std::all_of(reads.begin(), reads.end(), [](int r) { return r == 1; }))
        << chunks << " chunks x " << C;
    fvec want(std::size_t(C), 0.0f);
    for (int c = 0; c < C; ++c) {
      double s = 0;
      for (int j = 0; j < chunks; ++j)
        s += partial[std::size_t(j) * std::size_t(C) + std::size_t(c)];
      want[std::size_t(c)] = float(s);
    }
    EXPECT_LT(relative_error(sums, want), 1e-5) << chunks << " chunks x " << C;
  }
  EXPECT_EQ(d::rmsnorm_reduce_blocks(768), 24);
  EXPECT_EQ(d::rmsnorm_reduce_channels * d::rmsnorm_reduce_lanes, 512);
  EXPECT_EQ(d::rmsnorm_reduce_blocks(8), 1);
}

// RoPE: the grid of N·(H+KV)·(hs/16) threads rotates every (i, i + hs/2) pair of every q and k
// head exactly once and never reaches v.
TEST(LlamaCudaTwins, RopeGridCoversQAndKOnce) {
  struct shape {
    int N, H, KV, hs;
  };
  for (const auto& [N, H, KV, hs] :
       {shape{5, 12, 6, 64}, shape{3, 4, 1, 16}, shape{2, 8, 8, 128}}) {
    const int heads = H + KV, half = hs / 2;
    const std::int64_t D = std::int64_t(H + 2 * KV) * hs;
    std::vector<int> touched(std::size_t(N * D), 0);
    const std::int64_t items = std::int64_t(N) * heads * (half / d::llama_kernel_pack);
    for (std::int64_t item = 0; item < items; ++item) {
      const auto [row, head, i] = d::rope_item_site(item, heads, hs);
      ASSERT_LT(row, N);
      ASSERT_LT(head, heads);
      ASSERT_LE(i + d::llama_kernel_pack, half);
      for (int k = 0; k < d::llama_kernel_pack; ++k) {
        const std::int64_t lo = row * D + std::int64_t(head) * hs + i + k;
        ++touched[std::size_t(lo)];
        ++touched[std::size_t(lo + half)];
      }
    }
    for (std::int64_t r = 0; r < N; ++r) {
      for (std::int64_t c = 0; c < D; ++c) {
        ASSERT_EQ(touched[std::size_t(r * D + c)], c < std::int64_t(heads) * hs ? 1 : 0)
            << "row " << r << " channel " << c;
      }
    }
  }
}

}  // namespace
