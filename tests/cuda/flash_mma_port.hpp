// tests/cuda/flash_mma_port.hpp — a CPU emulation of the flash-attention forward kernel
// (model/cuda/flash_attention.cuh) at the level of its lanes and registers, so the kernel's data
// flow is proven without a GPU.
//
// Two halves. `hw` models what the hardware does, written from the PTX ISA's tables and
// independent of the kernel's headers: `ldmatrix .x4` (lanes 8j..8j+7 give the row addresses of
// matrix j; lane L receives row L/4, columns 2(L%4), 2(L%4)+1 of each matrix, or with `.trans`
// rows 2(L%4), 2(L%4)+1 of column L/4), `mma.m16n8k16.row.col` with the ISA's fragment layouts
// for .bf16 (A: a0..a7 in four registers, row groupID (+8 for a2,a3,a6,a7), column
// 2·threadID_in_group + (i&1) (+8 for a4..a7); B: row 2·threadID_in_group + (i&1) (+8 for b2,b3),
// column groupID; C/D: row groupID (+8 for c2,c3), column 2·threadID_in_group + (i&1)), and
// `shfl.xor`. The other half, `flash_forward_mma_port`, walks the kernel's steps one warp at a
// time (each of its m16 row groups: two at hs 64, one at hs 128, every K and V fragment loaded
// once for all of them) with the index arithmetic of model/detail/flash_mma_layout.hpp — the header
// the kernel itself uses — so a slip in a swizzle, an ldmatrix address, a fragment's reuse as an
// operand, the diagonal mask or the online rescale shows up here as a wrong attention.
//
// Options: `round_p` rounds P to bf16 before the P·V product (the kernel does); `round_out`
// rounds the output to bf16 (the kernel does). With both off the emulation is an fp32 attention
// and must match the fp32 twin (detail/flash_attention_reference.hpp) to fp32 summation order;
// with both on it must match flash_port.hpp's rounding port. With grouped-query attention (KV < H)
// each query head's K and V tiles come from its group's head at the kernel's offsets
// (detail/attention_heads.hpp, which the kernel uses too).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "trainkit/core/bf16.hpp"
#include "trainkit/model/detail/flash_attention_reference.hpp"
#include "trainkit/model/detail/flash_mma_layout.hpp"

namespace trainkit::test_gpu {

namespace hw {

constexpr int lanes = 32;
using reg = std::array<float, 2>;  // a .b32 register holding two bf16: [0] low half, [1] high
template <int N>
using warp_regs = std::array<std::array<reg, N>, lanes>;   // [lane][register]
using warp_acc = std::array<std::array<float, 4>, lanes>;  // an m16n8 fp32 accumulator
using warp_scalar = std::array<float, lanes>;

inline float to_bf16(float x) {
  return trainkit::bf16::from_float(x).to_float();
}

/// ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: `row_addr[L]` is the element offset lane L
/// gives, the start of 8 contiguous bf16 of row L%8 of matrix L/8.
inline warp_regs<4> ldmatrix_x4(const std::vector<float>& smem,
                                const std::array<int, lanes>& row_addr, bool trans) {
  warp_regs<4> r{};
  for (int L = 0; L < lanes; ++L)
    for (int j = 0; j < 4; ++j)
      for (int e = 0; e < 2; ++e) {
        const int a = trans ? row_addr[8 * j + 2 * (L % 4) + e] + L / 4
                            : row_addr[8 * j + L / 4] + 2 * (L % 4) + e;
        r[L][j][e] = smem[std::size_t(a)];
      }
  return r;
}

/// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: d = a·b + c, per lane a[4], b[2], c[4].
inline void mma_m16n8k16(warp_acc& d, const std::array<std::array<reg, 4>, lanes>& a,
                         const std::array<std::array<reg, 2>, lanes>& b) {
  float A[16][16], B[16][8];
  for (int L = 0; L < lanes; ++L) {
    const int group = L / 4, tig = L % 4;
    for (int i = 0; i < 8; ++i) {  // a0..a7: register i/2, half i%2
      const int row = group + ((i / 2) % 2 == 1 ? 8 : 0);
      const int col = 2 * tig + (i & 1) + (i >= 4 ? 8 : 0);
      A[row][col] = a[L][i / 2][i % 2];
    }
    for (int i = 0; i < 4; ++i) {  // b0..b3
      const int k = 2 * tig + (i & 1) + (i >= 2 ? 8 : 0);
      B[k][group] = b[L][i / 2][i % 2];
    }
  }
  for (int L = 0; L < lanes; ++L) {
    const int group = L / 4, tig = L % 4;
    for (int i = 0; i < 4; ++i) {  // c0..c3
      const int row = group + (i >= 2 ? 8 : 0), col = 2 * tig + (i & 1);
      float acc = 0;
      for (int k = 0; k < 16; ++k) acc += A[row][k] * B[k][col];
      d[L][i] += acc;
    }
  }
}

inline warp_scalar shfl_xor(const warp_scalar& v, int mask) {
  warp_scalar r{};
  for (int L = 0; L < lanes; ++L) r[std::size_t(L)] = v[std::size_t(L ^ mask)];
  return r;
}

}  // namespace hw

/// How far the emulation (with the kernel's roundings) may be from another computation with the
/// same roundings but another fp32 summation order or another exp2: a relative (L2) distance.
/// Measured on the CPU against the rounding port (flash_port.hpp): 1.1e-4 at T 1024, hs 64 and
/// 5e-5 at T 1000, hs 128, from about one output in 1000 moved by a flipped bf16 rounding of P
/// or of out. The kernel's own distance to the emulation has never been measured (no GPU run).
inline constexpr double mma_port_rounding_distance = 3e-4;
/// lse (natural log, values of a few units) against the emulation: fp32 summation order and
/// exp2/log2 ulps. CPU emulation vs the fp32 twin: at most 2.9e-6.
inline constexpr double mma_port_lse_distance = 2e-5;

struct mma_port_options {
  bool round_p = true;    // P to bf16 for the P·V product, as the kernel
  bool round_out = true;  // out to bf16, as the kernel
  int window = 0;         // sliding window in keys (0 = full causal), as the launcher's argument
};

/// out (B, T, C), lse (B, H, T) from qkv (B, T, (H + 2·KV)·hs) holding bf16 values, the kernel's
/// way; C = H·hs.
inline void flash_forward_mma_port(std::vector<float>& out, std::vector<float>& lse,
                                   const std::vector<float>& qkv, int B, int T, int C, int H,
                                   int KV, mma_port_options opt = {}) {
  namespace d = trainkit::model::detail;
  namespace lay = trainkit::model::detail::flash_mma;
  constexpr int Bq = d::flash_tiles::block_q, Bk = d::flash_tiles::block_k;
  constexpr int warps = 4, threads = warps * hw::lanes, L = hw::lanes;
  const d::attention_heads heads{H, KV, C / H};
  const int hs = heads.hs;
  // The kernel's block: 4 warps of `groups` m16 row groups each.
  const int groups = lay::forward_row_groups(hs), rows = lay::forward_block_rows(hs);
  const std::ptrdiff_t row = heads.row();
  const float scale_log2 = 1.0f / std::sqrt(float(hs)) * float(d::flash_log2e);
  const float inf = std::numeric_limits<float>::infinity();
  const int window = lay::effective_window(opt.window, T);  // the launcher's
  out.assign(std::size_t(B) * T * C, std::numeric_limits<float>::quiet_NaN());
  lse.assign(std::size_t(B) * H * T, std::numeric_limits<float>::quiet_NaN());

  const std::size_t tile = std::size_t(Bk) * hs;
  std::vector<float> sq(std::size_t(rows) * hs),
      sk[2] = {std::vector<float>(tile), std::vector<float>(tile)},
      sv[2] = {std::vector<float>(tile), std::vector<float>(tile)};
  // cp.async 16 bytes per thread and step, zero-filled past T, into a swizzled 64-row tile at
  // element `at` of `dst`.
  auto copy_tile = [&](std::vector<float>& dst, std::size_t at, const float* src, int first) {
    const int per_thread = Bq * hs / lay::chunk / threads;
    for (int tid = 0; tid < threads; ++tid)
      for (int i = 0; i < per_thread; ++i) {
        const int r = lay::copy_row(tid, i, threads, hs), c = lay::copy_col(tid, i, threads, hs);
        for (int e = 0; e < lay::chunk; ++e)
          dst[at + std::size_t(lay::swizzled(r, c, hs) + e)] =
              first + r < T ? src[(first + r) * row + c + e] : 0.0f;
      }
  };

  const int tiles = d::flash_tile_count(T, rows);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const float* base = qkv.data() + std::ptrdiff_t(b) * T * row;
      const float* q = base + heads.q_col(h);
      const float* k = base + heads.k_col(h);
      const float* v = base + heads.v_col(h);
      for (int qt = 0; qt < tiles; ++qt) {
        const int q0 = qt * rows, last = lay::forward_last_key_tile(q0, rows, T, Bk);
        const int first = lay::forward_first_key_tile(q0, window, Bk);
        for (int part = 0; part < rows / Bq; ++part)
          copy_tile(sq, std::size_t(part) * Bq * hs, q, q0 + part * Bq);
        copy_tile(sk[0], 0, k, first * Bk);
        copy_tile(sv[0], 0, v, first * Bk);
        struct group_state {
          std::vector<hw::warp_regs<4>> qa;  // the group's Q rows as A fragments, per 16 dims
          std::vector<hw::warp_acc> o;       // O (16 × hs): hs / 8 accumulators
          std::array<std::array<float, 2>, L> m, lsum;  // rows group and group + 8 of each lane
        };
        // [warp][group]: warp w's group g holds tile rows 16·(groups·w + g)..
        std::vector<std::vector<group_state>> ws(warps, std::vector<group_state>(groups));
        for (int w = 0; w < warps; ++w)
          for (int g = 0; g < groups; ++g) {
            group_state& st = ws[std::size_t(w)][std::size_t(g)];
            const int r0 = 16 * groups * w + 16 * g;
            st.qa.resize(std::size_t(hs / 16));
            for (int kk = 0; kk < hs / 16; ++kk) {
              std::array<int, L> addr{};
              for (int l = 0; l < L; ++l)
                addr[std::size_t(l)] =
                    lay::swizzled(r0 + lay::ldsm_a_row(l), 16 * kk + lay::ldsm_a_col(l), hs);
              st.qa[std::size_t(kk)] = hw::ldmatrix_x4(sq, addr, false);
            }
            st.o.assign(std::size_t(hs / 8), hw::warp_acc{});
            // Windowed, from the lowest finite float (a row may see no key of its first tiles).
            const float m0 = window > 0 ? -std::numeric_limits<float>::max() : -inf;
            for (auto& x : st.m) x = {m0, m0};
            for (auto& x : st.lsum) x = {0.0f, 0.0f};
          }
        for (int kt = first; kt <= last; ++kt) {
          const int stage = (kt - first) % 2, k0 = kt * Bk;
          // Double buffering: the block copies the next K, V tiles into the other stage before
          // it works on this one.
          if (kt + 1 <= last) {
            copy_tile(sk[1 - stage], 0, k, (kt + 1) * Bk);
            copy_tile(sv[1 - stage], 0, v, (kt + 1) * Bk);
          }
          for (int w = 0; w < warps; ++w) {
            // S (16 × 64 per group) = Q rows · Kᵀ: each K fragment loaded once for all groups.
            std::vector<std::array<hw::warp_acc, Bk / 8>> s(static_cast<std::size_t>(groups));
            for (int kk = 0; kk < hs / 16; ++kk)
              for (int np = 0; np < Bk / 16; ++np) {
                std::array<int, L> addr{};
                for (int l = 0; l < L; ++l)
                  addr[std::size_t(l)] = lay::swizzled(16 * np + lay::ldsm_bt_row(l),
                                                       16 * kk + lay::ldsm_bt_col(l), hs);
                const auto kr = hw::ldmatrix_x4(sk[stage], addr, false);
                std::array<std::array<hw::reg, 2>, L> b0{}, b1{};
                for (int l = 0; l < L; ++l) {
                  b0[std::size_t(l)] = {kr[std::size_t(l)][0], kr[std::size_t(l)][1]};
                  b1[std::size_t(l)] = {kr[std::size_t(l)][2], kr[std::size_t(l)][3]};
                }
                for (int g = 0; g < groups; ++g) {
                  const auto& qa = ws[std::size_t(w)][std::size_t(g)].qa;
                  hw::mma_m16n8k16(s[std::size_t(g)][std::size_t(2 * np)], qa[std::size_t(kk)], b0);
                  hw::mma_m16n8k16(s[std::size_t(g)][std::size_t(2 * np + 1)], qa[std::size_t(kk)],
                                   b1);
                }
              }
            for (int g = 0; g < groups; ++g) {
              auto& sg = s[std::size_t(g)];
              auto& o = ws[std::size_t(w)][std::size_t(g)].o;
              auto& m = ws[std::size_t(w)][std::size_t(g)].m;
              auto& lsum = ws[std::size_t(w)][std::size_t(g)].lsum;
              const int first_row = q0 + 16 * groups * w + 16 * g;
              const bool crossing = lay::needs_mask(k0, Bk, first_row) ||
                                    lay::needs_window_mask(first_row + 15, k0, window);
              // Scale to base 2; mask where the tile crosses the group's first row; row maxima
              // over the quad.
              std::array<std::array<float, 2>, L> mx;
              for (auto& x : mx) x = {-inf, -inf};
              for (int n = 0; n < Bk / 8; ++n)
                for (int l = 0; l < L; ++l)
                  for (int i = 0; i < 4; ++i) {
                    float& x = sg[std::size_t(n)][std::size_t(l)][std::size_t(i)];
                    x *= scale_log2;
                    // Windowed, the kernel's relative positions (from the tile's first key).
                    if (crossing &&
                        !(window > 0 ? lay::window_visible(first_row - k0 + lay::acc_row(l, i),
                                                           8 * n + lay::acc_col(l, i), window)
                                     : lay::causal_visible(first_row + lay::acc_row(l, i),
                                                           k0 + 8 * n + lay::acc_col(l, i))))
                      x = -inf;
                    mx[std::size_t(l)][std::size_t(i / 2)] =
                        std::max(mx[std::size_t(l)][std::size_t(i / 2)], x);
                  }
              std::array<std::array<float, 2>, L> corr;
              for (int half = 0; half < 2; ++half) {
                hw::warp_scalar x{};
                for (int l = 0; l < L; ++l)
                  x[std::size_t(l)] = mx[std::size_t(l)][std::size_t(half)];
                for (int mask = 1; mask <= 2; mask *= 2) {
                  const auto y = hw::shfl_xor(x, mask);
                  for (int l = 0; l < L; ++l)
                    x[std::size_t(l)] = std::max(x[std::size_t(l)], y[std::size_t(l)]);
                }
                for (int l = 0; l < L; ++l) {
                  const float m_new =
                      std::max(m[std::size_t(l)][std::size_t(half)], x[std::size_t(l)]);
                  corr[std::size_t(l)][std::size_t(half)] =
                      std::exp2(m[std::size_t(l)][std::size_t(half)] - m_new);
                  m[std::size_t(l)][std::size_t(half)] = m_new;
                }
              }
              // P = 2^(s − m'), the lane's share of the row sums, O rescaled.
              for (int l = 0; l < L; ++l) {
                std::array<float, 2> sum{0.0f, 0.0f};
                for (int n = 0; n < Bk / 8; ++n)
                  for (int i = 0; i < 4; ++i) {
                    float& x = sg[std::size_t(n)][std::size_t(l)][std::size_t(i)];
                    x = std::exp2(x - m[std::size_t(l)][std::size_t(i / 2)]);
                    sum[std::size_t(i / 2)] += x;
                  }
                for (int half = 0; half < 2; ++half)
                  lsum[std::size_t(l)][std::size_t(half)] =
                      lsum[std::size_t(l)][std::size_t(half)] *
                          corr[std::size_t(l)][std::size_t(half)] +
                      sum[std::size_t(half)];
                for (auto& acc : o)
                  for (int i = 0; i < 4; ++i)
                    acc[std::size_t(l)][std::size_t(i)] *= corr[std::size_t(l)][std::size_t(i / 2)];
              }
            }
            // O += P · V: the accumulators of key columns 16kk.. become the A fragment; each V
            // fragment loaded once for all groups.
            const auto rnd = [&](float x) { return opt.round_p ? hw::to_bf16(x) : x; };
            for (int kk = 0; kk < Bk / 16; ++kk) {
              std::vector<hw::warp_regs<4>> pa(static_cast<std::size_t>(groups));
              for (int g = 0; g < groups; ++g)
                for (int l = 0; l < L; ++l) {
                  const auto& lo = s[std::size_t(g)][std::size_t(2 * kk)][std::size_t(l)];
                  const auto& hi = s[std::size_t(g)][std::size_t(2 * kk + 1)][std::size_t(l)];
                  pa[std::size_t(g)][std::size_t(l)] = {
                      hw::reg{rnd(lo[0]), rnd(lo[1])}, hw::reg{rnd(lo[2]), rnd(lo[3])},
                      hw::reg{rnd(hi[0]), rnd(hi[1])}, hw::reg{rnd(hi[2]), rnd(hi[3])}};
                }
              for (int dp = 0; dp < hs / 16; ++dp) {
                std::array<int, L> addr{};
                for (int l2 = 0; l2 < L; ++l2)
                  addr[std::size_t(l2)] = lay::swizzled(16 * kk + lay::ldsm_a_row(l2),
                                                        16 * dp + lay::ldsm_a_col(l2), hs);
                const auto vr = hw::ldmatrix_x4(sv[stage], addr, true);
                std::array<std::array<hw::reg, 2>, L> b0{}, b1{};
                for (int l2 = 0; l2 < L; ++l2) {
                  b0[std::size_t(l2)] = {vr[std::size_t(l2)][0], vr[std::size_t(l2)][1]};
                  b1[std::size_t(l2)] = {vr[std::size_t(l2)][2], vr[std::size_t(l2)][3]};
                }
                for (int g = 0; g < groups; ++g) {
                  auto& o = ws[std::size_t(w)][std::size_t(g)].o;
                  hw::mma_m16n8k16(o[std::size_t(2 * dp)], pa[std::size_t(g)], b0);
                  hw::mma_m16n8k16(o[std::size_t(2 * dp + 1)], pa[std::size_t(g)], b1);
                }
              }
            }
          }
        }
        for (int w = 0; w < warps; ++w)
          for (int g = 0; g < groups; ++g) {
            const int r0 = 16 * groups * w + 16 * g;
            auto& o = ws[std::size_t(w)][std::size_t(g)].o;
            auto& m = ws[std::size_t(w)][std::size_t(g)].m;
            auto& lsum = ws[std::size_t(w)][std::size_t(g)].lsum;
            // Row sums over the quad, then out = O / l and lse = (m + log2 l)·ln 2.
            for (int half = 0; half < 2; ++half) {
              hw::warp_scalar x{};
              for (int l2 = 0; l2 < L; ++l2)
                x[std::size_t(l2)] = lsum[std::size_t(l2)][std::size_t(half)];
              for (int mask = 1; mask <= 2; mask *= 2) {
                const auto y = hw::shfl_xor(x, mask);
                for (int l2 = 0; l2 < L; ++l2) x[std::size_t(l2)] += y[std::size_t(l2)];
              }
              for (int l2 = 0; l2 < L; ++l2)
                lsum[std::size_t(l2)][std::size_t(half)] = x[std::size_t(l2)];
            }
            for (int l2 = 0; l2 < L; ++l2)
              for (int n = 0; n < hs / 8; ++n)
                for (int i = 0; i < 4; ++i) {
                  const int t = q0 + r0 + lay::acc_row(l2, i);
                  if (t >= T) continue;
                  const float y = o[std::size_t(n)][std::size_t(l2)][std::size_t(i)] *
                                  (1.0f / lsum[std::size_t(l2)][std::size_t(i / 2)]);
                  out[(std::size_t(b) * T + t) * C + std::size_t(heads.q_col(h)) + 8 * n +
                      lay::acc_col(l2, i)] = opt.round_out ? hw::to_bf16(y) : y;
                  if (lay::acc_col(l2, i) == 0)
                    lse[(std::size_t(b) * H + h) * T + t] =
                        (m[std::size_t(l2)][std::size_t(i / 2)] +
                         std::log2(lsum[std::size_t(l2)][std::size_t(i / 2)])) *
                        float(d::flash_ln2);
                }
          }
      }
    }
}

}  // namespace trainkit::test_gpu
