// Sliding-window causal attention in the own flash kernels (model/cuda/flash_attention.cuh),
// proven on the CPU through the lane-level emulations that walk the kernels' steps with the
// kernels' own index headers (tests/cuda/flash_mma_port.hpp, flash_mma_backward_port.hpp): query
// i sees keys i − W < j ≤ i; the forward visits key tiles from the block's first query's window on
// (earlier ones skipped, not masked), the backward visits query tiles up to the last query whose
// window reaches the key tile, and only tiles crossing the diagonal or a window edge are masked.
//
// The reference is an fp64 attention written from that definition here (GQA head map of
// detail/attention_heads.hpp), itself held to the recipe's CPU kernel
// (model/recipe/sliding_window_attention.hpp, pinned to PyTorch by test_recipe_kernels) and
// detail::attention_backward. Windows: 1 (only itself), smaller than a row group (5, 16), smaller
// than a tile and not a multiple of it (50, 100, 200), exactly a tile (64), at or past T (= full
// causal: bit for bit the windowless kernel), at hs 64 (128-row forward blocks) and 128, with
// grouped queries and ragged T. The tile bounds are also walked exhaustively: every skipped tile
// holds no visible pair, the first visited one holds one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "../cuda/flash_mma_backward_port.hpp"
#include "../cuda/flash_mma_port.hpp"
#include "../cuda/flash_port.hpp"
#include "../cuda/window_reference.hpp"
#include "trainkit/model/detail/attention_heads.hpp"
#include "trainkit/model/detail/flash_attention_reference.hpp"
#include "trainkit/model/detail/flash_mma_backward_layout.hpp"
#include "trainkit/model/detail/flash_mma_layout.hpp"
#include "trainkit/model/recipe/sliding_window_attention.hpp"

namespace tg = trainkit::test_gpu;
namespace d = trainkit::model::detail;
namespace lay = trainkit::model::detail::flash_mma;
namespace bl = trainkit::model::detail::flash_mma_backward;

namespace {

// The emulations without roundings against fp64: fp32 summation order only, as the windowless
// tests (test_flash_mma_port: 8e-6 on out, 1e-5 on lse; the backward's largest error over the
// largest gradient 8e-6).
constexpr double tol_out = 8e-6;
constexpr double tol_lse = 1e-5;
constexpr double tol_grad = 8e-6;

using tg::window_ref::naive_backward;
using tg::window_ref::naive_forward;
using tg::window_ref::sees;
using tg::window_ref::shape;

std::vector<float> random_bf16(std::size_t n, unsigned seed, float spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = tg::bf16_round(dist(rng) * spread);
  return v;
}

std::vector<double> widen(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

// The reference itself: on MHA it is the recipe's CPU kernel (out) and detail::attention_backward
// on its probabilities (dqkv), to 1e-12.
TEST(FlashWindowReference, IsTheRecipeKernel) {
  for (int window : {1, 5, 16, 37, 64, 100}) {
    const shape s{2, 100, 32, 2};  // hs 16: the reference does not care about tiles
    const auto qkv = widen(random_bf16(std::size_t(s.B) * s.T * s.row(), 3, 1.5f));
    const auto dout = widen(random_bf16(std::size_t(s.B) * s.T * s.C, 4, 1.0f));
    std::vector<double> out, lse, dqkv;
    naive_forward(out, lse, qkv, s, window);
    naive_backward(dqkv, dout, qkv, out, lse, s, window);
    std::vector<double> r_out(out.size()), att(std::size_t(s.B) * s.H * s.T * s.T),
        scratch(att.size()), r_dqkv(dqkv.size());
    trainkit::model::recipe::sliding_window_attention_forward(r_out.data(), att.data(), qkv.data(),
                                                              s.B, s.T, s.C, s.H, window);
    d::attention_backward(r_dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), s.B,
                          s.T, s.C, s.H);
    double e_out = 0, e_d = 0;
    for (std::size_t i = 0; i < out.size(); ++i)
      e_out = std::max(e_out, std::abs(out[i] - r_out[i]));
    for (std::size_t i = 0; i < dqkv.size(); ++i)
      e_d = std::max(e_d, std::abs(dqkv[i] - r_dqkv[i]));
    EXPECT_LT(e_out, 1e-12) << "window " << window;
    EXPECT_LT(e_d, 1e-12) << "window " << window;
  }
}

void check_forward(shape s, int window, unsigned seed) {
  const auto qkv = random_bf16(std::size_t(s.B) * s.T * s.row(), seed, 1.5f);
  std::vector<float> out, lse;
  tg::flash_forward_mma_port(out, lse, qkv, s.B, s.T, s.C, s.H, s.kv(),
                             {.round_p = false, .round_out = false, .window = window});
  std::vector<double> want_out, want_lse;
  naive_forward(want_out, want_lse, widen(qkv), s, window);
  double e_out = 0, e_lse = 0;
  for (std::size_t i = 0; i < out.size(); ++i)
    e_out = std::isfinite(out[i]) ? std::max(e_out, std::abs(out[i] - want_out[i])) : INFINITY;
  for (std::size_t i = 0; i < lse.size(); ++i)
    e_lse = std::isfinite(lse[i]) ? std::max(e_lse, std::abs(lse[i] - want_lse[i])) : INFINITY;
  std::printf("forward T=%d hs=%d H=%d KV=%d W=%d: |out - fp64| %.2e, |lse - fp64| %.2e\n", s.T,
              s.hs(), s.H, s.kv(), window, e_out, e_lse);
  EXPECT_LT(e_out, tol_out) << "T=" << s.T << " hs=" << s.hs() << " W=" << window;
  EXPECT_LT(e_lse, tol_lse) << "T=" << s.T << " hs=" << s.hs() << " W=" << window;
}

void check_backward(shape s, int window, unsigned seed) {
  const auto qkv = random_bf16(std::size_t(s.B) * s.T * s.row(), seed, 1.5f);
  const auto dout = random_bf16(std::size_t(s.B) * s.T * s.C, seed + 1000, 1.0f);
  // The forward in fp64, out rounded to bf16 as the kernel stores it and lse to fp32: both
  // backward passes read exactly these.
  std::vector<double> out_d, lse_d;
  naive_forward(out_d, lse_d, widen(qkv), s, window);
  std::vector<float> out(out_d.size()), lse(lse_d.size());
  for (std::size_t i = 0; i < out.size(); ++i) out_d[i] = out[i] = tg::bf16_round(float(out_d[i]));
  for (std::size_t i = 0; i < lse.size(); ++i) lse_d[i] = lse[i] = float(lse_d[i]);
  std::vector<double> want;
  naive_backward(want, widen(dout), widen(qkv), out_d, lse_d, s, window);
  std::vector<float> emu;
  tg::flash_backward_mma_port(emu, dout, qkv, out, lse, s.B, s.T, s.C, s.H, s.kv(),
                              {.round_operands = false, .round_out = false, .window = window});
  const std::size_t row = s.row();
  // Relative to the largest gradient of all three: at window 1 dq and dk are exactly 0 (P = 1,
  // dS = P·(dP − D) = 0), and only their absolute error means anything.
  double mag = 0;
  for (double w : want) mag = std::max(mag, std::abs(w));
  EXPECT_GT(mag, 0.1) << "a gradient this small would hide errors";
  for (int p = 0; p < 3; ++p) {
    const std::size_t width = p == 0 ? std::size_t(s.C) : std::size_t(s.kv() * s.hs());
    const std::size_t col = p == 0 ? 0 : std::size_t(s.C) + std::size_t(p - 1) * width;
    double err = 0;
    for (std::size_t t = 0; t < std::size_t(s.B) * s.T; ++t)
      for (std::size_t c = 0; c < width; ++c) {
        const double g = emu[t * row + col + c], w = want[t * row + col + c];
        err = std::isfinite(g) ? std::max(err, std::abs(g - w)) : INFINITY;
      }
    std::printf("backward T=%d hs=%d H=%d KV=%d W=%d: d%c max |emu - fp64| %.2e of %.2f: %.2e\n",
                s.T, s.hs(), s.H, s.kv(), window, "qkv"[p], err, mag, err / mag);
    EXPECT_LT(err / mag, tol_grad) << "d"
                                   << "qkv"[p] << " T=" << s.T << " W=" << window;
  }
}

TEST(FlashWindowPort, ForwardMatchesFp64AtHead64) {
  // hs 64: 128-row blocks, two row groups a warp.
  check_forward({1, 300, 128, 2}, 1, 101);     // only itself
  check_forward({1, 300, 128, 2}, 5, 102);     // smaller than a row group
  check_forward({1, 300, 128, 2}, 16, 103);    // one row group
  check_forward({1, 300, 128, 2}, 79, 110);    // a group's last query just on a tile's edge
  check_forward({1, 300, 128, 2}, 50, 104);    // smaller than a tile
  check_forward({1, 300, 128, 2}, 64, 105);    // one tile
  check_forward({1, 300, 128, 2}, 100, 106);   // not a multiple of the tile
  check_forward({1, 300, 128, 2}, 200, 107);   // past a forward block
  check_forward({2, 17, 128, 2}, 5, 108);      // shorter than a tile
  check_forward({1, 1024, 128, 2}, 256, 109);  // the training shape, a short layer's window
}

TEST(FlashWindowPort, ForwardMatchesFp64AtHead128AndWithGroupedQueries) {
  check_forward({1, 200, 128, 1}, 70, 111);     // hs 128
  check_forward({1, 200, 128, 1}, 47, 115);     // hs 128, on a tile's edge
  check_forward({1, 200, 256, 2}, 7, 112);      // hs 128, tiny window
  check_forward({1, 193, 384, 6, 2}, 50, 113);  // hs 64, groups of 3
  check_forward({1, 130, 512, 4, 1}, 90, 114);  // hs 128, one KV head
}

TEST(FlashWindowPort, BackwardMatchesFp64) {
  check_backward({1, 300, 128, 2}, 1, 121);
  check_backward({1, 300, 128, 2}, 5, 122);
  check_backward({1, 300, 128, 2}, 50, 123);
  check_backward({1, 300, 128, 2}, 79, 130);  // a strip's first key just on a query tile's edge
  check_backward({1, 300, 128, 2}, 66, 131);  // a key tile's last key seen by one query tile's
                                              // first query only
  check_backward({1, 300, 128, 2}, 64, 124);
  check_backward({1, 300, 128, 2}, 100, 125);
  check_backward({2, 17, 128, 2}, 5, 126);
  check_backward({1, 200, 256, 2}, 70, 127);     // hs 128
  check_backward({1, 193, 384, 6, 2}, 50, 128);  // groups of 3
  check_backward({1, 130, 512, 4, 1}, 90, 129);  // hs 128, one KV head
}

// A window of T or more hides nothing: the kernels run their windowless code (effective_window),
// and the result is the windowless one bit for bit.
TEST(FlashWindowPort, WindowOfTOrMoreIsTheFullCausalBitForBit) {
  const shape s{1, 150, 128, 2};
  const auto qkv = random_bf16(std::size_t(s.B) * s.T * s.row(), 131, 1.5f);
  const auto dout = random_bf16(std::size_t(s.B) * s.T * s.C, 132, 1.0f);
  std::vector<float> out0, lse0, d0;
  tg::flash_forward_mma_port(out0, lse0, qkv, s.B, s.T, s.C, s.H, s.kv());
  tg::flash_backward_mma_port(d0, dout, qkv, out0, lse0, s.B, s.T, s.C, s.H, s.kv());
  for (int window : {150, 151, 1 << 30}) {
    std::vector<float> out, lse, dq;
    tg::flash_forward_mma_port(out, lse, qkv, s.B, s.T, s.C, s.H, s.kv(), {.window = window});
    tg::flash_backward_mma_port(dq, dout, qkv, out0, lse0, s.B, s.T, s.C, s.H, s.kv(),
                                {.window = window});
    EXPECT_EQ(out, out0) << window;
    EXPECT_EQ(lse, lse0) << window;
    EXPECT_EQ(dq, d0) << window;
  }
  // And a window just short of T is not the full attention (the test can fail).
  std::vector<float> out, lse;
  tg::flash_forward_mma_port(out, lse, qkv, s.B, s.T, s.C, s.H, s.kv(), {.window = 149});
  EXPECT_NE(out, out0);
}

// The skipped tiles, walked over every block and window: the forward's tiles before
// forward_first_key_tile hold no pair any of the block's queries sees, the first visited one holds
// one; the backward's query tiles from end_query_tile on see none of the key tile's keys, the last
// visited one sees one. And the element test only runs where needed: a (row group, key tile) pair
// that needs_mask and needs_window_mask both pass over has every pair visible.
TEST(FlashWindowLayout, SkippedTilesAreWhollyOutsideTheWindowAndNoMoreAre) {
  constexpr int Bq = d::flash_tiles::block_q, Bk = d::flash_tiles::block_k;
  for (int T : {17, 64, 200, 300})
    // Windows ≡ 15 (mod 16) put a row group's last query exactly `window` past a tile's first
    // key: the one pair on the edge of needs_window_mask; windows ≡ 2 (mod 64) make a key tile's
    // last key the only one a query tile's first query sees (end_query_tile's edge).
    for (int window : {1, 2, 5, 15, 16, 47, 50, 64, 65, 66, 79, 100, 128, 130, 200, 299})
      for (int rows : {64, 128}) {
        const int w = lay::effective_window(window, T);
        for (int q0 = 0; q0 < T; q0 += rows) {
          const int first = lay::forward_first_key_tile(q0, w, Bk);
          const int q_end = std::min(q0 + rows, T);
          auto tile_seen = [&](int kt) {
            for (int t = q0; t < q_end; ++t)
              for (int j = kt * Bk; j < std::min(kt * Bk + Bk, T); ++j)
                if (sees(t, j, window)) return true;
            return false;
          };
          for (int kt = 0; kt < first; ++kt)
            ASSERT_FALSE(tile_seen(kt)) << "T " << T << " W " << window << " q0 " << q0;
          ASSERT_TRUE(tile_seen(first)) << "T " << T << " W " << window << " q0 " << q0;
          // Row groups of 16 against every visited tile: unmasked means wholly visible.
          for (int r = q0; r < q_end; r += 16)
            for (int kt = first; kt <= lay::forward_last_key_tile(q0, rows, T, Bk); ++kt) {
              const int k0 = kt * Bk;
              if (lay::needs_mask(k0, Bk, r) || lay::needs_window_mask(r + 15, k0, w)) continue;
              for (int t = r; t < std::min(r + 16, T); ++t)
                for (int j = k0; j < k0 + Bk; ++j)
                  ASSERT_TRUE(sees(t, j, window)) << "T " << T << " W " << window << " row " << t;
            }
        }
        for (int kt = 0; kt < d::flash_tile_count(T, Bk); ++kt) {
          const int end = bl::end_query_tile(kt, Bk, Bq, T, w);
          auto tile_seen = [&](int qt) {
            for (int t = qt * Bq; t < std::min(qt * Bq + Bq, T); ++t)
              for (int j = kt * Bk; j < std::min(kt * Bk + Bk, T); ++j)
                if (sees(t, j, window)) return true;
            return false;
          };
          ASSERT_TRUE(tile_seen(end - 1)) << "T " << T << " W " << window << " kt " << kt;
          for (int qt = end; qt < d::flash_tile_count(T, Bq); ++qt)
            ASSERT_FALSE(tile_seen(qt)) << "T " << T << " W " << window << " kt " << kt;
          // Per warp strip of 16 keys: unmasked (not diagonal, no window edge) means visible.
          for (int qt = d::flash_first_query_tile(kt) + 1; qt < end; ++qt)
            for (int r0 = 0; r0 < Bk; r0 += 16) {
              if (lay::needs_window_mask(qt * Bq + Bq - 1, kt * Bk + r0, w)) continue;
              for (int t = qt * Bq; t < std::min(qt * Bq + Bq, T); ++t)
                for (int j = kt * Bk + r0; j < kt * Bk + r0 + 16; ++j)
                  ASSERT_TRUE(sees(t, j, window)) << "T " << T << " W " << window << " kt " << kt;
            }
        }
      }
}

TEST(FlashWindowLayout, WindowTestIsTheDefinitionAndTranslationInvariant) {
  for (int window : {0, 1, 3, 64})
    for (int q = 0; q < 80; ++q)
      for (int k = 0; k < 80; ++k) {
        ASSERT_EQ(lay::window_visible(q, k, window), sees(q, k, window));
        // The kernels test positions relative to a tile's first key.
        ASSERT_EQ(lay::window_visible(q - 64, k - 64, window), sees(q, k, window));
        ASSERT_EQ(bl::window_visible(k, q, window), sees(q, k, window));
      }
}

}  // namespace
