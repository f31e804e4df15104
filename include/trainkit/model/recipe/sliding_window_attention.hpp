// trainkit/model/recipe/sliding_window_attention.hpp — causal self-attention in which position t
// sees only the `window` positions t − window + 1 … t (the schedule of windows per layer and per
// step that the speedrun recipe uses is recipe/window_schedule.hpp, which says where it comes
// from).
//
// The kernels are model::detail::attention_forward (GPT-2's layout) and gqa_attention_forward
// (the Llama's grouped-query layout) with the window applied to each row of scores before the
// softmax (the same GEMMs; a row's entries left of its window and above the diagonal are written
// 0). The backward needs nothing new: detail::attention_backward and gqa_attention_backward
// compute dS = P ⊙ (dP − ⟨P, dP⟩) from the probabilities, which are 0 outside the window, so they
// are the windowed attention's gradient as they stand (tests/model/test_recipe_kernels.cpp checks
// the MHA form against PyTorch, tests/model/test_llama_recipe.cpp the whole Llama with windows). A
// window of T or more is the unwindowed kernel bit for bit. This is the
// CPU part; the own flash kernel (skipping key tiles wholly left of the window) and cuDNN's
// sliding-window mode are the CUDA steps still to come.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/model/cpu/kernels.hpp"
#include "trainkit/model/cpu/rmsnorm_rope_kernels.hpp"
#include "trainkit/model/recipe/window_schedule.hpp"

namespace trainkit::model::recipe {

/// qkv (B, T, 3C) as detail::attention_forward takes it; att (B, H, T, T) and out (B, T, C) as it
/// writes them, each position t attending to max(0, t − window + 1) … t. window ≥ 1.
template <class S>
void sliding_window_attention_forward(S* out, S* att, const S* qkv, int B, int T, int C, int H,
                                      int window) {
  using detail::index;
  if (window >= T) {  // the whole causal row: today's kernel itself
    detail::attention_forward(out, att, qkv, B, T, C, H);
    return;
  }
  const int hs = C / H;
  const S scale = S(1) / std::sqrt(S(hs));
  const bool big = index(B) * T * T * C >= detail::parallel_threshold;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index bh = 0; bh < index(B) * H; ++bh) {
    const index b = bh / H, h = bh % H;
    const S* q = qkv + b * T * 3 * C + h * hs;  // (T, hs), rows 3C apart; k and v follow
    S* pp = att + bh * T * T;
    linalg::gemm_block(pp, T, linalg::operand<S>{q, 3 * C, false},
                       linalg::operand<S>{q + C, 3 * C, true}, T, T, hs, false);  // q·kᵀ (T, T)
    detail::matrix_map<S> p(pp, T, T);
    for (index t = 0; t < T; ++t) {
      const index first = std::max<index>(0, t - window + 1);
      auto row = p.row(t).array();
      auto seen = row.segment(first, t + 1 - first);  // the window, ending at t
      const S m = seen.maxCoeff() * scale;
      seen = (seen * scale - m).exp();
      seen /= seen.sum();
      row.head(first).setZero();
      row.tail(T - 1 - t).setZero();
    }
    linalg::gemm_block(out + b * T * C + h * hs, C, linalg::operand<S>{pp, T, false},
                       linalg::operand<S>{q + 2 * C, 3 * C, false}, T, hs, T, false);  // p·v
  }
}

/// detail::gqa_attention_forward (qkv rows q | k | v with H query and KV key/value heads) with
/// each position t attending to max(0, t − window + 1) … t. window ≥ 1; ≥ T is the unwindowed
/// kernel itself.
template <class S>
void sliding_window_gqa_attention_forward(S* out, S* att, const S* qkv, const detail::gqa_shape& g,
                                          int window) {
  using detail::index;
  const int T = g.T, hs = g.hs;
  if (window >= T) {
    detail::gqa_attention_forward(out, att, qkv, g);
    return;
  }
  const index C = index(g.H) * hs, row = g.row();
  const S scale = S(1) / std::sqrt(S(hs));
  const bool big = index(g.B) * T * T * C >= detail::parallel_threshold;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (index bh = 0; bh < index(g.B) * g.H; ++bh) {
    const index b = bh / g.H, h = bh % g.H, kvh = h / g.group();
    const S* base = qkv + b * T * row;
    const S* q = base + h * hs;
    const S* k = base + g.k_offset() + kvh * hs;
    const S* v = base + g.v_offset() + kvh * hs;
    S* pp = att + bh * T * T;
    linalg::gemm_block(pp, T, linalg::operand<S>{q, row, false}, linalg::operand<S>{k, row, true},
                       T, T, hs, false);  // q·kᵀ (T, T)
    detail::matrix_map<S> p(pp, T, T);
    for (index t = 0; t < T; ++t) {
      const index first = std::max<index>(0, t - window + 1);
      auto r = p.row(t).array();
      auto seen = r.segment(first, t + 1 - first);  // the window, ending at t
      const S m = seen.maxCoeff() * scale;
      seen = (seen * scale - m).exp();
      seen /= seen.sum();
      r.head(first).setZero();
      r.tail(T - 1 - t).setZero();
    }
    linalg::gemm_block(out + b * T * C + h * hs, C, linalg::operand<S>{pp, T, false},
                       linalg::operand<S>{v, row, false}, T, hs, T, false);  // p·v (T, hs)
  }
}

}  // namespace trainkit::model::recipe
