// trainkit/trainer/batch_ramp.hpp — a batch size in tokens per optimizer step that grows during
// training: few tokens per step early, when the gradient is large and cheap to estimate, the full
// batch later (the speedrun recipe's; modded-nanogpt grows its batch in stages, and
// "An Empirical Model of Large-Batch Training", McCandlish et al. 2018, arXiv:1812.06162, gives the
// reason: the critical batch size grows as the loss falls).
//
// The ramp is linear in the step, from `start_tokens` at step 0 to the configured tokens per step
// (trainer_config::total_batch_tokens) at step `steps`, rounded down to whole rounds of
// micro-batches (B·T tokens on every rank) and never below one round: so it climbs in stages of
// one micro-batch per rank. It is a function of the step alone, which a checkpoint holds, and the
// data source's position is checkpointed after every micro-batch it consumed, so a run resumed in
// the middle of the ramp takes the micro-batches an unbroken run takes, bit for bit. Off (every
// step the full batch, today's loop) when start_tokens or steps is 0.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace trainkit {

/// A batch-size ramp (off by default).
struct batch_ramp_config {
  std::size_t start_tokens = 0;  // tokens of step 0 over all ranks; 0 = off
  int steps = 0;                 // steps over which it grows to the full batch; 0 = off

  friend bool operator==(const batch_ramp_config&, const batch_ramp_config&) = default;

  bool on() const noexcept { return start_tokens > 0 && steps > 0; }
};

/// Micro-batch rounds (micro-batches per rank) of optimizer step `step` (0-based): the ramp's
/// tokens at that step, start + (full − start)·step / steps, in whole rounds of `round_tokens`,
/// between 1 and full_tokens / round_tokens. Requires full_tokens a positive multiple of
/// round_tokens (check() in trainer/config.hpp) and start_tokens ≤ full_tokens.
inline int ramp_rounds(const batch_ramp_config& ramp, std::size_t full_tokens,
                       std::size_t round_tokens, std::uint64_t step) noexcept {
  const std::size_t full_rounds = full_tokens / round_tokens;
  if (!ramp.on() || step >= std::uint64_t(ramp.steps)) return int(full_rounds);
  // In integers, so that no rounding of a product decides a stage.
  const std::size_t grown = std::size_t((full_tokens - std::min(ramp.start_tokens, full_tokens)) *
                                        step / std::uint64_t(ramp.steps));
  const std::size_t tokens = std::min(ramp.start_tokens, full_tokens) + grown;
  return int(std::clamp<std::size_t>(tokens / round_tokens, 1, full_rounds));
}

}  // namespace trainkit
