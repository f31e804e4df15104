// trainkit/model/cpu/kernels.hpp — forward and backward of each GPT-2 layer on the
// CPU, one function per layer as in llm.c's train_gpt2.c, over flat row-major buffers.
//
// Matrix products, where ~85% of the time goes, are Eigen GEMMs over Maps of the flat buffers (no
// copies), one slab of the output per OpenMP thread (linalg::gemm, core/linalg/gemm_cpu.hpp); the
// other loops are split over rows, channel blocks or (batch, head) pairs. Every parallel loop
// writes disjoint outputs and every sum runs in an order fixed by the shapes and the thread count
// (never by scheduling), so the same inputs give bit-identical results run after run.
// Backward functions *assign* activation gradients (except the residual stream, which they add
// into) and *add* into parameter gradients, so the model can accumulate over micro-batches.
// Not for users: gpt2/cpu.hpp is the interface.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "trainkit/core/linalg/gemm_cpu.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

// Loops over fewer elements than `parallel_threshold` stay on one thread: starting a team costs
// microseconds, and far more when another process holds a core.
#if defined(_OPENMP)
#define TRAINKIT_PRAGMA(x) _Pragma(#x)
#define TRAINKIT_OMP_PARALLEL_FOR_IF(cond) \
  TRAINKIT_PRAGMA(omp parallel for schedule(static) if (cond))
#else
#define TRAINKIT_OMP_PARALLEL_FOR_IF(cond) (void)(cond);
#endif

namespace trainkit::model::detail {

using linalg::index;

inline constexpr index parallel_threshold = 1 << 15;  // elements touched by a loop

using linalg::row_matrix;
template <class S>
using matrix_map = Eigen::Map<row_matrix<S>>;
template <class S>
using const_matrix_map = Eigen::Map<const row_matrix<S>>;
template <class S>
using row_array = Eigen::Array<S, 1, Eigen::Dynamic>;
template <class S>
using array_map = Eigen::Map<row_array<S>>;
template <class S>
using const_array_map = Eigen::Map<const row_array<S>>;

// ---- embeddings ---------------------------------------------------------------------------------

/// out[b,t] = wte[token[b,t]] + wpe[t].
template <class S>
void encoder_forward(S* out, const std::int32_t* tokens, const S* wte, const S* wpe, int B, int T,
                     int C) {
  const bool big = index(B) * T * C >= parallel_threshold;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index r = 0; r < index(B) * T; ++r) {
    const index t = r % T;
    array_map<S>(out + r * C, C) =
        const_array_map<S>(wte + index(tokens[r]) * C, C) + const_array_map<S>(wpe + t * C, C);
  }
}

/// dwte[token] += dout, dwpe[t] += dout. Sequential: tokens repeat, and the row order must not
/// depend on threads. It is O(B·T·C), noise next to the GEMMs.
template <class S>
void encoder_backward(S* dwte, S* dwpe, const S* dout, const std::int32_t* tokens, int B, int T,
                      int C) {
  for (index r = 0; r < index(B) * T; ++r) {
    const index t = r % T;
    const_array_map<S> d(dout + r * C, C);
    array_map<S>(dwte + index(tokens[r]) * C, C) += d;
    array_map<S>(dwpe + t * C, C) += d;
  }
}

// ---- layer norm ---------------------------------------------------------------------------------

/// Per row of (N, C): out = (x - mean) * rstd * w + b; keeps mean and rstd for backward.
template <class S>
void layernorm_forward(S* out, S* mean, S* rstd, const S* inp, const S* w, const S* b, index N,
                       int C) {
  const_array_map<S> weight(w, C), bias(b, C);
  const bool big = N * C >= parallel_threshold;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index r = 0; r < N; ++r) {
    const_array_map<S> x(inp + r * C, C);
    const S m = x.mean();
    const S var = (x - m).square().mean();
    const S s = S(1) / std::sqrt(var + S(1e-5));
    array_map<S>(out + r * C, C) = (x - m) * s * weight + bias;
    mean[r] = m;
    rstd[r] = s;
  }
}

/// dinp += ∂/∂x; dw += Σ_rows dout·norm; db += Σ_rows dout. The parameter sums are split over
/// channel blocks, each block summing rows in order, so no reduction crosses threads.
template <class S>
void layernorm_backward(S* dinp, S* dw, S* db, const S* dout, const S* inp, const S* w,
                        const S* mean, const S* rstd, index N, int C) {
  const_array_map<S> weight(w, C);
  const bool big = N * C >= parallel_threshold;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index r = 0; r < N; ++r) {
    const_array_map<S> x(inp + r * C, C), dy(dout + r * C, C);
    const auto norm = (x - mean[r]) * rstd[r];
    const auto dnorm = weight * dy;
    const S dnorm_mean = dnorm.mean();
    const S dnorm_norm_mean = (dnorm * norm).mean();
    array_map<S>(dinp + r * C, C) += rstd[r] * (dnorm - dnorm_mean - norm * dnorm_norm_mean);
  }
  constexpr index block = 64;
  const index blocks = (C + block - 1) / block;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index k = 0; k < blocks; ++k) {
    const index c0 = k * block, n = std::min<index>(block, C - c0);
    array_map<S> gw(dw + c0, n), gb(db + c0, n);
    for (index r = 0; r < N; ++r) {
      const_array_map<S> x(inp + r * C + c0, n), dy(dout + r * C + c0, n);
      gw += dy * (x - mean[r]) * rstd[r];
      gb += dy;
    }
  }
}

// ---- linear layers ------------------------------------------------------------------------------

// Every product goes through the shared CPU GEMM funnel (core/linalg/gemm_cpu.hpp).
using linalg::gemm;
using linalg::gemm_block;
using linalg::operand;
using linalg::split;

/// out (N, OC) = inp (N, IC) · wᵀ + bias (+ residual), w (OC, IC) as in PyTorch's nn.Linear and
/// llm.c. `bias` and `residual` (N, OC) may be null; the residual add is the transformer block's.
template <class S>
void matmul_forward(S* out, const S* inp, const S* w, const S* bias, const S* residual, index N,
                    int IC, int OC) {
  gemm(out, operand<S>{inp, IC, false}, operand<S>{w, IC, true, /*stable=*/true}, N, OC, IC, false,
       split::longer_side, [&](index r0, index nr, index c0, index nc) {
         if (!bias && !residual) return;
         for (index r = r0; r < r0 + nr; ++r) {
           array_map<S> y(out + r * OC + c0, nc);
           if (bias) y += const_array_map<S>(bias + c0, nc);
           if (residual) y += const_array_map<S>(residual + r * OC + c0, nc);
         }
       });
}

/// dinp = dout · w (assigned); dw += doutᵀ · inp; db += Σ_rows dout (db may be null), each bias
/// element summed over rows in order by the thread that owns its row of dw.
template <class S>
void matmul_backward(S* dinp, S* dw, S* db, const S* dout, const S* inp, const S* w, index N,
                     int IC, int OC) {
  gemm(dinp, operand<S>{dout, OC, false}, operand<S>{w, IC, false, /*stable=*/true}, N, IC, OC,
       false, split::longer_side, [](index, index, index, index) {});
  gemm(dw, operand<S>{dout, OC, true}, operand<S>{inp, IC, false}, OC, IC, N, true, split::rows,
       [&](index o0, index no, index, index) {
         if (!db) return;
         array_map<S> gb(db + o0, no);
         for (index r = 0; r < N; ++r) gb += const_array_map<S>(dout + r * OC + o0, no);
       });
}

// ---- GELU (tanh approximation, as GPT-2) --------------------------------------------------------

template <class S>
inline constexpr S gelu_scale = S(0.7978845608028654);  // sqrt(2/π)

template <class S>
inline constexpr index elementwise_chunk = 4096;  // a chunk fits L1; enough chunks to split

/// A chunk-sized array on the stack: the backward keeps two intermediates per chunk.
template <class S>
using chunk_array = Eigen::Array<S, 1, Eigen::Dynamic, Eigen::RowMajor, 1, elementwise_chunk<S>>;

/// tanh(u) = 1 − 2 / (exp(2u) + 1), elementwise. Eigen vectorises exp for float and double
/// always, but tanh for float only under EIGEN_FAST_MATH, which trainkit turns off (its rsqrt-based
/// sqrt is not bit-reproducible): std::tanhf one element at a time cost a d6 training step ~30%.
/// Absolute error ~1e-7 against tanh, saturating cleanly (exp → ∞ gives 1, exp → 0 gives −1).
template <class S, class Expr>
auto tanh_via_exp(const Expr& u) {
  return S(1) - S(2) / ((S(2) * u).exp() + S(1));
}

/// tanh(√(2/π)·(x + 0.044715·x³)), the term forward and backward share.
template <class S, class Expr>
auto gelu_tanh(const Expr& x) {
  return tanh_via_exp<S>(gelu_scale<S> * (x + S(0.044715) * x.cube()));
}

/// out = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
template <class S>
void gelu_forward(S* out, const S* inp, index n) {
  const index chunks = (n + elementwise_chunk<S> - 1) / elementwise_chunk<S>;
  const bool big = n >= parallel_threshold / 4;  // exp makes each element dear
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index k = 0; k < chunks; ++k) {
    const index i0 = k * elementwise_chunk<S>, m = std::min(elementwise_chunk<S>, n - i0);
    const_array_map<S> x(inp + i0, m);
    array_map<S>(out + i0, m) = S(0.5) * x * (S(1) + gelu_tanh<S>(x));
  }
}

/// dinp = dout · gelu'(x) (assigned; dinp may alias dout).
template <class S>
void gelu_backward(S* dinp, const S* inp, const S* dout, index n) {
  const index chunks = (n + elementwise_chunk<S> - 1) / elementwise_chunk<S>;
  const bool big = n >= parallel_threshold / 4;  // exp makes each element dear
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index k = 0; k < chunks; ++k) {
    const index i0 = k * elementwise_chunk<S>, m = std::min(elementwise_chunk<S>, n - i0);
    const_array_map<S> x(inp + i0, m);
    const chunk_array<S> th = gelu_tanh<S>(x);
    const chunk_array<S> local = S(0.5) * (S(1) + th) + S(0.5) * x * (S(1) - th.square()) *
                                                            gelu_scale<S> *
                                                            (S(1) + S(3 * 0.044715) * x.square());
    array_map<S>(dinp + i0, m) = const_array_map<S>(dout + i0, m) * local;
  }
}

// ---- causal multi-head self-attention -----------------------------------------------------------

/// qkv (B, T, 3C) holds q | k | v, each split into H heads of C/H. Writes the attention
/// probabilities att (B, H, T, T) (zero above the diagonal) and out (B, T, C) = att · v per head.
template <class S>
void attention_forward(S* out, S* att, const S* qkv, int B, int T, int C, int H) {
  const int hs = C / H;
  const S scale = S(1) / std::sqrt(S(hs));
  const bool big = index(B) * T * T * C >= parallel_threshold;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index bh = 0; bh < index(B) * H; ++bh) {
    const index b = bh / H, h = bh % H;
    const S* q = qkv + b * T * 3 * C + h * hs;  // (T, hs), rows 3C apart; k and v follow
    S* pp = att + bh * T * T;
    gemm_block(pp, T, operand<S>{q, 3 * C, false}, operand<S>{q + C, 3 * C, true}, T, T, hs,
               false);  // q · kᵀ (T, T)
    matrix_map<S> p(pp, T, T);
    for (index t = 0; t < T; ++t) {
      auto row = p.row(t).array();
      auto seen = row.head(t + 1);  // causal: position t attends to 0..t
      const S m = seen.maxCoeff() * scale;
      seen = (seen * scale - m).exp();
      seen /= seen.sum();
      row.tail(T - 1 - t).setZero();
    }
    gemm_block(out + b * T * C + h * hs, C, operand<S>{pp, T, false},
               operand<S>{q + 2 * C, 3 * C, false}, T, hs, T, false);  // p · v (T, hs)
  }
}

/// dqkv (B, T, 3C) assigned from dout (B, T, C); scratch holds B·H·T·T elements.
template <class S>
void attention_backward(S* dqkv, S* scratch, const S* dout, const S* qkv, const S* att, int B,
                        int T, int C, int H) {
  const int hs = C / H;
  const S scale = S(1) / std::sqrt(S(hs));
  const bool big = index(B) * T * T * C >= parallel_threshold;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index bh = 0; bh < index(B) * H; ++bh) {
    const index b = bh / H, h = bh % H;
    const index off = b * T * 3 * C + h * hs;
    const S* q = qkv + off;  // (T, hs), rows 3C apart; k and v follow, C apart
    S* dq = dqkv + off;      // likewise dq, dk, dv
    const operand<S> dy{dout + b * T * C + h * hs, C, false};  // (T, hs)
    const S* pp = att + bh * T * T;
    const_matrix_map<S> p(pp, T, T);
    S* dsp = scratch + bh * T * T;
    gemm_block(dsp, T, dy, operand<S>{q + 2 * C, 3 * C, true}, T, T, hs, false);  // dP = dy · vᵀ
    matrix_map<S> ds(dsp, T, T);
    for (index t = 0; t < T; ++t) {
      // Softmax backward on the causal part; entries above the diagonal have p = 0.
      auto pr = p.row(t).array().head(t + 1);
      auto dr = ds.row(t).array().head(t + 1);
      const S dot = (pr * dr).sum();
      dr = pr * (dr - dot) * scale;  // dS with the 1/sqrt(hs) of the scores folded in
      ds.row(t).tail(T - 1 - t).setZero();
    }
    gemm_block(dq, 3 * C, operand<S>{dsp, T, false}, operand<S>{q + C, 3 * C, false}, T, hs, T,
               false);  // dq = dS · k
    gemm_block(dq + C, 3 * C, operand<S>{dsp, T, true}, operand<S>{q, 3 * C, false}, T, hs, T,
               false);                                                            // dk = dSᵀ · q
    gemm_block(dq + 2 * C, 3 * C, operand<S>{pp, T, true}, dy, T, hs, T, false);  // dv = Pᵀ · dy
  }
}

// ---- softmax cross-entropy over the vocabulary --------------------------------------------------

/// For each of the `rows` rows of logits (rows, Vp), the cross-entropy against its target over the
/// first V columns only (the padded columns are not tokens), written to losses[r]. With backward,
/// the logits are replaced by dloss·(softmax − onehot) and the padded columns by zero.
template <class S>
void softmax_crossentropy(S* logits, double* losses, const std::int32_t* targets, index rows, int V,
                          int Vp, bool backward, S dloss) {
  const bool big = rows * V >= parallel_threshold;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index r = 0; r < rows; ++r) {
    array_map<S> row(logits + r * Vp, V);
    const index target = targets[r];
    const S m = row.maxCoeff();
    const S target_logit = row[target];
    if (!backward) {
      const S sum = (row - m).exp().sum();
      losses[r] = std::log(double(sum)) - double(target_logit - m);
      continue;
    }
    row = (row - m).exp();
    const S sum = row.sum();
    losses[r] = std::log(double(sum)) - double(target_logit - m);
    row *= dloss / sum;
    row[target] -= dloss;
    array_map<S>(logits + r * Vp + V, Vp - V).setZero();
  }
}

}  // namespace trainkit::model::detail
