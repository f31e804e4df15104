// trainkit/model/recipe/window_schedule.hpp — which attention window each layer has at each step:
// short and long layers, both windows growing during training (the speedrun recipe's sliding
// windows; the attention itself is recipe/sliding_window_attention.hpp on the CPU).
//
// Sliding windows bound attention's cost and, mixed with a few long-window layers, lose little
// quality: Longformer (Beltagy et al. 2020, arXiv:2004.05150) and Gemma 2 (arXiv:2408.00118)
// alternate local and global layers; modded-nanogpt gives its layers short and long windows and
// grows the windows during training (github.com/KellerJordan/modded-nanogpt, "window size
// warmup"), so early steps attend locally and cheaply. A layer's window is a function of the
// layer and the optimizer step only, so a resumed run (which restores the step) attends exactly
// as the run it continues. No Eigen, no CUDA: the configs of both devices include it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "trainkit/core/error.hpp"

namespace trainkit::model::recipe {

/// The windows of a run: each layer short or long, both growing during training.
///   window(layer, step) = round_up(w(step), block) clipped to [1, short or long window], with
///   w growing linearly from `start` to `long_window` (long layers) over `grow_steps`, and short
///   layers at short_window / long_window of it.
/// Which layers are long: with an empty `pattern`, every `long_every`-th layer counting from the
/// last (which is long), modded-nanogpt's arrangement; otherwise `pattern` is a string of 'S' and
/// 'L' read cyclically from layer 0 (layer l is pattern[l mod |pattern|]).
struct window_schedule {
  int short_window = 0;  // tokens; 0 = no sliding window (full causal attention everywhere)
  int long_window = 0;
  int long_every = 4;  // layers L−1, L−1−k, L−1−2k, ... are long (when pattern is empty)
  int start = 0;       // the long window at step 0 (0 = long_window from the start)
  int grow_steps = 0;  // steps over which it grows to long_window
  int block = 64;      // windows are multiples of this (the flash kernel's key tile)
  std::string pattern{};  // 'S'/'L' per layer, cyclic; empty = the long_every rule

  friend bool operator==(const window_schedule&, const window_schedule&) = default;

  bool on() const noexcept { return short_window > 0; }

  /// Throws config_error naming `<prefix>.<field>`.
  void validate(const std::string& prefix = "window_schedule") const {
    auto fail = [&](const std::string& field, const std::string& v, const std::string& rule) {
      throw config_error(prefix + "." + field + " " + rule + ": " + v);
    };
    auto num = [](int v) { return std::to_string(v); };
    if (short_window < 0) fail("short_window", num(short_window), "must be >= 0 (0 = off)");
    if (!on()) return;
    if (long_window < short_window)
      fail("long_window", num(long_window), "must be >= " + prefix + ".short_window");
    if (long_every < 1) fail("long_every", num(long_every), "must be >= 1");
    if (start < 0 || start > long_window)
      fail("start", num(start), "must be in [0, " + prefix + ".long_window]");
    if (grow_steps < 0) fail("grow_steps", num(grow_steps), "must be >= 0");
    if (block < 1) fail("block", num(block), "must be >= 1");
    if (pattern.find_first_not_of("SL") != std::string::npos)
      fail("pattern", "'" + pattern + "'", "must be letters S (short) and L (long)");
  }

  bool is_long(int layer, int layers) const noexcept {
    if (!pattern.empty()) return pattern[std::size_t(layer) % pattern.size()] == 'L';
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
