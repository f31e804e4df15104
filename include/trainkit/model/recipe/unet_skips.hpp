// trainkit/model/recipe/unet_skips.hpp — U-net skip connections across the depth of a
// transformer: the output of encoder block i is added, times a learned scalar, to the input of
// its mirror in the decoder half, and the gradients of that.
//
// modded-nanogpt (github.com/KellerJordan/modded-nanogpt, the "U-net pattern skip connections"
// record) splits L blocks into an encoder half (blocks 0 … L/2 − 1, whose outputs it keeps) and a
// decoder half; before decoder block L/2 + i runs, x ← x + w_i·skip_{L/2 − 1 − i}, with w_i a
// learned scalar (initialised to 1). Early features reach late layers directly, which helps small,
// short-trained models. Per element:
//   x ← x + w·skip;      dskip += w·dx;      dw += Σ dx·skip      (dx passes through unchanged)
// Off (no skips) the model never calls these: today's numbers. Pinned to PyTorch by
// tests/fixtures/recipe/make_recipe_fixtures.py.
#pragma once

#include <cstddef>

namespace trainkit::model::recipe {

/// Which encoder output feeds which decoder block, for `layers` blocks.
struct unet_plan {
  int layers = 0;

  int encoder_blocks() const noexcept { return layers / 2; }
  /// The encoder block whose output is added before block `layer`, or −1 (encoder half, or the
  /// middle block of an odd depth beyond the mirrored pairs).
  int skip_source(int layer) const noexcept {
    const int half = layers / 2, i = layer - (layers - half);
    return i >= 0 && i < half ? half - 1 - i : -1;
  }
  /// The weight index of decoder block `layer` (0 … encoder_blocks() − 1), or −1.
  int weight_index(int layer) const noexcept {
    const int i = layer - (layers - layers / 2);
    return i >= 0 && i < layers / 2 ? i : -1;
  }
};

/// x (n) += w·skip (n).
template <class S>
void unet_skip_forward(S* x, const S* skip, std::ptrdiff_t n, S w) {
  for (std::ptrdiff_t i = 0; i < n; ++i) x[i] += w * skip[i];
}

/// dskip (accumulated) += w·dx; dw (accumulated) += Σ dx·skip, summed in double in order.
template <class S>
void unet_skip_backward(S* dskip, S* dw, const S* dx, const S* skip, std::ptrdiff_t n, S w) {
  double sum = 0.0;
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    dskip[i] += w * dx[i];
    sum += double(dx[i]) * double(skip[i]);
  }
  *dw += static_cast<S>(sum);
}

}  // namespace trainkit::model::recipe
