// Tests of the lane-level CPU emulation of the flash-attention forward kernel
// (tests/cuda/flash_mma_port.hpp, which shares its index arithmetic with the kernel through
// model/detail/flash_mma_layout.hpp): without roundings it must be the fp32 twin of the tiling
// (detail/flash_attention_reference.hpp) to fp32 summation order, with the kernel's bf16
// roundings it must be the rounding port (tests/cuda/flash_port.hpp) to a bf16 rounding flip;
// at the training shape (head size 64, T = 1024), at ragged T (1000, 17) and head size 128. The
// layout itself is checked for what it is for: every ldmatrix phase and every cp.async quarter
// warp touches 32 different banks.
// Slips planted while writing this (each reverted): K's ldmatrix column ldsm_bt_col taking
// lane / 16, the A/V row mapping ldsm_a_row taking lane / 16, the diagonal test col < row, and O
// rescaled by the other row's factor — each fails the fp32-twin cases (out off by 3 to 8, or NaN).
// Head size 64 runs 128-row blocks (32 rows a warp, K and V fragments shared by two row groups):
// planted (reverted), needs_mask testing k0 > first_row (the tile's far keys left unmasked for
// a warp's second group: out off by 4.6) and the last key tile one short when the last real
// query is a tile's first key (T = 129: out off by 3.8e-2) each fail the twin cases.
// Grouped-query attention (KV < H): the emulation takes K and V at the offsets the kernel takes
// (detail/attention_heads.hpp) and must still be the twin. Both read the one head map, so a slip
// in the map itself moves them together: that is caught where the twin is held to llama_cpu's
// naive GQA attention (test_flash_attention_reference). Planted here (reverted): the emulation's K
// pointer taken at q + C, GPT-2's offset, fails the GQA cases (out off by ~2).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <set>
#include <vector>

#include "../cuda/flash_mma_port.hpp"
#include "../cuda/flash_port.hpp"
#include "trainkit/model/detail/flash_attention_reference.hpp"
#include "trainkit/model/detail/flash_mma_layout.hpp"

namespace tg = trainkit::test_gpu;
namespace d = trainkit::model::detail;
namespace lay = trainkit::model::detail::flash_mma;

namespace {

// fp32 twin vs emulation: only the order of fp32 sums differs (the tensor-core product sums 16
// terms per step, the twin a whole row); measured at most 3.1e-6 on out and 2.9e-6 on lse (values
// of a few units), so 8e-6 and 1e-5 leave room for other seeds, and nothing for a slip.
constexpr double tol_out_fp32 = 8e-6;
constexpr double tol_lse_fp32 = 1e-5;
// Emulation vs rounding port, both with the kernel's bf16 roundings (flash_mma_port.hpp says
// what was measured); the GPU test holds the kernel to the same distance from the emulation.
constexpr double tol_rel_rounding = tg::mma_port_rounding_distance;

std::vector<float> random_bf16(std::size_t n, unsigned seed, float spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = tg::bf16_round(dist(rng) * spread);
  return v;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    m = std::max(m, std::abs(double(a[i]) - double(b[i])));
  }
  return m;
}

struct shape {
  int B, T, C, H, KV = 0;  // KV 0: as many as H
  int kv() const { return KV ? KV : H; }
  std::size_t qkv_size() const { return std::size_t(B) * T * (C + 2 * kv() * (C / H)); }
};

void check_against_twin(shape s, unsigned seed) {
  const int B = s.B, T = s.T, C = s.C, H = s.H, KV = s.kv();
  // Spread 1.5: peaked rows, so the running maximum moves between key tiles and the rescale
  // matters.
  const auto qkv = random_bf16(s.qkv_size(), seed, 1.5f);
  std::vector<float> out, lse;
  tg::flash_forward_mma_port(out, lse, qkv, B, T, C, H, KV, {.round_p = false, .round_out = false});
  std::vector<float> twin_out(std::size_t(B) * T * C), twin_lse(std::size_t(B) * H * T);
  d::flash_attention_forward_reference(twin_out.data(), twin_lse.data(), qkv.data(), B, T, C, H,
                                       KV);
  const double e_out = max_abs_diff(out, twin_out), e_lse = max_abs_diff(lse, twin_lse);
  std::printf("T=%d hs=%d H=%d KV=%d: |out - twin| %.2e, |lse - twin| %.2e\n", T, C / H, H, KV,
              e_out, e_lse);
  EXPECT_LT(e_out, tol_out_fp32) << "out, T=" << T << " hs=" << C / H;
  EXPECT_LT(e_lse, tol_lse_fp32) << "lse, T=" << T << " hs=" << C / H;
}

void check_against_rounding_port(shape s, unsigned seed) {
  const int B = s.B, T = s.T, C = s.C, H = s.H, KV = s.kv();
  const auto qkv = random_bf16(s.qkv_size(), seed, 1.5f);
  std::vector<float> out, lse, port_out, port_lse;
  tg::flash_forward_mma_port(out, lse, qkv, B, T, C, H, KV);
  tg::flash_forward_port(port_out, port_lse, qkv, B, T, C, H, KV);
  // Both round P and out to bf16 at the same places; another fp32 summation order flips a
  // rounding of P now and then (a bf16 ulp of P, times V, over l: up to ~5e-3 on one output)
  // or of out (one bf16 ulp). Measured: a relative (L2) distance of 1.1e-4 (T 1024, hs 64) and
  // 5e-5, and about one output in 1000 moved (worst 3.9e-3), where the rounding port is ~3e-3 from
  // the exact attention.
  double num = 0, den = 0;
  int flips = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    ASSERT_TRUE(std::isfinite(out[i])) << i;
    num += (double(out[i]) - port_out[i]) * (double(out[i]) - port_out[i]);
    den += double(port_out[i]) * port_out[i];
    flips += out[i] != port_out[i];
  }
  const double rel = std::sqrt(num / den), worst = max_abs_diff(out, port_out);
  std::printf("T=%d hs=%d: relative distance %.2e, worst %.2e, %d of %zu outputs moved\n", T, C / H,
              rel, worst, flips, out.size());
  EXPECT_LT(rel, tol_rel_rounding) << "T=" << T;
  EXPECT_LT(worst, 8e-3) << "T=" << T;
  EXPECT_LT(flips, int(out.size() / 100)) << "more than rounding flips";
  EXPECT_LT(max_abs_diff(lse, port_lse), tol_lse_fp32);
}

TEST(FlashMmaPort, MatchesTheFp32TwinAtTheTrainingShape) {
  check_against_twin({1, 1024, 128, 2}, 5);  // head size 64, T = 1024
}

TEST(FlashMmaPort, MatchesTheFp32TwinAtRaggedT) {
  check_against_twin({1, 1000, 64, 1}, 6);
  check_against_twin({2, 17, 128, 2}, 7);
  check_against_twin({1, 1000, 128, 1}, 8);  // head size 128
  check_against_twin({1, 17, 256, 2}, 9);
  check_against_twin({1, 1024, 128, 1}, 10);
  check_against_twin({1, 129, 256, 2}, 11);
  // Head size 64 runs 128-row blocks (two row groups a warp): one row past a block, and a block
  // whose second half is partly past T.
  check_against_twin({1, 129, 128, 2}, 15);
  check_against_twin({1, 193, 64, 1}, 16);
}

// Grouped queries: groups of 2, 3 and 4 (one KV head), head sizes 64 and 128, T on and off the
// tile and under it.
TEST(FlashMmaPort, MatchesTheFp32TwinWithGroupedQueries) {
  check_against_twin({1, 256, 256, 4, 2}, 31);  // hs 64, groups of 2
  check_against_twin({2, 67, 384, 6, 2}, 32);   // groups of 3, ragged T
  check_against_twin({1, 129, 512, 4, 1}, 33);  // hs 128, one KV head
  check_against_twin({1, 17, 256, 4, 1}, 34);   // shorter than a tile
}

TEST(FlashMmaPort, MatchesTheRoundingPortWithGroupedQueries) {
  check_against_rounding_port({1, 1000, 256, 4, 2}, 35);
  check_against_rounding_port({1, 130, 384, 6, 3}, 36);
}

TEST(FlashMmaPort, MatchesTheRoundingPortWithTheKernelsRoundings) {
  check_against_rounding_port({1, 1024, 64, 1}, 12);
  check_against_rounding_port({1, 1000, 128, 1}, 13);
  check_against_rounding_port({1, 17, 64, 1}, 14);
}

// Bank of a 4-byte word at bf16 element offset `e` of a tile.
int bank(int e) {
  return (e * 2 / 4) % 32;
}

TEST(FlashMmaLayout, LdmatrixPhasesAndCopiesAreFreeOfBankConflicts) {
  for (int hs : {64, 128}) {
    // ldmatrix .x4 reads one 8 × 16-byte matrix per phase: lanes 8j..8j+7 must cover 32 banks.
    for (int r0 = 0; r0 < 64; r0 += 16)
      for (int c0 = 0; c0 < hs; c0 += 16)
        for (int j = 0; j < 4; ++j) {
          std::set<int> a_banks, bt_banks;
          for (int lane = 8 * j; lane < 8 * j + 8; ++lane)
            for (int w = 0; w < 4; ++w) {
              a_banks.insert(
                  bank(lay::swizzled(r0 + lay::ldsm_a_row(lane), c0 + lay::ldsm_a_col(lane), hs)) +
                  w);
              bt_banks.insert(bank(lay::swizzled(r0 + lay::ldsm_bt_row(lane),
                                                 c0 + lay::ldsm_bt_col(lane), hs)) +
                              w);
            }
          EXPECT_EQ(a_banks.size(), 32u) << "hs " << hs << " rows " << r0 << " cols " << c0;
          EXPECT_EQ(bt_banks.size(), 32u) << "hs " << hs << " rows " << r0 << " cols " << c0;
        }
    // cp.async: 16 bytes a thread, so a quarter warp's 8 chunks must cover 32 banks; and every
    // element of the tile is written exactly once.
    constexpr int threads = 128;
    const int per_thread = 64 * hs / lay::chunk / threads;
    std::vector<int> written(std::size_t(64) * hs, 0);
    for (int i = 0; i < per_thread; ++i)
      for (int q0 = 0; q0 < threads; q0 += 8) {
        std::set<int> banks;
        for (int tid = q0; tid < q0 + 8; ++tid) {
          const int r = lay::copy_row(tid, i, threads, hs), c = lay::copy_col(tid, i, threads, hs);
          for (int w = 0; w < 4; ++w) banks.insert(bank(lay::swizzled(r, c, hs)) + w);
          for (int e = 0; e < lay::chunk; ++e) ++written[std::size_t(lay::swizzled(r, c, hs) + e)];
        }
        EXPECT_EQ(banks.size(), 32u) << "hs " << hs << " copy step " << i;
      }
    EXPECT_EQ(std::count(written.begin(), written.end(), 1), 64 * hs) << "hs " << hs;
  }
}

TEST(FlashMmaLayout, AccumulatorRowsBelongToOneQuad) {
  // The row statistics reduce over lane bits 0 and 1 only: a row must live in one quad.
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(lay::acc_row(lane, i), lay::acc_row(lane ^ 1, i));
      EXPECT_EQ(lay::acc_row(lane, i), lay::acc_row(lane ^ 3, i));
      EXPECT_NE(lay::acc_row(lane, i), lay::acc_row(lane ^ 4, i));
    }
}

}  // namespace
