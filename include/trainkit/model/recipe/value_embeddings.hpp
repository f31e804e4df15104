// trainkit/model/recipe/value_embeddings.hpp — value embeddings: extra token-embedding tables
// mixed into the attention values of the first and last layers, and their gradients.
//
// modded-nanogpt (github.com/KellerJordan/modded-nanogpt, the "value embeddings" records) gives
// the attention of the first k and the last k layers a learned embedding of the input token,
// v ← λ₀·v + λ₁·E[token], with k tables shared in the U-net pattern: table i feeds layer i and
// layer L − k + i (the same table at the mirrored depth). The values get a direct, layer-specific
// view of the token, which the residual stream of a small model dilutes. Per row n:
//   out[n] = λ₀·v[n] + λ₁·E[tokens[n]]
//   dv[n]  = λ₀·dout[n];   dλ₀ += Σ v[n]·dout[n];   dλ₁ += Σ E[tokens[n]]·dout[n]
//   dE[tokens[n]] += λ₁·dout[n]         (rows in order: the sums do not depend on threads)
// Off (no tables) the model never calls these: today's numbers. Pinned to PyTorch by
// tests/fixtures/recipe/make_recipe_fixtures.py.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "trainkit/core/error.hpp"

namespace trainkit::model::recipe {

/// Which table feeds which layer: `tables` tables over `layers` layers in the U-net pattern.
struct value_embedding_plan {
  int tables = 0;  // 0 = off
  int layers = 0;

  /// Throws config_error naming value_embedding_plan.tables when 2·tables > layers.
  void validate() const {
    if (tables < 0 || 2 * tables > layers)
      throw config_error("value_embedding_plan.tables must be in [0, layers/2] (" +
                         std::to_string(layers) + " layers): " + std::to_string(tables));
  }

  /// The table of `layer`, or −1 for a layer without one.
  int table_of(int layer) const noexcept {
    if (layer < tables) return layer;
    if (layer >= layers - tables) return layer - (layers - tables);
    return -1;
  }
};

/// out (N, C) = lambda0·v + lambda1·table[tokens] for N rows of C values; v rows `ld_v` apart,
/// out rows `ld_out` apart (the value part of a fused qkv), table (V, C) dense.
template <class S>
void value_embed_forward(S* out, std::ptrdiff_t ld_out, const S* v, std::ptrdiff_t ld_v,
                         const S* table, const std::int32_t* tokens, std::ptrdiff_t N, int C,
                         S lambda0, S lambda1) {
  for (std::ptrdiff_t n = 0; n < N; ++n) {
    const S* e = table + std::ptrdiff_t(tokens[n]) * C;
    for (int c = 0; c < C; ++c) out[n * ld_out + c] = lambda0 * v[n * ld_v + c] + lambda1 * e[c];
  }
}

/// The backward of value_embed_forward: dv (assigned) = lambda0·dout; dtable (accumulated)
/// += lambda1·dout at each row's token; dlambda[0], dlambda[1] (accumulated) += Σ v·dout and
/// Σ table[tokens]·dout, summed in double in row order.
template <class S>
void value_embed_backward(S* dv, std::ptrdiff_t ld_dv, S* dtable, S* dlambda, const S* dout,
                          std::ptrdiff_t ld_dout, const S* v, std::ptrdiff_t ld_v, const S* table,
                          const std::int32_t* tokens, std::ptrdiff_t N, int C, S lambda0,
                          S lambda1) {
  double d0 = 0.0, d1 = 0.0;
  for (std::ptrdiff_t n = 0; n < N; ++n) {
    const std::ptrdiff_t t = tokens[n];
    const S* e = table + t * C;
    S* de = dtable + t * C;
    for (int c = 0; c < C; ++c) {
      const S g = dout[n * ld_dout + c];
      d0 += double(v[n * ld_v + c]) * double(g);
      d1 += double(e[c]) * double(g);
      de[c] += lambda1 * g;
      dv[n * ld_dv + c] = lambda0 * g;
    }
  }
  dlambda[0] += static_cast<S>(d0);
  dlambda[1] += static_cast<S>(d1);
}

}  // namespace trainkit::model::recipe
