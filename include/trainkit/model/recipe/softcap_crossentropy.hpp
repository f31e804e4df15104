// trainkit/model/recipe/softcap_crossentropy.hpp — logit soft-capping fused into the softmax
// cross-entropy on the host: the loss of z = cap·tanh(x / cap) instead of the logits x, and with
// backward the gradient with respect to x, written where the logits were.
//
// Soft-capping bounds the logits smoothly to (−cap, cap), which keeps the output layer from
// growing over-confident early in training. Gemma 2 applies it to its final logits (cap 30;
// Gemma Team, "Gemma 2: Improving Open Language Models at a Practical Size", arXiv:2408.00118,
// 2024); modded-nanogpt adopted it for the GPT-2 speedrun (github.com/KellerJordan/modded-nanogpt,
// cap 30, later 15). The chain rule through the cap is a factor per logit:
//   ∂z/∂x = 1 − tanh²(x / cap) = 1 − (z / cap)²,
// so the gradient row is dloss·(softmax(z) − onehot(target)) ⊙ (1 − (z / cap)²), and nothing
// beyond the row itself is stored.
//
// cap = 0 is "off" and calls model::detail::softmax_crossentropy itself, so a model that passes
// 0 computes today's numbers bit for bit. The CUDA classifier kernel's cap (model/cuda/
// classifier.cuh) is tested against this function. Pinned to PyTorch (forward and gradient) by
// tests/fixtures/recipe/make_recipe_fixtures.py.
#pragma once

#include <cmath>
#include <cstdint>

#include "trainkit/model/cpu/kernels.hpp"

namespace trainkit::model::recipe {

/// softmax_crossentropy of z = cap·tanh(logits / cap) for each of the `rows` rows of logits
/// (rows, Vp), over the first V columns, losses to losses[r]; with backward, the logits replaced
/// by the gradient of dloss·loss with respect to them and the padded columns by zero. cap ≤ 0:
/// exactly detail::softmax_crossentropy.
template <class S>
void softcapped_crossentropy(S* logits, double* losses, const std::int32_t* targets,
                             detail::index rows, int V, int Vp, bool backward, S dloss, S cap) {
  if (!(cap > S(0))) {
    detail::softmax_crossentropy(logits, losses, targets, rows, V, Vp, backward, dloss);
    return;
  }
  const S inv_cap = S(1) / cap;
  const bool big = rows * V >= detail::parallel_threshold;
  TRAINKIT_OMP_PARALLEL_FOR_IF(big)
  for (detail::index r = 0; r < rows; ++r) {
    detail::array_map<S> row(logits + r * Vp, V);
    const detail::index target = targets[r];
    row = cap * (row * inv_cap).tanh();  // z (V,)
    const S m = row.maxCoeff();
    const S target_z = row[target];
    if (!backward) {
      const S sum = (row - m).exp().sum();
      losses[r] = std::log(double(sum)) - double(target_z - m);
      continue;
    }
    const S sum = (row - m).exp().sum();
    losses[r] = std::log(double(sum)) - double(target_z - m);
    const S target_slope = S(1) - (target_z * inv_cap) * (target_z * inv_cap);
    row = (row - m).exp() * (dloss / sum) * (S(1) - (row * inv_cap).square());
    row[target] -= dloss * target_slope;
    detail::array_map<S>(logits + r * Vp + V, Vp - V).setZero();
  }
}

}  // namespace trainkit::model::recipe
