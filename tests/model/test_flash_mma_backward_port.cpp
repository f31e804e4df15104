// Tests of the lane-level CPU emulation of the flash-attention backward kernel
// (tests/cuda/flash_mma_backward_port.hpp, which shares its index arithmetic with the kernel
// through model/detail/flash_mma_backward_layout.hpp): without roundings it must be the fp64 twin
// (detail/flash_attention_reference.hpp, itself held to the naive attention) to fp32 rounding;
// with the kernel's bf16 roundings it must be the rounding port (tests/cuda/flash_port.hpp) to a
// flipped bf16 rounding here and there; at the training shape (head size 64, T = 1024), at ragged
// T (1000, 17), at head size 128, and with grouped queries (groups of 2, 3, 4). The new shared
// accesses (dSᵀ stored from accumulators, read back by ldmatrix .trans) are checked for bank
// conflicts against the hardware's 32 four-byte banks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <random>
#include <set>
#include <vector>

#include "../cuda/flash_mma_backward_port.hpp"
#include "../cuda/flash_port.hpp"
#include "trainkit/model/detail/flash_attention_reference.hpp"
#include "trainkit/model/detail/flash_mma_backward_layout.hpp"

namespace tg = trainkit::test_gpu;
namespace d = trainkit::model::detail;
namespace lay = trainkit::model::detail::flash_mma_backward;

namespace {

// Emulation (fp32, tensor-core summation order) against the fp64 twin, as the largest error over
// the largest magnitude of each gradient (dq, dk, dv: values up to ~10): the forward's 8e-6 on out
// (values of a few units) made relative. Measured: see the printed lines (at most 1.4e-6).
constexpr double tol_fp64 = 8e-6;
// Emulation vs rounding port, both with the kernel's bf16 roundings: the forward's relative (L2)
// distance (mma_port_rounding_distance). Another fp32 summation order flips a bf16 rounding of P or
// dS, or of a result, now and then.
constexpr double tol_rel_rounding = tg::mma_port_rounding_distance;

std::vector<float> random_bf16(std::size_t n, unsigned seed, float spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = tg::bf16_round(dist(rng) * spread);
  return v;
}

struct shape {
  int B, T, C, H, KV = 0;  // KV 0: as many as H
  int kv() const { return KV ? KV : H; }
  int hs() const { return C / H; }
  std::size_t row() const { return std::size_t(C + 2 * kv() * hs()); }
};

// Part p (0 q, 1 k, 2 v) of a (B·T, row) gradient.
std::vector<double> part(const std::vector<float>& g, shape s, int p) {
  const int width = p == 0 ? s.C : s.kv() * s.hs();
  const std::size_t col = p == 0 ? 0 : std::size_t(s.C + (p - 1) * width);
  std::vector<double> r;
  for (std::size_t t = 0; t < std::size_t(s.B) * s.T; ++t)
    for (int c = 0; c < width; ++c) r.push_back(g[t * s.row() + col + std::size_t(c)]);
  return r;
}

void check_against_fp64_twin(shape s, unsigned seed) {
  const int B = s.B, T = s.T, C = s.C, H = s.H, KV = s.kv();
  const auto qkv = random_bf16(std::size_t(B) * T * s.row(), seed, 1.5f);
  const auto dout = random_bf16(std::size_t(B) * T * C, seed + 1000, 1.0f);
  // The forward in fp64; out rounded to bf16 as the kernel stores it, lse to fp32: both passes
  // below read exactly these inputs, so only their arithmetic differs.
  const std::vector<double> qkv_d(qkv.begin(), qkv.end()), dout_d(dout.begin(), dout.end());
  std::vector<double> out_d(std::size_t(B) * T * C), lse_d(std::size_t(B) * H * T);
  d::flash_attention_forward_reference(out_d.data(), lse_d.data(), qkv_d.data(), B, T, C, H, KV);
  std::vector<float> out(out_d.size()), lse(lse_d.size());
  for (std::size_t i = 0; i < out.size(); ++i) out_d[i] = out[i] = tg::bf16_round(float(out_d[i]));
  for (std::size_t i = 0; i < lse.size(); ++i) lse_d[i] = lse[i] = float(lse_d[i]);
  std::vector<double> twin_d(std::size_t(B) * T * s.row());
  d::flash_attention_backward_reference(twin_d.data(), dout_d.data(), qkv_d.data(), out_d.data(),
                                        lse_d.data(), B, T, C, H, KV);
  std::vector<float> emu;
  tg::flash_backward_mma_port(emu, dout, qkv, out, lse, B, T, C, H, KV,
                              {.round_operands = false, .round_out = false});
  for (int p = 0; p < 3; ++p) {
    const auto got = part(emu, s, p);
    std::vector<double> want;  // from the fp64 values themselves, not their fp32 copies
    {
      const int width = p == 0 ? C : KV * s.hs();
      const std::size_t col = p == 0 ? 0 : std::size_t(C + (p - 1) * width);
      for (std::size_t t = 0; t < std::size_t(B) * T; ++t)
        for (int c = 0; c < width; ++c) want.push_back(twin_d[t * s.row() + col + std::size_t(c)]);
    }
    double err = 0, mag = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      err = std::isfinite(got[i]) ? std::max(err, std::abs(got[i] - want[i])) : INFINITY;
      mag = std::max(mag, std::abs(want[i]));
    }
    std::printf("T=%d hs=%d H=%d KV=%d: d%c max |emu - fp64| %.2e of max |d%c| %.2f: %.2e\n", T,
                s.hs(), H, KV, "qkv"[p], err, "qkv"[p], mag, err / mag);
    EXPECT_LT(err / mag, tol_fp64)
        << "d"
        << "qkv"[p] << ", T=" << T << " hs=" << s.hs() << " H=" << H << " KV=" << KV;
    EXPECT_GT(mag, 0.1) << "a gradient this small would hide errors";
  }
}

void check_against_rounding_port(shape s, unsigned seed) {
  const int B = s.B, T = s.T, C = s.C, H = s.H, KV = s.kv();
  const auto qkv = random_bf16(std::size_t(B) * T * s.row(), seed, 1.5f);
  const auto dout = random_bf16(std::size_t(B) * T * C, seed + 1000, 1.0f);
  std::vector<float> out, lse, port, emu;
  tg::flash_forward_port(out, lse, qkv, B, T, C, H, KV);
  tg::flash_backward_port(port, dout, qkv, out, lse, B, T, C, H, KV);
  tg::flash_backward_mma_port(emu, dout, qkv, out, lse, B, T, C, H, KV);
  for (int p = 0; p < 3; ++p) {
    const auto got = part(emu, s, p), want = part(port, s, p);
    double num = 0, den = 0, worst = 0;
    std::size_t moved = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << "d"
                                         << "qkv"[p] << " " << i;
      num += (got[i] - want[i]) * (got[i] - want[i]);
      den += want[i] * want[i];
      worst = std::max(worst, std::abs(got[i] - want[i]));
      moved += got[i] != want[i];
    }
    const double rel = std::sqrt(num / den);
    std::printf("T=%d hs=%d H=%d KV=%d: d%c relative distance %.2e, worst %.2e, %zu of %zu moved\n",
                T, s.hs(), H, KV, "qkv"[p], rel, worst, moved, got.size());
    EXPECT_LT(rel, tol_rel_rounding) << "d"
                                     << "qkv"[p] << ", T=" << T << " hs=" << s.hs();
  }
}

TEST(FlashMmaBackwardPort, MatchesTheFp64TwinAtTheTrainingShape) {
  check_against_fp64_twin({1, 1024, 128, 2}, 51);  // head size 64, T = 1024
}

TEST(FlashMmaBackwardPort, MatchesTheFp64TwinAtRaggedTAndHead128) {
  check_against_fp64_twin({1, 1000, 64, 1}, 52);
  check_against_fp64_twin({2, 17, 128, 2}, 53);
  check_against_fp64_twin({1, 1024, 128, 1}, 54);  // head size 128
  check_against_fp64_twin({1, 1000, 128, 1}, 55);
  check_against_fp64_twin({1, 17, 256, 2}, 56);
}

// Grouped queries: groups of 2, 3 and 4 (one KV head), head sizes 64 and 128, T on and off the
// tile and under it: dK and dV sum over the group in the warps' accumulators.
TEST(FlashMmaBackwardPort, MatchesTheFp64TwinWithGroupedQueries) {
  check_against_fp64_twin({1, 1024, 256, 4, 2}, 61);  // hs 64, groups of 2, T = 1024
  check_against_fp64_twin({2, 67, 384, 6, 2}, 62);    // groups of 3, ragged T
  check_against_fp64_twin({1, 1000, 384, 6, 2}, 66);  // hs 64, groups of 3, T = 1000
  check_against_fp64_twin({1, 1024, 512, 4, 2}, 67);  // hs 128, groups of 2, T = 1024
  check_against_fp64_twin({1, 1000, 512, 4, 2}, 63);  // hs 128, groups of 2, T = 1000
  check_against_fp64_twin({1, 17, 256, 4, 1}, 64);    // shorter than a tile, one KV head
  check_against_fp64_twin({1, 17, 512, 4, 1}, 65);    // hs 128, T = 17
}

TEST(FlashMmaBackwardPort, MatchesTheRoundingPortWithTheKernelsRoundings) {
  check_against_rounding_port({1, 1024, 128, 2}, 71);
  check_against_rounding_port({1, 1000, 128, 1}, 72);
  check_against_rounding_port({2, 17, 128, 2}, 73);
  check_against_rounding_port({1, 1000, 256, 4, 2}, 74);  // GQA
  check_against_rounding_port({1, 130, 384, 6, 3}, 75);
  check_against_rounding_port({1, 1024, 512, 4, 1}, 76);  // hs 128, one KV head
}

// Bank of the 4-byte word holding bf16 element offset `e` of a tile (32 banks of 4 bytes).
int bank(int e) {
  return (e * 2 / 4) % 32;
}

TEST(FlashMmaBackwardLayout, DsTileStoresAndLoadsAreFreeOfBankConflicts) {
  constexpr int Bq = d::flash_tiles::block_q, Bk = d::flash_tiles::block_k;
  // A warp stores one accumulator's register pair (c0c1 or c2c3: two bf16, one word) per lane in
  // one instruction: 32 words, which must fall in 32 banks.
  for (int r0 = 0; r0 < Bk; r0 += 16)
    for (int n = 0; n < Bq / 8; ++n)
      for (int half = 0; half < 2; ++half) {
        std::set<int> banks;
        for (int lane = 0; lane < 32; ++lane) {
          const int i = 2 * half;
          EXPECT_EQ(lay::acc_query(lane, i) % 2, 0) << "a pair starts on an even column";
          banks.insert(bank(
              lay::ds_offset(r0 + lay::acc_key(lane, i), 8 * n + lay::acc_query(lane, i), Bq)));
        }
        EXPECT_EQ(banks.size(), 32u) << "keys " << r0 << " queries " << 8 * n << " half " << half;
      }
  // ldmatrix .x4 .trans of dS: each phase (8 lanes, 16 bytes each) must cover 32 banks.
  for (int k0 = 0; k0 < Bk; k0 += 16)
    for (int q0 = 0; q0 < Bq; q0 += 16)
      for (int j = 0; j < 4; ++j) {
        std::set<int> banks;
        for (int lane = 8 * j; lane < 8 * j + 8; ++lane)
          for (int w = 0; w < 4; ++w)
            banks.insert(bank(lay::ds_offset(k0 + lay::ldsm_ds_key(lane),
                                             q0 + lay::ldsm_ds_query(lane), Bq)) +
                         w);
        EXPECT_EQ(banks.size(), 32u) << "keys " << k0 << " queries " << q0 << " matrix " << j;
      }
  // The tile: every (key, query) at its own element.
  std::vector<int> hit(std::size_t(Bk) * Bq, 0);
  for (int key = 0; key < Bk; ++key)
    for (int q = 0; q < Bq; ++q) ++hit[std::size_t(lay::ds_offset(key, q, Bq))];
  EXPECT_EQ(std::count(hit.begin(), hit.end(), 1), Bk * Bq);
}

TEST(FlashMmaBackwardLayout, SwizzledStepIsTheSwizzleFromEveryLanesBase) {
  // The kernel steps from one base per lane and pattern; the step must land where the swizzle
  // puts the element, for every lane column the ldmatrix patterns use.
  namespace fwd = trainkit::model::detail::flash_mma;
  for (int width : {64, 128})
    for (int lane = 0; lane < 32; ++lane) {
      const int rows[] = {lay::ldsm_a_row(lane), lay::ldsm_bt_row(lane),
                          lay::ldsm_trans_b_row(lane), lay::ldsm_ds_key(lane)};
      const int cols[] = {lay::ldsm_a_col(lane), lay::ldsm_bt_col(lane),
                          lay::ldsm_trans_b_col(lane), lay::ldsm_ds_query(lane)};
      for (int p = 0; p < 4; ++p)
        for (int r0 = 0; r0 < 64; r0 += 16)  // a warp's strip, as the a pattern's base
          for (int dr = 0; dr + r0 < 64; dr += 16)
            for (int dc = 0; dc + 16 <= width; dc += 16) {
              const int base = fwd::swizzled(r0 + rows[p], cols[p], width);
              ASSERT_EQ(lay::swizzled_step(base, dr, dc, width),
                        fwd::swizzled(r0 + rows[p] + dr, cols[p] + dc, width))
                  << "width " << width << " lane " << lane << " pattern " << p << " dr " << dr
                  << " dc " << dc;
            }
    }
}

TEST(FlashMmaBackwardLayout, TransposedMaskIsTheCausalOne) {
  // Key k is seen by query t on the diagonal tile exactly when k ≤ t.
  for (int key = 0; key < 64; ++key)
    for (int q = 0; q < 64; ++q) EXPECT_EQ(lay::diagonal_visible(key, q), key <= q);
}

}  // namespace
