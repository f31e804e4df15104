// trainkit/model/cpu/rmsnorm_rope_kernels.hpp — forward and backward of the layers the Llama family
// adds to GPT-2's on the CPU: RMSNorm (with and without a gain), rotary position embeddings in
// Hugging Face's rotate-half layout, SwiGLU and ReLU², grouped-query causal attention, and the
// embedding lookup without positions. Linear layers and the softmax cross-entropy are GPT-2's
// (cpu/kernels.hpp); so are the conventions: flat row-major buffers, every parallel loop
// writing disjoint outputs, every sum in an order fixed by the shapes (bit-identical run to run),
// backward functions that *assign* activation gradients (except the residual stream, which they add
// into) and *add* into parameter gradients.
//
// Each function is the CPU twin a future CUDA kernel is tested against (as gpt2_cuda's kernels are
// against cpu/kernels.hpp): plain loops over (row, channel) with the math spelled out, one
// function per kernel, no state. The RoPE table is built in float exactly as transformers builds
// it (inv_freq = 1 / θ^(2i/hs) and angles t·inv_freq in float32), so logits agree with an exported
// model's. Not for users: llama/cpu.hpp is the interface.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "trainkit/model/cpu/kernels.hpp"
#include "trainkit/model/detail/rope_table.hpp"

namespace trainkit::model::detail {

// ---- embedding ----------------------------------------------------------------------------------

/// out[r] = wte[token[r]] for the N rows of (N, C).
template <class S>
void embedding_forward(S* out, const std::int32_t* tokens, const S* wte, index N, int C) {
  const bool big = N * C >= parallel_threshold;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index r = 0; r < N; ++r)
    array_map<S>(out + r * C, C) = const_array_map<S>(wte + index(tokens[r]) * C, C);
}

/// dwte[token[r]] += dout[r]. Sequential, rows in order: tokens repeat, and the sum order must not
/// depend on threads (a CUDA twin buckets rows by token, as gpt2_cuda's encoder backward does).
template <class S>
void embedding_backward(S* dwte, const S* dout, const std::int32_t* tokens, index N, int C) {
  for (index r = 0; r < N; ++r)
    array_map<S>(dwte + index(tokens[r]) * C, C) += const_array_map<S>(dout + r * C, C);
}

// ---- RMSNorm ------------------------------------------------------------------------------------

/// Per row of (N, C): rstd = 1/√(mean(x²) + ε), out = x·rstd·w (w null: no gain). Keeps rstd for
/// backward. transformers' LlamaRMSNorm computes the same (ε inside the root).
template <class S>
void rmsnorm_forward(S* out, S* rstd, const S* inp, const S* w, index N, int C, S eps) {
  const bool big = N * C >= parallel_threshold;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index r = 0; r < N; ++r) {
    const_array_map<S> x(inp + r * C, C);
    const S s = S(1) / std::sqrt(x.square().mean() + eps);
    if (w)
      array_map<S>(out + r * C, C) = x * s * const_array_map<S>(w, C);
    else
      array_map<S>(out + r * C, C) = x * s;
    rstd[r] = s;
  }
}

/// dinp += ∂/∂x = rstd·(ŵdy − x̂·mean(ŵdy·x̂)) with x̂ = x·rstd, ŵdy = w·dy; dw += Σ_rows dy·x̂
/// (w and dw null: no gain). The gain sums are split over channel blocks, each summing rows in
/// order, so no reduction crosses threads.
template <class S>
void rmsnorm_backward(S* dinp, S* dw, const S* dout, const S* inp, const S* w, const S* rstd,
                      index N, int C) {
  const bool big = N * C >= parallel_threshold;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index r = 0; r < N; ++r) {
    const_array_map<S> x(inp + r * C, C), dy(dout + r * C, C);
    const auto norm = x * rstd[r];
    if (w) {
      const auto dnorm = const_array_map<S>(w, C) * dy;
      const S dot = (dnorm * norm).mean();
      array_map<S>(dinp + r * C, C) += rstd[r] * (dnorm - norm * dot);
    } else {
      const S dot = (dy * norm).mean();
      array_map<S>(dinp + r * C, C) += rstd[r] * (dy - norm * dot);
    }
  }
  if (!dw) return;
  constexpr index block = 64;
  const index blocks = (C + block - 1) / block;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index k = 0; k < blocks; ++k) {
    const index c0 = k * block, n = std::min<index>(block, C - c0);
    array_map<S> gw(dw + c0, n);
    for (index r = 0; r < N; ++r)
      gw += const_array_map<S>(dout + r * C + c0, n) * const_array_map<S>(inp + r * C + c0, n) *
            rstd[r];
  }
}

// ---- rotary position embeddings (rotate-half) --------------------------------------------------

/// In place on `heads` consecutive heads of hs channels in each of the B·T rows of x (rows
/// `stride` apart, row r at position r % T): the rotate-half rotation
///   y[i] = x[i]·cos − x[i+h]·sin,  y[i+h] = x[i+h]·cos + x[i]·sin   (i < h = hs/2).
/// inverse = true rotates by −angle: the backward (the rotation's transpose) and its own inverse.
template <class S>
void rope_rotate(S* x, const rope_table& rope, index N, int T, int heads, int hs, index stride,
                 bool inverse) {
  const int h = hs / 2;
  const S sign = inverse ? S(-1) : S(1);
  const bool big = N * heads * hs >= parallel_threshold;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index r = 0; r < N; ++r) {
    const float* c = rope.cos.data() + std::size_t(r % T) * std::size_t(rope.half);
    const float* s = rope.sin.data() + std::size_t(r % T) * std::size_t(rope.half);
    for (int head = 0; head < heads; ++head) {
      S* v = x + r * stride + index(head) * hs;
      for (int i = 0; i < h; ++i) {
        const S a = v[i], b = v[i + h], ci = S(c[i]), si = sign * S(s[i]);
        v[i] = a * ci - b * si;
        v[i + h] = b * ci + a * si;
      }
    }
  }
}

/// Parameter-free RMSNorm of each of `heads` consecutive heads of hs channels in each of N rows
/// (rows `stride` apart), in place; rstd (N, heads) kept for backward. QK-norm (nanochat).
template <class S>
void head_rmsnorm_forward(S* x, S* rstd, index N, int heads, int hs, index stride, S eps) {
  const bool big = N * heads * hs >= parallel_threshold;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index r = 0; r < N; ++r)
    for (int head = 0; head < heads; ++head) {
      array_map<S> v(x + r * stride + index(head) * hs, hs);
      const S s = S(1) / std::sqrt(v.square().mean() + eps);
      v *= s;
      rstd[r * heads + head] = s;
    }
}

/// Backward of head_rmsnorm_forward, in place: dx (the gradient of the normalised heads on entry,
/// of the raw heads on exit) from the normalised output y = x·rstd: dx = rstd·(dy − y·mean(dy·y)).
template <class S>
void head_rmsnorm_backward(S* dx, const S* y, const S* rstd, index N, int heads, int hs,
                           index stride) {
  const bool big = N * heads * hs >= parallel_threshold;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index r = 0; r < N; ++r)
    for (int head = 0; head < heads; ++head) {
      const index o = r * stride + index(head) * hs;
      array_map<S> d(dx + o, hs);
      const_array_map<S> yn(y + o, hs);
      const S dot = (d * yn).mean();
      d = rstd[r * heads + head] * (d - yn * dot);
    }
}

// ---- MLP nonlinearities -------------------------------------------------------------------------

/// SwiGLU: fc (N, 2F) holds gate | up per row; out (N, F) = silu(gate)·up, silu(g) = g·σ(g).
template <class S>
void swiglu_forward(S* out, const S* fc, index N, int F) {
  const bool big = N * F >= parallel_threshold / 4;  // exp makes each element dear
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index r = 0; r < N; ++r) {
    const_array_map<S> g(fc + r * 2 * F, F), u(fc + r * 2 * F + F, F);
    array_map<S>(out + r * F, F) = g / (S(1) + (-g).exp()) * u;
  }
}

/// dfc (N, 2F) = [dgate | dup] assigned from dout (N, F): dup = dout·silu(g),
/// dgate = dout·u·σ(g)·(1 + g·(1 − σ(g))).
template <class S>
void swiglu_backward(S* dfc, const S* fc, const S* dout, index N, int F) {
  const bool big = N * F >= parallel_threshold / 4;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index r = 0; r < N; ++r) {
    const_array_map<S> g(fc + r * 2 * F, F), u(fc + r * 2 * F + F, F), dy(dout + r * F, F);
    const row_array<S> sig = S(1) / (S(1) + (-g).exp());
    array_map<S>(dfc + r * 2 * F + F, F) = dy * g * sig;
    array_map<S>(dfc + r * 2 * F, F) = dy * u * sig * (S(1) + g * (S(1) - sig));
  }
}

/// ReLU²: out (n) = max(x, 0)².
template <class S>
void relu_squared_forward(S* out, const S* inp, index n) {
  const bool big = n >= parallel_threshold;
  const index chunks = (n + elementwise_chunk<S> - 1) / elementwise_chunk<S>;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index k = 0; k < chunks; ++k) {
    const index i0 = k * elementwise_chunk<S>, m = std::min(elementwise_chunk<S>, n - i0);
    array_map<S>(out + i0, m) = const_array_map<S>(inp + i0, m).max(S(0)).square();
  }
}

/// dinp = dout·2·max(x, 0) (assigned; dinp may alias dout).
template <class S>
void relu_squared_backward(S* dinp, const S* inp, const S* dout, index n) {
  const bool big = n >= parallel_threshold;
  const index chunks = (n + elementwise_chunk<S> - 1) / elementwise_chunk<S>;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index k = 0; k < chunks; ++k) {
    const index i0 = k * elementwise_chunk<S>, m = std::min(elementwise_chunk<S>, n - i0);
    array_map<S>(dinp + i0, m) =
        const_array_map<S>(dout + i0, m) * S(2) * const_array_map<S>(inp + i0, m).max(S(0));
  }
}

// ---- grouped-query causal attention -------------------------------------------------------------

/// The shape of one attention call: qkv rows (B·T of them) hold q (H heads) | k (KV heads) |
/// v (KV heads), each head hs wide; query head h reads key/value head h / (H/KV), as transformers'
/// repeat_kv arranges them.
struct gqa_shape {
  int B = 0, T = 0, H = 0, KV = 0, hs = 0;

  index row() const noexcept { return index(H + 2 * KV) * hs; }  // qkv row stride
  index k_offset() const noexcept { return index(H) * hs; }
  index v_offset() const noexcept { return index(H + KV) * hs; }
  int group() const noexcept { return H / KV; }
};

/// out (B, T, H·hs) = softmax(q·kᵀ/√hs, causal)·v per query head; att (B, H, T, T) keeps the
/// probabilities (zero above the diagonal) for backward.
template <class S>
void gqa_attention_forward(S* out, S* att, const S* qkv, const gqa_shape& g) {
  const int T = g.T, hs = g.hs;
  const index C = index(g.H) * hs, row = g.row();
  const S scale = S(1) / std::sqrt(S(hs));
  const bool big = index(g.B) * T * T * C >= parallel_threshold;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index bh = 0; bh < index(g.B) * g.H; ++bh) {
    const index b = bh / g.H, h = bh % g.H, kvh = h / g.group();
    const S* base = qkv + b * T * row;
    const S* q = base + h * hs;                   // (T, hs), rows `row` apart
    const S* k = base + g.k_offset() + kvh * hs;  // likewise
    const S* v = base + g.v_offset() + kvh * hs;
    S* pp = att + bh * T * T;
    gemm_block(pp, T, operand<S>{q, row, false}, operand<S>{k, row, true}, T, T, hs,
               false);  // q · kᵀ (T, T)
    matrix_map<S> p(pp, T, T);
    for (index t = 0; t < T; ++t) {
      auto r = p.row(t).array();
      auto seen = r.head(t + 1);  // causal: position t attends to 0..t
      const S m = seen.maxCoeff() * scale;
      seen = (seen * scale - m).exp();
      seen /= seen.sum();
      r.tail(T - 1 - t).setZero();
    }
    gemm_block(out + b * T * C + h * hs, C, operand<S>{pp, T, false}, operand<S>{v, row, false}, T,
               hs, T, false);  // p · v (T, hs)
  }
}

/// dqkv (B, T, (H+2KV)·hs) assigned from dout (B, T, H·hs); scratch holds B·H·T·T elements.
/// Parallel over (batch, KV head): the H/KV query heads sharing a key/value head add their dk and
/// dv in head order, so the sums do not depend on threads.
template <class S>
void gqa_attention_backward(S* dqkv, S* scratch, const S* dout, const S* qkv, const S* att,
                            const gqa_shape& g) {
  const int T = g.T, hs = g.hs;
  const index C = index(g.H) * hs, row = g.row();
  const S scale = S(1) / std::sqrt(S(hs));
  const bool big = index(g.B) * T * T * C >= parallel_threshold;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index bk = 0; bk < index(g.B) * g.KV; ++bk) {
    const index b = bk / g.KV, kvh = bk % g.KV;
    const S* base = qkv + b * T * row;
    S* dbase = dqkv + b * T * row;
    const S* k = base + g.k_offset() + kvh * hs;
    const S* v = base + g.v_offset() + kvh * hs;
    S* dk = dbase + g.k_offset() + kvh * hs;
    S* dv = dbase + g.v_offset() + kvh * hs;
    for (int r = 0; r < g.group(); ++r) {
      const index h = kvh * g.group() + r, bh = b * g.H + h;
      const S* q = base + h * hs;
      S* dq = dbase + h * hs;
      const operand<S> dy{dout + b * T * C + h * hs, C, false};  // (T, hs)
      const S* pp = att + bh * T * T;
      const_matrix_map<S> p(pp, T, T);
      S* dsp = scratch + bh * T * T;
      gemm_block(dsp, T, dy, operand<S>{v, row, true}, T, T, hs, false);  // dP = dy · vᵀ
      matrix_map<S> ds(dsp, T, T);
      for (index t = 0; t < T; ++t) {
        auto pr = p.row(t).array().head(t + 1);
        auto dr = ds.row(t).array().head(t + 1);
        const S dot = (pr * dr).sum();
        dr = pr * (dr - dot) * scale;  // dS with the 1/√hs of the scores folded in
        ds.row(t).tail(T - 1 - t).setZero();
      }
      const bool add = r > 0;  // later query heads of the group add to dk, dv
      gemm_block(dq, row, operand<S>{dsp, T, false}, operand<S>{k, row, false}, T, hs, T,
                 false);  // dq = dS · k
      gemm_block(dk, row, operand<S>{dsp, T, true}, operand<S>{q, row, false}, T, hs, T,
                 add);                                                  // dk (+)= dSᵀ · q
      gemm_block(dv, row, operand<S>{pp, T, true}, dy, T, hs, T, add);  // dv (+)= Pᵀ · dy
    }
  }
}

}  // namespace trainkit::model::detail
