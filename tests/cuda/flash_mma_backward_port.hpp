// tests/cuda/flash_mma_backward_port.hpp — a CPU emulation of the flash-attention backward kernel
// (model/cuda/flash_attention.cuh) at the level of its lanes and registers, so the kernel's data
// flow is proven without a GPU.
//
// The hardware half is flash_mma_port.hpp's `hw`, written from the PTX ISA's tables and
// independent of the kernel's headers: `ldmatrix .x4` with and without `.trans`, the m16n8k16
// .bf16 fragment layouts of A, B and C/D, `shfl.xor`. This half walks the backward kernel's steps
// one warp at a time through model/detail/flash_mma_backward_layout.hpp — the header the kernel
// itself uses — for one block per (key tile, batch·KV head): the K and V tiles; the group's query
// heads in the twin's order (detail::flash_backward_visit) with Q and dO in two stages; per warp
// (16 keys) Sᵀ = K·Qᵀ from K's A fragments and Qᵀ's B fragments, Pᵀ = 2^(Sᵀ·scale·log2 e − lse)
// with the diagonal mask, dV += Pᵀ·dO with Pᵀ's accumulators repacked as A fragments, dPᵀ = V·dOᵀ,
// dSᵀ = Pᵀ ∘ (dPᵀ − D)·scale, dK += dSᵀ·Q likewise, dSᵀ into its shared tile; then per warp (16
// queries) dQ = dS·K from that tile by `.trans`, added into a (B, T, C) fp32 accumulator as the
// kernel's atomics; dK and dV written once from their accumulators. So a slip in an ldmatrix
// address, a fragment's reuse as an operand, the transposed mask, the statistics' indexing, the
// dS tile's addressing or a sign shows up here as a wrong gradient.
//
// Options: `round_operands` rounds P and dS to bf16 for the products (the kernel does, dS once,
// for dK and through the shared tile for dQ); `round_out` rounds dq, dk and dv to bf16 (the kernel
// does). With both off the emulation is an fp32 backward and must match the fp64 twin
// (detail/flash_attention_reference.hpp) to fp32 rounding; with both on it must match
// flash_port.hpp's rounding port to a flipped bf16 rounding here and there.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "flash_mma_port.hpp"
#include "trainkit/model/detail/attention_heads.hpp"
#include "trainkit/model/detail/flash_attention_reference.hpp"
#include "trainkit/model/detail/flash_mma_backward_layout.hpp"

namespace trainkit::test_gpu {

struct mma_backward_options {
  bool round_operands = true;  // P and dS to bf16 for the products, as the kernel
  bool round_out = true;       // dq, dk, dv to bf16, as the kernel
  int window = 0;              // sliding window in keys (0 = full causal), as the launcher's
};

namespace backward_port_detail {

/// ldmatrix .x4 of `tile` with lane l giving the element offset addr(l).
template <class Addr>
hw::warp_regs<4> ldsm(const std::vector<float>& tile, Addr addr, bool trans) {
  std::array<int, hw::lanes> a{};
  for (int l = 0; l < hw::lanes; ++l) a[std::size_t(l)] = addr(l);
  return hw::ldmatrix_x4(tile, a, trans);
}

/// Registers 2·half, 2·half + 1 of every lane: one B operand.
inline std::array<std::array<hw::reg, 2>, hw::lanes> b_half(const hw::warp_regs<4>& r, int half) {
  std::array<std::array<hw::reg, 2>, hw::lanes> b{};
  for (int l = 0; l < hw::lanes; ++l)
    b[std::size_t(l)] = {r[std::size_t(l)][std::size_t(2 * half)],
                         r[std::size_t(l)][std::size_t(2 * half + 1)]};
  return b;
}

/// The A fragment of 16 columns 16kk.. made of the accumulators 2kk and 2kk + 1 (rows × 8
/// columns each): a0a1 = c0c1 of the first, a2a3 = its c2c3, a4..a7 those of the second.
template <class Round>
hw::warp_regs<4> accumulators_as_a(const std::vector<hw::warp_acc>& acc, int kk, Round rnd) {
  hw::warp_regs<4> a{};
  for (int l = 0; l < hw::lanes; ++l) {
    const auto& lo = acc[std::size_t(2 * kk)][std::size_t(l)];
    const auto& hi = acc[std::size_t(2 * kk + 1)][std::size_t(l)];
    a[std::size_t(l)] = {hw::reg{rnd(lo[0]), rnd(lo[1])}, hw::reg{rnd(lo[2]), rnd(lo[3])},
                         hw::reg{rnd(hi[0]), rnd(hi[1])}, hw::reg{rnd(hi[2]), rnd(hi[3])}};
  }
  return a;
}

}  // namespace backward_port_detail

/// dqkv (B, T, (H + 2·KV)·hs) from dout (B, T, C), qkv, the forward's out (B, T, C) and lse
/// (B, H, T, natural log), all holding bf16 values but lse; the kernel's way. C = H·hs.
inline void flash_backward_mma_port(std::vector<float>& dqkv, const std::vector<float>& dout,
                                    const std::vector<float>& qkv, const std::vector<float>& out,
                                    const std::vector<float>& lse, int B, int T, int C, int H,
                                    int KV, mma_backward_options opt = {}) {
  namespace d = trainkit::model::detail;
  namespace lay = trainkit::model::detail::flash_mma_backward;
  namespace fwd = trainkit::model::detail::flash_mma;
  using namespace backward_port_detail;
  constexpr int Bq = d::flash_tiles::block_q, Bk = d::flash_tiles::block_k;
  constexpr int warps = Bk / 16, threads = warps * hw::lanes, L = hw::lanes;
  static_assert(Bq == 64 && Bk == 64, "four warps of 16 keys, then of 16 queries");
  const d::attention_heads heads{H, KV, C / H};
  const int hs = heads.hs;
  const std::ptrdiff_t row = heads.row();
  const float scale = 1.0f / std::sqrt(float(hs));
  const float scale_log2 = scale * float(d::flash_log2e);
  const float inf = std::numeric_limits<float>::infinity();
  const int window = fwd::effective_window(opt.window, T);  // the launcher's
  const auto rnd = [&](float x) { return opt.round_operands ? hw::to_bf16(x) : x; };
  const auto rnd_out = [&](float x) { return opt.round_out ? hw::to_bf16(x) : x; };
  dqkv.assign(std::size_t(B) * T * std::size_t(row), std::numeric_limits<float>::quiet_NaN());

  // The delta pre-pass: D = rowsum(dout ∘ out) per (b, h, t), fp32.
  std::vector<float> delta(std::size_t(B) * H * T);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) {
        float acc = 0;
        const std::size_t o = (std::size_t(b) * T + t) * C + std::size_t(heads.q_col(h));
        for (int e = 0; e < hs; ++e) acc += dout[o + e] * out[o + e];
        delta[(std::size_t(b) * H + h) * T + t] = acc;
      }
  std::vector<float> dq_accum(std::size_t(B) * T * C, 0.0f);  // the kernel's memset

  const std::size_t tile = std::size_t(Bq) * hs;
  std::vector<float> sk(tile), sv(tile),
      sq[2] = {std::vector<float>(tile), std::vector<float>(tile)},
      sdy[2] = {std::vector<float>(tile), std::vector<float>(tile)}, sds(std::size_t(Bk) * Bq);
  std::array<float, Bq> slse{}, sdelta{};
  // cp.async 16 bytes per thread and step, zero-filled past T, into the swizzled tile.
  auto copy_tile = [&](std::vector<float>& dst, const float* src, std::ptrdiff_t stride,
                       int first) {
    const int per_thread = Bq * hs / fwd::chunk / threads;
    for (int tid = 0; tid < threads; ++tid)
      for (int i = 0; i < per_thread; ++i) {
        const int r = fwd::copy_row(tid, i, threads, hs), c = fwd::copy_col(tid, i, threads, hs);
        for (int e = 0; e < fwd::chunk; ++e)
          dst[std::size_t(lay::swizzled(r, c, hs) + e)] =
              first + r < T ? src[(first + r) * stride + c + e] : 0.0f;
      }
  };

  const int key_tiles = d::flash_tile_count(T, Bk);
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < KV; ++g)
      for (int kt = 0; kt < key_tiles; ++kt) {
        const int k0 = kt * Bk;
        const std::ptrdiff_t batch = std::ptrdiff_t(b) * T * row;
        const float* k = qkv.data() + batch + heads.k_col_of(g);
        const float* v = qkv.data() + batch + heads.v_col_of(g);
        auto q_of = [&](int h) { return qkv.data() + batch + heads.q_col(h); };
        auto dy_of = [&](int h) {
          return dout.data() + std::ptrdiff_t(b) * T * C + heads.q_col(h);
        };
        const int first_qt = d::flash_first_query_tile(kt);
        const int end_qt = lay::end_query_tile(kt, Bk, Bq, T, window);
        const int steps = heads.group() * (end_qt - first_qt);
        const int h0 = heads.first_query_head(g);
        copy_tile(sk, k, row, k0);
        copy_tile(sv, v, row, k0);
        copy_tile(sq[0], q_of(h0), row, first_qt * Bq);
        copy_tile(sdy[0], dy_of(h0), C, first_qt * Bq);
        // dK, dV of each warp's 16 keys: hs / 8 accumulators each.
        std::array<std::vector<hw::warp_acc>, warps> dk, dv;
        for (int w = 0; w < warps; ++w) {
          dk[std::size_t(w)].assign(std::size_t(hs / 8), hw::warp_acc{});
          dv[std::size_t(w)].assign(std::size_t(hs / 8), hw::warp_acc{});
        }
        for (int step = 0; step < steps; ++step) {
          const d::flash_backward_step at = d::flash_backward_visit(step, first_qt, end_qt);
          const int h = h0 + at.member, q0 = at.qt * Bq, stage = step % 2;
          if (step + 1 < steps) {  // the next query tile's q, dout into the other stage
            const d::flash_backward_step to = d::flash_backward_visit(step + 1, first_qt, end_qt);
            copy_tile(sq[1 - stage], q_of(h0 + to.member), row, to.qt * Bq);
            copy_tile(sdy[1 - stage], dy_of(h0 + to.member), C, to.qt * Bq);
          }
          const std::size_t stats = (std::size_t(b) * H + h) * T;
          for (int r = 0; r < Bq; ++r) {  // base 2; +inf past T makes P = 0 there
            const bool real = q0 + r < T;
            slse[std::size_t(r)] = real ? lse[stats + q0 + r] * float(d::flash_log2e) : inf;
            sdelta[std::size_t(r)] = real ? delta[stats + q0 + r] : 0.0f;
          }
          const std::vector<float>& q_tile = sq[stage];
          const std::vector<float>& dy_tile = sdy[stage];
          for (int w = 0; w < warps; ++w) {
            const int r0 = 16 * w;  // this warp's keys
            // Per lane, one base offset per ldmatrix pattern; the steps from it are
            // lay::swizzled_step, as in the kernel.
            auto a_base = [&](int l) {
              return lay::swizzled(r0 + lay::ldsm_a_row(l), lay::ldsm_a_col(l), hs);
            };
            auto bt_base = [&](int l) {
              return lay::swizzled(lay::ldsm_bt_row(l), lay::ldsm_bt_col(l), hs);
            };
            auto tb_base = [&](int l) {
              return lay::swizzled(lay::ldsm_trans_b_row(l), lay::ldsm_trans_b_col(l), hs);
            };
            // Sᵀ (16 keys × 64 queries) = strip of `a` · `b`ᵀ (the kernel's
            // strip_times_transposed): each A fragment once, for all 64 queries.
            auto strip_times_transposed = [&](const std::vector<float>& a,
                                              const std::vector<float>& bt_tile) {
              std::vector<hw::warp_acc> acc(Bq / 8, hw::warp_acc{});
              for (int kk = 0; kk < hs / 16; ++kk) {
                const auto fa = ldsm(
                    a, [&](int l) { return lay::swizzled_step(a_base(l), 0, 16 * kk, hs); }, false);
                for (int np = 0; np < Bq / 16; ++np) {
                  const auto fb = ldsm(
                      bt_tile,
                      [&](int l) { return lay::swizzled_step(bt_base(l), 16 * np, 16 * kk, hs); },
                      false);
                  hw::mma_m16n8k16(acc[std::size_t(2 * np)], fa, b_half(fb, 0));
                  hw::mma_m16n8k16(acc[std::size_t(2 * np + 1)], fa, b_half(fb, 1));
                }
              }
              return acc;
            };
            // out += x (A fragments, 16 × 64 queries) · b (64 queries × hs, .trans): the kernel's
            // accumulate_product.
            auto accumulate_product = [&](std::vector<hw::warp_acc>& acc_out,
                                          const std::vector<hw::warp_regs<4>>& xa,
                                          const std::vector<float>& b_tile) {
              for (int kk = 0; kk < Bq / 16; ++kk)
                for (int dd = 0; dd < hs / 16; ++dd) {
                  const auto fb = ldsm(
                      b_tile,
                      [&](int l) { return lay::swizzled_step(tb_base(l), 16 * kk, 16 * dd, hs); },
                      true);
                  hw::mma_m16n8k16(acc_out[std::size_t(2 * dd)], xa[std::size_t(kk)],
                                   b_half(fb, 0));
                  hw::mma_m16n8k16(acc_out[std::size_t(2 * dd + 1)], xa[std::size_t(kk)],
                                   b_half(fb, 1));
                }
            };
            auto as_a = [&](const std::vector<hw::warp_acc>& acc) {
              std::vector<hw::warp_regs<4>> xa(Bq / 16);
              for (int kk = 0; kk < Bq / 16; ++kk)
                xa[std::size_t(kk)] = accumulators_as_a(acc, kk, rnd);
              return xa;
            };
            // Sᵀ, then Pᵀ in place (the mask on the diagonal tile and where this warp's keys cross
            // the window's left edge only).
            const bool crossing =
                at.qt == kt || fwd::needs_window_mask(q0 + Bq - 1, k0 + r0, window);
            auto s = strip_times_transposed(sk, q_tile);
            for (int n = 0; n < Bq / 8; ++n)
              for (int l = 0; l < L; ++l)
                for (int i = 0; i < 4; ++i) {
                  const int key = r0 + lay::acc_key(l, i), query = 8 * n + lay::acc_query(l, i);
                  float& x = s[std::size_t(n)][std::size_t(l)][std::size_t(i)];
                  // Windowed, the kernel's relative positions (from the tile's first key).
                  x = (crossing && !(window > 0 ? lay::window_visible(key, q0 - k0 + query, window)
                                                : lay::diagonal_visible(key, query)))
                          ? 0.0f
                          : std::exp2(x * scale_log2 - slse[std::size_t(query)]);
                }
            // dV += Pᵀ · dO.
            accumulate_product(dv[std::size_t(w)], as_a(s), dy_tile);
            // dPᵀ = V strip · dOᵀ, then dSᵀ in place.
            auto dp = strip_times_transposed(sv, dy_tile);
            for (int n = 0; n < Bq / 8; ++n)
              for (int l = 0; l < L; ++l)
                for (int i = 0; i < 4; ++i) {
                  const int query = 8 * n + lay::acc_query(l, i);
                  float& y = dp[std::size_t(n)][std::size_t(l)][std::size_t(i)];
                  y = s[std::size_t(n)][std::size_t(l)][std::size_t(i)] *
                      (y - sdelta[std::size_t(query)]) * scale;
                }
            // dSᵀ's A fragments into the shared tile (register j of fragment kk: accumulator
            // 2kk + j/2's pair 2(j%2)), then dK += dSᵀ · Q.
            const auto dsa = as_a(dp);
            for (int kk = 0; kk < Bq / 16; ++kk)
              for (int l = 0; l < L; ++l)
                for (int j = 0; j < 4; ++j) {
                  const int i = 2 * (j % 2);
                  const int key = r0 + lay::acc_key(l, i);
                  const int query = 16 * kk + 8 * (j / 2) + lay::acc_query(l, i);
                  for (int e = 0; e < 2; ++e)
                    sds[std::size_t(lay::ds_offset(key, query, Bq) + e)] =
                        dsa[std::size_t(kk)][std::size_t(l)][std::size_t(j)][std::size_t(e)];
                }
            accumulate_product(dk[std::size_t(w)], dsa, q_tile);
          }
          // (barrier) dQ (16 queries × hs) = dS · K per warp, 64 head dimensions at a time.
          for (int w = 0; w < warps; ++w) {
            const int r0 = 16 * w;  // this warp's queries
            auto ds_base = [&](int l) {
              return lay::ds_offset(lay::ldsm_ds_key(l), r0 + lay::ldsm_ds_query(l), Bq);
            };
            auto k_base = [&](int l) {
              return lay::swizzled(lay::ldsm_trans_b_row(l), lay::ldsm_trans_b_col(l), hs);
            };
            std::vector<hw::warp_regs<4>> dsa(Bk / 16);
            for (int kk = 0; kk < Bk / 16; ++kk)
              dsa[std::size_t(kk)] = ldsm(
                  sds, [&](int l) { return lay::swizzled_step(ds_base(l), 16 * kk, 0, Bq); }, true);
            for (int c0 = 0; c0 < hs; c0 += 64) {
              std::vector<hw::warp_acc> acc(8, hw::warp_acc{});
              for (int kk = 0; kk < Bk / 16; ++kk)
                for (int dd = 0; dd < 4; ++dd) {
                  const auto kb = ldsm(
                      sk,
                      [&](int l) {
                        return lay::swizzled_step(k_base(l), 16 * kk, c0 + 16 * dd, hs);
                      },
                      true);
                  hw::mma_m16n8k16(acc[std::size_t(2 * dd)], dsa[std::size_t(kk)], b_half(kb, 0));
                  hw::mma_m16n8k16(acc[std::size_t(2 * dd + 1)], dsa[std::size_t(kk)],
                                   b_half(kb, 1));
                }
              for (int n = 0; n < 8; ++n)
                for (int l = 0; l < L; ++l)
                  for (int i = 0; i < 4; ++i) {
                    const int t = q0 + r0 + lay::acc_row(l, i);
                    if (t < T)  // the kernel's atomicAdd
                      dq_accum[(std::size_t(b) * T + t) * C + std::size_t(heads.q_col(h)) +
                               std::size_t(c0 + 8 * n + lay::acc_col(l, i))] +=
                          acc[std::size_t(n)][std::size_t(l)][std::size_t(i)];
                  }
            }
          }
        }
        // dK, dV of the real keys, straight from the accumulators.
        for (int w = 0; w < warps; ++w)
          for (int n = 0; n < hs / 8; ++n)
            for (int l = 0; l < L; ++l)
              for (int i = 0; i < 4; ++i) {
                const int j = k0 + 16 * w + lay::acc_row(l, i);
                if (j >= T) continue;
                const std::size_t at = std::size_t(batch + std::ptrdiff_t(j) * row) +
                                       std::size_t(8 * n + lay::acc_col(l, i));
                dqkv[at + std::size_t(heads.k_col_of(g))] =
                    rnd_out(dk[std::size_t(w)][std::size_t(n)][std::size_t(l)][std::size_t(i)]);
                dqkv[at + std::size_t(heads.v_col_of(g))] =
                    rnd_out(dv[std::size_t(w)][std::size_t(n)][std::size_t(l)][std::size_t(i)]);
              }
      }
  // The rounding pass: dq_accum into dqkv's q columns.
  for (std::size_t r = 0; r < std::size_t(B) * T; ++r)
    for (int c = 0; c < C; ++c)
      dqkv[r * std::size_t(row) + std::size_t(c)] = rnd_out(dq_accum[r * C + std::size_t(c)]);
}

}  // namespace trainkit::test_gpu
