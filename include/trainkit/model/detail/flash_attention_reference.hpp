// trainkit/model/detail/flash_attention_reference.hpp — the CPU twin of the flash-attention CUDA
// kernels (model/cuda/flash_attention.cuh): the same tiles, the same online-softmax order, the
// same saved log-sum-exp, so the algorithm is proven against the naive attention on the CPU
// before any GPU runs it.
//
// Layout is the model's: qkv (B, T, 3C) with q, k, v of head h at columns h·hs, C + h·hs and
// 2C + h·hs of each row; out and dout (B, T, C); lse (B, H, T). Nothing is permuted.
// Forward (per head and query tile of `block_q` rows), in base 2 as the kernel (exp2 is one
// instruction on the GPU): for each key tile j that is not fully masked,
//   s = (q·kᵀ)·scale·log2(e), m' = max(m, rowmax s), p = 2^(s − m'),
//   l = l·2^(m − m') + rowsum p, o = o·2^(m − m') + p·v, m = m';
// then out = o / l and lse = (m + log2 l)·ln 2 (natural log, as cuDNN's softmax stats).
// Backward (per head and key tile of `block_k` keys), after D = rowsum(dout ∘ out): for each
// query tile i that sees the key tile, p = exp(s·scale − lse) recomputed, dv += pᵀ·dout,
// dp = dout·vᵀ, ds = p ∘ (dp − D)·scale, dk += dsᵀ·q, dq += ds·k (on the GPU dq is a float
// accumulator many key tiles add into). No T×T matrix exists in either pass.
// Not for users: the CUDA kernels, and the tests, are its callers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "trainkit/core/cuda/host_device.hpp"

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

inline constexpr double flash_log2e = 1.4426950408889634;
inline constexpr double flash_ln2 = 0.6931471805599453;

/// out (B, T, C), lse (B, H, T) from qkv (B, T, 3C), causal.
template <class S>
void flash_attention_forward_reference(S* out, S* lse, const S* qkv, int B, int T, int C, int H) {
  constexpr int Bq = flash_tiles::block_q, Bk = flash_tiles::block_k;
  const int hs = C / H;
  const std::ptrdiff_t row = 3 * std::ptrdiff_t(C);
  const S scale_log2 = S(1) / std::sqrt(S(hs)) * S(flash_log2e);
  std::vector<S> s(std::size_t(Bq) * Bk), o(std::size_t(Bq) * hs), m(Bq), l(Bq);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const S* q = qkv + std::ptrdiff_t(b) * T * row + std::ptrdiff_t(h) * hs;  // (T, hs)
      const S* k = q + C;
      const S* v = q + 2 * C;
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
          S* y = out + (std::ptrdiff_t(b) * T + t) * C + std::ptrdiff_t(h) * hs;
          for (int d = 0; d < hs; ++d) y[d] = o[r * hs + d] / l[r];
          lse[(std::ptrdiff_t(b) * H + h) * T + t] = (m[r] + std::log2(l[r])) * S(flash_ln2);
        }
      }
    }
}

/// dqkv (B, T, 3C) assigned from dout (B, T, C), using qkv, out and lse of the forward.
template <class S>
void flash_attention_backward_reference(S* dqkv, const S* dout, const S* qkv, const S* out,
                                        const S* lse, int B, int T, int C, int H) {
  constexpr int Bq = flash_tiles::block_q, Bk = flash_tiles::block_k;
  const int hs = C / H;
  const std::ptrdiff_t row = 3 * std::ptrdiff_t(C);
  const S scale = S(1) / std::sqrt(S(hs));
  std::vector<S> delta(T), dq(std::size_t(T) * hs), dk(std::size_t(Bk) * hs),
      dv(std::size_t(Bk) * hs), p(std::size_t(Bq) * Bk), ds(std::size_t(Bq) * Bk);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const std::ptrdiff_t head = std::ptrdiff_t(b) * T * row + std::ptrdiff_t(h) * hs;
      const S* q = qkv + head;  // (T, hs), rows 3C apart
      const S* k = q + C;
      const S* v = q + 2 * C;
      const S* dy = dout + std::ptrdiff_t(b) * T * C + std::ptrdiff_t(h) * hs;  // rows C apart
      const S* y = out + std::ptrdiff_t(b) * T * C + std::ptrdiff_t(h) * hs;
      const S* L = lse + (std::ptrdiff_t(b) * H + h) * T;
      for (int t = 0; t < T; ++t) {  // D = rowsum(dout ∘ out)
        S dot = 0;
        for (int d = 0; d < hs; ++d) dot += dy[t * C + d] * y[t * C + d];
        delta[t] = dot;
      }
      std::fill(dq.begin(), dq.end(), S(0));
      for (int kt = 0; kt < flash_tile_count(T, Bk); ++kt) {
        const int k0 = kt * Bk;
        std::fill(dk.begin(), dk.end(), S(0));
        std::fill(dv.begin(), dv.end(), S(0));
        for (int qt = flash_first_query_tile(kt); qt < flash_tile_count(T, Bq); ++qt) {
          const int q0 = qt * Bq;
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
                dsr = pr * (dp - delta[t]) * scale;
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
              dq[std::size_t(q0 + r) * hs + d] += acc;
            }
        }
        for (int c = 0; c < Bk && k0 + c < T; ++c)
          for (int d = 0; d < hs; ++d) {
            dqkv[head + (k0 + c) * row + C + d] = dk[c * hs + d];
            dqkv[head + (k0 + c) * row + 2 * C + d] = dv[c * hs + d];
          }
      }
      for (int t = 0; t < T; ++t)
        for (int d = 0; d < hs; ++d) dqkv[head + t * row + d] = dq[std::size_t(t) * hs + d];
    }
}

}  // namespace trainkit::model::detail
