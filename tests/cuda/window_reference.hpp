// tests/cuda/window_reference.hpp — sliding-window causal attention in fp64, written from its
// definition for the tests of the CUDA engines' window (own flash kernels, cuDNN) and of their CPU
// emulations: query i sees keys i − W < j ≤ i (W ≤ 0: full causal), grouped-query heads by
// detail/attention_heads.hpp, qkv (B, T, (H + 2·KV)·hs). tests/model/test_flash_window_port.cpp
// holds it to the recipe's CPU kernel (model/recipe/sliding_window_attention.hpp, pinned to
// PyTorch) and to detail::attention_backward.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "trainkit/model/detail/attention_heads.hpp"

namespace trainkit::test_gpu::window_ref {

namespace d = trainkit::model::detail;

/// Shape of a case; KV 0: as many as H.
struct shape {
  int B, T, C, H, KV = 0;
  int kv() const { return KV ? KV : H; }
  int hs() const { return C / H; }
  std::size_t row() const { return std::size_t(C + 2 * kv() * hs()); }
};

inline bool sees(int query, int key, int window) {  // the definition, written out again
  return key <= query && (window <= 0 || key > query - window);
}

// out (B, T, C), lse (B, H, T, natural log) in fp64 from the definition.
inline void naive_forward(std::vector<double>& out, std::vector<double>& lse,
                          const std::vector<double>& qkv, shape s, int window) {
  const d::attention_heads heads{s.H, s.kv(), s.hs()};
  const std::size_t row = s.row();
  const double scale = 1.0 / std::sqrt(double(s.hs()));
  out.assign(std::size_t(s.B) * s.T * s.C, 0.0);
  lse.assign(std::size_t(s.B) * s.H * s.T, 0.0);
  std::vector<double> p(std::size_t(s.T));
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h)
      for (int t = 0; t < s.T; ++t) {
        const double* q = &qkv[(std::size_t(b) * s.T + t) * row + heads.q_col(h)];
        double m = -std::numeric_limits<double>::infinity();
        for (int j = 0; j <= t; ++j) {
          if (!sees(t, j, window)) continue;
          const double* k = &qkv[(std::size_t(b) * s.T + j) * row + heads.k_col(h)];
          double dot = 0;
          for (int e = 0; e < s.hs(); ++e) dot += q[e] * k[e];
          p[std::size_t(j)] = dot * scale;
          m = std::max(m, p[std::size_t(j)]);
        }
        double sum = 0;
        for (int j = 0; j <= t; ++j)
          if (sees(t, j, window)) sum += p[std::size_t(j)] = std::exp(p[std::size_t(j)] - m);
        double* y = &out[(std::size_t(b) * s.T + t) * s.C + heads.q_col(h)];
        for (int j = 0; j <= t; ++j) {
          if (!sees(t, j, window)) continue;
          const double* v = &qkv[(std::size_t(b) * s.T + j) * row + heads.v_col(h)];
          for (int e = 0; e < s.hs(); ++e) y[e] += p[std::size_t(j)] / sum * v[e];
        }
        lse[(std::size_t(b) * s.H + h) * s.T + t] = m + std::log(sum);
      }
}

// dqkv from dout and the forward's out and lse (P = exp(s − lse), D = rowsum(dout ∘ out), as the
// kernels take them), in fp64; dk, dv summed over each group.
inline void naive_backward(std::vector<double>& dqkv, const std::vector<double>& dout,
                           const std::vector<double>& qkv, const std::vector<double>& out,
                           const std::vector<double>& lse, shape s, int window) {
  const d::attention_heads heads{s.H, s.kv(), s.hs()};
  const std::size_t row = s.row();
  const int hs = s.hs();
  const double scale = 1.0 / std::sqrt(double(hs));
  dqkv.assign(std::size_t(s.B) * s.T * row, 0.0);
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h)
      for (int t = 0; t < s.T; ++t) {
        const std::size_t at = (std::size_t(b) * s.T + t);
        const double* q = &qkv[at * row + heads.q_col(h)];
        const double* dy = &dout[at * s.C + heads.q_col(h)];
        const double* y = &out[at * s.C + heads.q_col(h)];
        double D = 0;
        for (int e = 0; e < hs; ++e) D += dy[e] * y[e];
        const double L = lse[(std::size_t(b) * s.H + h) * s.T + t];
        for (int j = 0; j <= t; ++j) {
          if (!sees(t, j, window)) continue;
          const std::size_t kj = (std::size_t(b) * s.T + j) * row;
          const double* k = &qkv[kj + heads.k_col(h)];
          const double* v = &qkv[kj + heads.v_col(h)];
          double dot = 0, dp = 0;
          for (int e = 0; e < hs; ++e) {
            dot += q[e] * k[e];
            dp += dy[e] * v[e];
          }
          const double p = std::exp(dot * scale - L), ds = p * (dp - D) * scale;
          for (int e = 0; e < hs; ++e) {
            dqkv[at * row + heads.q_col(h) + e] += ds * k[e];
            dqkv[kj + heads.k_col(h) + e] += ds * q[e];
            dqkv[kj + heads.v_col(h) + e] += p * dy[e];
          }
        }
      }
}

}  // namespace trainkit::test_gpu::window_ref
