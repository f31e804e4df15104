// trainkit/model/detail/flash_attention_reference.hpp — the CPU twin of the flash-attention CUDA
// kernels (model/cuda/flash_attention.cuh): the same tiles, the same online-softmax order, the
// same saved log-sum-exp, so the algorithm is proven against the naive attention on the CPU
// before any GPU runs it.
//
// Layout is the model's, with grouped-query attention (detail/attention_heads.hpp): qkv
// (B, T, (H + 2·KV)·hs) holding q (H heads) | k (KV heads) | v (KV heads), query head h reading
// k, v head h / (H / KV); out and dout (B, T, C) with C = H·hs; lse (B, H, T). GPT-2 is KV = H.
// Nothing is permuted.
// Forward (per query head and query tile of `block_q` rows), in base 2 as the kernel (exp2 is one
// instruction on the GPU): for each key tile j that is not fully masked,
//   s = (q·kᵀ)·scale·log2(e), m' = max(m, rowmax s), p = 2^(s − m'),
//   l = l·2^(m − m') + rowsum p, o = o·2^(m − m') + p·v, m = m';
// then out = o / l and lse = (m + log2 l)·ln 2 (natural log, as cuDNN's softmax stats).
// Backward (per k, v head and key tile of `block_k` keys), after D = rowsum(dout ∘ out) per query
// head: for each query head of the group in turn and each query tile i that sees the key tile
// (flash_backward_visit: the kernel's order), p = exp(s·scale − lse) recomputed, dv += pᵀ·dout,
// dp = dout·vᵀ, ds = p ∘ (dp − D)·scale, dk += dsᵀ·q, dq += ds·k (on the GPU dq is a float
// accumulator many key tiles add into). dk and dv sum over the group before they are written
// once. No T×T matrix exists in either pass.
// Not for users: the CUDA kernels, and the tests, are its callers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "trainkit/core/cuda/host_device.hpp"
#include "trainkit/model/detail/attention_heads.hpp"

namespace trainkit::model::detail {

/// Tile sizes shared by the CPU twin and the CUDA kernels: 64 query rows (4 warps of 16) by 64
/// keys. Equal sizes make the causal diagonal fall inside one tile per row of tiles.
struct flash_tiles {
  static constexpr int block_q = 64;
  static constexpr int block_k = 64;
};
static_assert(flash_tiles::block_q == flash_tiles::block_k,
              "the causal skips below assume square tiles");

TRAINKIT_HOST_DEVICE constexpr int flash_tile_count(int T, int block) {
  return (T + block - 1) / block;
}

/// Key tiles query tile `qt` visits: 0 .. flash_last_key_tile(qt); later ones are fully masked.
TRAINKIT_HOST_DEVICE constexpr int flash_last_key_tile(int qt) {
  return qt * flash_tiles::block_q / flash_tiles::block_k;
}

/// Query tiles key tile `kt` is seen by: flash_first_query_tile(kt) .. the last; earlier ones
/// are fully masked.
TRAINKIT_HOST_DEVICE constexpr int flash_first_query_tile(int kt) {
  return kt * flash_tiles::block_k / flash_tiles::block_q;
}

/// Step `i` of a backward block (one key tile, one k, v head): the group's query heads in turn,
/// each over the query tiles first_qt .. end_qt − 1 that see the key tile (end_qt: the query
/// tile count, or fewer under a sliding window: flash_mma_backward::end_query_tile).
struct flash_backward_step {
  int member;  // query head first_query_head(g) + member
  int qt;      // query tile
};
TRAINKIT_HOST_DEVICE constexpr flash_backward_step flash_backward_visit(int i, int first_qt,
                                                                        int end_qt) {
  const int per_head = end_qt - first_qt;
  return {i / per_head, first_qt + i % per_head};
}

inline constexpr double flash_log2e = 1.4426950408889634;
inline constexpr double flash_ln2 = 0.6931471805599453;

/// out (B, T, C), lse (B, H, T) from qkv (B, T, (H + 2·KV)·hs), causal; C = H·hs.
template <class S>
void flash_attention_forward_reference(S* out, S* lse, const S* qkv, int B, int T, int C, int H,
                                       int KV) {
  constexpr int Bq = flash_tiles::block_q, Bk = flash_tiles::block_k;
  const attention_heads heads{H, KV, C / H};
  const int hs = heads.hs;
  const std::ptrdiff_t row = heads.row();
  const S scale_log2 = S(1) / std::sqrt(S(hs)) * S(flash_log2e);
  std::vector<S> s(std::size_t(Bq) * Bk), o(std::size_t(Bq) * hs), m(Bq), l(Bq);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const S* base = qkv + std::ptrdiff_t(b) * T * row;
      const S* q = base + heads.q_col(h);  // (T, hs), rows `row` apart
      const S* k = base + heads.k_col(h);
      const S* v = base + heads.v_col(h);
      for (int qt = 0; qt < flash_tile_count(T, Bq); ++qt) {
        const int q0 = qt * Bq;
        std::fill(o.begin(), o.end(), S(0));
        std::fill(m.begin(), m.end(), -std::numeric_limits<S>::infinity());
        std::fill(l.begin(), l.end(), S(0));
        for (int kt = 0; kt <= flash_last_key_tile(qt); ++kt) {
          const int k0 = kt * Bk;
          for (int r = 0; r < Bq && q0 + r < T; ++r) {
            const int t = q0 + r;
            S tile_max = -std::numeric_limits<S>::infinity();
            for (int c = 0; c < Bk; ++c) {
              const int j = k0 + c;
              S x = -std::numeric_limits<S>::infinity();  // masked: causal or past T
              if (j <= t && j < T) {
                S dot = 0;
                for (int d = 0; d < hs; ++d) dot += q[t * row + d] * k[j * row + d];
                x = dot * scale_log2;
              }
              s[r * Bk + c] = x;
              tile_max = std::max(tile_max, x);
            }
            // Column k0 ≤ t is never masked, so every visited tile has a finite maximum.
            const S m_new = std::max(m[r], tile_max);
            const S correction = std::exp2(m[r] - m_new);
            S sum = 0;
            for (int c = 0; c < Bk; ++c) {
              const S p = std::exp2(s[r * Bk + c] - m_new);
              s[r * Bk + c] = p;
              sum += p;
            }
            l[r] = l[r] * correction + sum;
            for (int d = 0; d < hs; ++d) {
              S acc = 0;
              for (int c = 0; c < Bk && k0 + c < T; ++c)
                acc += s[r * Bk + c] * v[(k0 + c) * row + d];
              o[r * hs + d] = o[r * hs + d] * correction + acc;
            }
            m[r] = m_new;
          }
        }
        for (int r = 0; r < Bq && q0 + r < T; ++r) {
          const int t = q0 + r;
          S* y = out + (std::ptrdiff_t(b) * T + t) * C + heads.q_col(h);
          for (int d = 0; d < hs; ++d) y[d] = o[r * hs + d] / l[r];
          lse[(std::ptrdiff_t(b) * H + h) * T + t] = (m[r] + std::log2(l[r])) * S(flash_ln2);
        }
      }
    }
}

/// dqkv (B, T, (H + 2·KV)·hs) assigned from dout (B, T, C), using qkv, out and lse of the
/// forward; the k and v gradients of a head shared by a group are the sums over the group.
template <class S>
void flash_attention_backward_reference(S* dqkv, const S* dout, const S* qkv, const S* out,
                                        const S* lse, int B, int T, int C, int H, int KV) {
  constexpr int Bq = flash_tiles::block_q, Bk = flash_tiles::block_k;
  const attention_heads heads{H, KV, C / H};
  const int hs = heads.hs;
  const std::ptrdiff_t row = heads.row();
  const S scale = S(1) / std::sqrt(S(hs));
  const int query_tiles = flash_tile_count(T, Bq);
  std::vector<S> delta(std::size_t(H) * T), dq(std::size_t(H) * T * hs), dk(std::size_t(Bk) * hs),
      dv(std::size_t(Bk) * hs), p(std::size_t(Bq) * Bk), ds(std::size_t(Bq) * Bk);
  for (int b = 0; b < B; ++b) {
    const S* base = qkv + std::ptrdiff_t(b) * T * row;
    S* dbase = dqkv + std::ptrdiff_t(b) * T * row;
    const S* dy_b = dout + std::ptrdiff_t(b) * T * C;  // rows C apart
    const S* y_b = out + std::ptrdiff_t(b) * T * C;
    for (int h = 0; h < H; ++h)  // D = rowsum(dout ∘ out) per query head
      for (int t = 0; t < T; ++t) {
        S dot = 0;
        for (int d = 0; d < hs; ++d)
          dot += dy_b[t * C + heads.q_col(h) + d] * y_b[t * C + heads.q_col(h) + d];
        delta[std::size_t(h) * T + t] = dot;
      }
    std::fill(dq.begin(), dq.end(), S(0));
    for (int g = 0; g < KV; ++g) {
      const S* k = base + heads.k_col_of(g);  // (T, hs), rows `row` apart
      const S* v = base + heads.v_col_of(g);
      for (int kt = 0; kt < flash_tile_count(T, Bk); ++kt) {
        const int k0 = kt * Bk, first_qt = flash_first_query_tile(kt);
        std::fill(dk.begin(), dk.end(), S(0));
        std::fill(dv.begin(), dv.end(), S(0));
        const int steps = heads.group() * (query_tiles - first_qt);
        for (int i = 0; i < steps; ++i) {
          const auto [member, qt] = flash_backward_visit(i, first_qt, query_tiles);
          const int h = heads.first_query_head(g) + member, q0 = qt * Bq;
          const S* q = base + heads.q_col(h);
          const S* dy = dy_b + heads.q_col(h);
          const S* L = lse + (std::ptrdiff_t(b) * H + h) * T;
          const S* D = delta.data() + std::size_t(h) * T;
          S* dqh = dq.data() + std::size_t(h) * T * hs;
          for (int r = 0; r < Bq; ++r)
            for (int c = 0; c < Bk; ++c) {
              const int t = q0 + r, j = k0 + c;
              S pr = 0, dsr = 0;
              if (t < T && j <= t) {  // j ≤ t < T: the key is real too
                S qk = 0, dp = 0;
                for (int d = 0; d < hs; ++d) {
                  qk += q[t * row + d] * k[j * row + d];
                  dp += dy[t * C + d] * v[j * row + d];
                }
                pr = std::exp(qk * scale - L[t]);
                dsr = pr * (dp - D[t]) * scale;
              }
              p[r * Bk + c] = pr;
              ds[r * Bk + c] = dsr;
            }
          for (int c = 0; c < Bk; ++c)
            for (int d = 0; d < hs; ++d) {
              S adv = 0, adk = 0;
              for (int r = 0; r < Bq && q0 + r < T; ++r) {
                adv += p[r * Bk + c] * dy[(q0 + r) * C + d];
                adk += ds[r * Bk + c] * q[(q0 + r) * row + d];
              }
              dv[c * hs + d] += adv;
              dk[c * hs + d] += adk;
            }
          for (int r = 0; r < Bq && q0 + r < T; ++r)
            for (int d = 0; d < hs; ++d) {
              S acc = 0;
              for (int c = 0; c < Bk && k0 + c < T; ++c)
                acc += ds[r * Bk + c] * k[(k0 + c) * row + d];
              dqh[std::size_t(q0 + r) * hs + d] += acc;
            }
        }
        for (int c = 0; c < Bk && k0 + c < T; ++c)
          for (int d = 0; d < hs; ++d) {
            dbase[(k0 + c) * row + heads.k_col_of(g) + d] = dk[c * hs + d];
            dbase[(k0 + c) * row + heads.v_col_of(g) + d] = dv[c * hs + d];
          }
      }
    }
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t)
        for (int d = 0; d < hs; ++d)
          dbase[t * row + heads.q_col(h) + d] = dq[(std::size_t(h) * T + t) * hs + d];
  }
}

}  // namespace trainkit::model::detail
