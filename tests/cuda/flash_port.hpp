// tests/cuda/flash_port.hpp — a CPU port of the flash-attention kernels' arithmetic
// (model/cuda/flash_attention.cuh) including where they round to bf16, so a test can say how large
// the kernels' error against the exact (fp32, naive) attention really is, without a GPU.
//
// The tiling and online softmax are the twin's (model/detail/flash_attention_reference.hpp); on
// top of them, as the kernels do: the forward rounds P to bf16 for the P·V product (the row sum l
// stays fp32) and the output to bf16; the backward computes D from the bf16 output, rounds P and
// dS to bf16 for the products and dK, dV, dQ to bf16 at the end. fp32 accumulation order differs
// from the tensor cores', which moves results by fp32 ulps only. `skip_last_diagonal` leaves out
// the diagonal key tile of the last query tile (a plausible kernel slip: an off-by-one in the loop
// bound of the last tile), so a test can show its tolerance catches that slip. With grouped-query
// attention (KV < H; layout in model/detail/attention_heads.hpp) dK and dV sum over the group in
// fp32 and are rounded once, as the kernel's shared accumulators.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "trainkit/core/bf16.hpp"
#include "trainkit/model/detail/flash_attention_reference.hpp"

namespace trainkit::test_gpu {

inline float bf16_round(float x) {
  return trainkit::bf16::from_float(x).to_float();
}

/// out (B, T, C) bf16-rounded values, lse (B, H, T), from qkv (B, T, (H + 2·KV)·hs) holding bf16
/// values; C = H·hs.
inline void flash_forward_port(std::vector<float>& out, std::vector<float>& lse,
                               const std::vector<float>& qkv, int B, int T, int C, int H, int KV,
                               bool skip_last_diagonal = false) {
  namespace d = trainkit::model::detail;
  constexpr int Bq = d::flash_tiles::block_q, Bk = d::flash_tiles::block_k;
  const d::attention_heads heads{H, KV, C / H};
  const int hs = heads.hs;
  const std::ptrdiff_t row = heads.row();
  const float scale_log2 = 1.0f / std::sqrt(float(hs)) * float(d::flash_log2e);
  out.assign(std::size_t(B) * T * C, 0.0f);
  lse.assign(std::size_t(B) * H * T, 0.0f);
  std::vector<float> p(Bk), o(std::size_t(Bq) * hs), m(Bq), l(Bq);
  const int tiles = d::flash_tile_count(T, Bq);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const float* base = qkv.data() + std::ptrdiff_t(b) * T * row;
      const float* q = base + heads.q_col(h);
      const float* k = base + heads.k_col(h);
      const float* v = base + heads.v_col(h);
      for (int qt = 0; qt < tiles; ++qt) {
        const int q0 = qt * Bq;
        std::fill(o.begin(), o.end(), 0.0f);
        std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
        std::fill(l.begin(), l.end(), 0.0f);
        int last = d::flash_last_key_tile(qt);
        if (skip_last_diagonal && qt == tiles - 1 && qt > 0) last -= 1;
        for (int kt = 0; kt <= last; ++kt) {
          const int k0 = kt * Bk;
          for (int r = 0; r < Bq && q0 + r < T; ++r) {
            const int t = q0 + r;
            float tile_max = -std::numeric_limits<float>::infinity();
            for (int c = 0; c < Bk; ++c) {
              const int j = k0 + c;
              float x = -std::numeric_limits<float>::infinity();
              if (j <= t && j < T) {
                float dot = 0;
                for (int e = 0; e < hs; ++e) dot += q[t * row + e] * k[j * row + e];
                x = dot * scale_log2;
              }
              p[std::size_t(c)] = x;
              tile_max = std::max(tile_max, x);
            }
            const float m_new = std::max(m[r], tile_max);
            const float correction = std::exp2(m[r] - m_new);
            float sum = 0;
            for (int c = 0; c < Bk; ++c) {
              const float pr = std::exp2(p[std::size_t(c)] - m_new);
              sum += pr;                           // l: fp32
              p[std::size_t(c)] = bf16_round(pr);  // the P·V product's operand: bf16
            }
            l[r] = l[r] * correction + sum;
            for (int e = 0; e < hs; ++e) {
              float acc = 0;
              for (int c = 0; c < Bk && k0 + c < T; ++c)
                acc += p[std::size_t(c)] * v[(k0 + c) * row + e];
              o[r * hs + e] = o[r * hs + e] * correction + acc;
            }
            m[r] = m_new;
          }
        }
        for (int r = 0; r < Bq && q0 + r < T; ++r) {
          const int t = q0 + r;
          float* y = out.data() + (std::ptrdiff_t(b) * T + t) * C + std::ptrdiff_t(h) * hs;
          for (int e = 0; e < hs; ++e) y[e] = bf16_round(o[r * hs + e] * (1.0f / l[r]));
          lse[(std::size_t(b) * H + h) * T + t] = (m[r] + std::log2(l[r])) * float(d::flash_ln2);
        }
      }
    }
}

/// dqkv (B, T, (H + 2·KV)·hs) bf16-rounded values from dout (B, T, C), qkv, and the port's out
/// and lse.
inline void flash_backward_port(std::vector<float>& dqkv, const std::vector<float>& dout,
                                const std::vector<float>& qkv, const std::vector<float>& out,
                                const std::vector<float>& lse, int B, int T, int C, int H, int KV) {
  namespace d = trainkit::model::detail;
  const d::attention_heads heads{H, KV, C / H};
  const int hs = heads.hs;
  const std::ptrdiff_t row = heads.row();
  const float scale = 1.0f / std::sqrt(float(hs));
  const float scale_log2 = scale * float(d::flash_log2e);
  dqkv.assign(std::size_t(B) * T * std::size_t(row), 0.0f);
  std::vector<float> delta(T), dq(std::size_t(T) * hs), dk(std::size_t(T) * hs),
      dv(std::size_t(T) * hs);
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < KV; ++g) {
      const std::ptrdiff_t base = std::ptrdiff_t(b) * T * row;
      const float* k = qkv.data() + base + heads.k_col_of(g);
      const float* v = qkv.data() + base + heads.v_col_of(g);
      std::fill(dk.begin(), dk.end(), 0.0f);
      std::fill(dv.begin(), dv.end(), 0.0f);
      for (int member = 0; member < heads.group(); ++member) {
        const int h = heads.first_query_head(g) + member;
        const float* q = qkv.data() + base + heads.q_col(h);
        const float* dy = dout.data() + std::ptrdiff_t(b) * T * C + heads.q_col(h);
        const float* y = out.data() + std::ptrdiff_t(b) * T * C + heads.q_col(h);
        const float* L = lse.data() + (std::ptrdiff_t(b) * H + h) * T;
        for (int t = 0; t < T; ++t) {
          float dot = 0;
          for (int e = 0; e < hs; ++e) dot += dy[t * C + e] * y[t * C + e];
          delta[std::size_t(t)] = dot;
        }
        std::fill(dq.begin(), dq.end(), 0.0f);
        for (int t = 0; t < T; ++t)
          for (int j = 0; j <= t; ++j) {
            float qk = 0, dp = 0;
            for (int e = 0; e < hs; ++e) {
              qk += q[t * row + e] * k[j * row + e];
              dp += dy[t * C + e] * v[j * row + e];
            }
            // The kernel's expression: scores times scale·log2 e (one constant), minus lse·log2 e.
            const float pr = std::exp2(qk * scale_log2 - L[t] * float(d::flash_log2e));
            const float ds = pr * (dp - delta[std::size_t(t)]) * scale;
            const float pb = bf16_round(pr), dsb = bf16_round(ds);
            for (int e = 0; e < hs; ++e) {
              dv[std::size_t(j) * hs + e] += pb * dy[t * C + e];
              dk[std::size_t(j) * hs + e] += dsb * q[t * row + e];
              dq[std::size_t(t) * hs + e] += dsb * k[j * row + e];
            }
          }
        for (int t = 0; t < T; ++t)
          for (int e = 0; e < hs; ++e)
            dqkv[std::size_t(base + t * row + heads.q_col(h) + e)] =
                bf16_round(dq[std::size_t(t) * hs + e]);
      }
      for (int t = 0; t < T; ++t)
        for (int e = 0; e < hs; ++e) {
          dqkv[std::size_t(base + t * row + heads.k_col_of(g) + e)] =
              bf16_round(dk[std::size_t(t) * hs + e]);
          dqkv[std::size_t(base + t * row + heads.v_col_of(g) + e)] =
              bf16_round(dv[std::size_t(t) * hs + e]);
        }
    }
}

}  // namespace trainkit::test_gpu
