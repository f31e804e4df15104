// trainkit/model/recipe/sliding_window_attention.hpp — causal self-attention in which position t
// sees only the `window` positions t − window + 1 … t, and the schedule of windows per layer and
// per step that the speedrun recipe uses.
//
// Sliding windows bound attention's cost and, mixed with a few long-window layers, lose little
// quality: Longformer (Beltagy et al. 2020, arXiv:2004.05150) and Gemma 2 (arXiv:2408.00118)
// alternate local and global layers; modded-nanogpt gives its layers short and long windows and
// grows the windows during training (github.com/KellerJordan/modded-nanogpt, "window size
// warmup"), so early steps attend locally and cheaply.
//
// The kernel is model::detail::attention_forward with the window applied to each row of scores
// before the softmax (the same GEMMs; a row's entries left of its window and above the diagonal
// are written 0). The backward needs nothing new: detail::attention_backward computes
// dS = P ⊙ (dP − ⟨P, dP⟩) from the probabilities, which are 0 outside the window, so it is the
// windowed attention's gradient as it stands (tests/model/test_recipe_kernels.cpp checks both
// against PyTorch). A window of T or more is detail::attention_forward bit for bit. This is the
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

/// The windows of a run: each layer short or long, both growing during training.
///   window(layer, step) = round_up(w(step), block) clipped to [1, max], with w growing linearly
///   from `start` to `long_window` (long layers) over `grow_steps`, and short layers at
///   short_window / long_window of it.
/// modded-nanogpt's pattern: every `long_every`-th layer (counting from the last, which is long)
/// has the long window, the others the short one.
struct window_schedule {
  int short_window = 0;  // tokens; 0 = no sliding window (full causal attention everywhere)
  int long_window = 0;
  int long_every = 4;  // layers L−1, L−1−k, L−1−2k, ... are long
  int start = 0;       // the long window at step 0 (0 = long_window from the start)
  int grow_steps = 0;  // steps over which it grows to long_window
  int block = 64;      // windows are multiples of this (the flash kernel's key tile)

  friend bool operator==(const window_schedule&, const window_schedule&) = default;

  bool on() const noexcept { return short_window > 0; }

  /// Throws config_error naming `window_schedule.<field>`.
  void validate() const {
    auto fail = [](const std::string& field, int v, const std::string& rule) {
      throw config_error("window_schedule." + field + " " + rule + ": " + std::to_string(v));
    };
    if (short_window < 0) fail("short_window", short_window, "must be >= 0 (0 = off)");
    if (!on()) return;
    if (long_window < short_window)
      fail("long_window", long_window, "must be >= window_schedule.short_window");
    if (long_every < 1) fail("long_every", long_every, "must be >= 1");
    if (start < 0 || start > long_window)
      fail("start", start, "must be in [0, window_schedule.long_window]");
    if (grow_steps < 0) fail("grow_steps", grow_steps, "must be >= 0");
    if (block < 1) fail("block", block, "must be >= 1");
  }

  bool is_long(int layer, int layers) const noexcept {
    return (layers - 1 - layer) % long_every == 0;
  }

  /// The window of `layer` (of `layers`) at optimizer step `step` (0-based); a value ≥ T means
  /// full causal attention. Off: a window no sequence reaches.
  int window(int layer, int layers, std::int64_t step) const noexcept {
    if (!on()) return 1 << 30;
    const int from = start > 0 ? start : long_window;
    double w = long_window;
    if (grow_steps > 0 && step < grow_steps)
      w = from + double(long_window - from) * double(step) / double(grow_steps);
    if (!is_long(layer, layers)) w *= double(short_window) / double(long_window);
    const int rounded = int(std::ceil(w / block)) * block;
    return std::clamp(rounded, 1, is_long(layer, layers) ? long_window : short_window);
  }
};

}  // namespace trainkit::model::recipe
