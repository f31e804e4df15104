// trainkit/checkpoint/concepts.hpp — the Checkpointer role and the state it moves.
//
// The trainer gathers a `checkpoint_state` (model and optimizer tensors, data position, step,
// metadata) and hands it to the checkpointer. Saving may finish in the background; the
// checkpointer reports how long `save` blocked the loop (the stall the step profile shows).
#pragma once

#include <concepts>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trainkit/core/tensor.hpp"

namespace trainkit::checkpoint {

/// Everything a checkpoint holds. For saving, tensors are read; for loading, the caller lists the
/// tensors it expects (name, dtype, shape, destination) and the checkpointer fills them, throwing
/// `format_error` when a tensor is missing or its dtype/shape differ.
struct checkpoint_state {
  std::uint64_t step = 0;
  std::vector<state_tensor> tensors;
  std::map<std::string, std::string> meta;  // data position, config, seed, ...
};

/// Requires:
///  - `save(state)`: records a checkpoint for `state.step` (possibly completing later);
///  - `load_latest(state)`: fills `state` from the newest complete, valid checkpoint and returns
///    true, or returns false when there is none;
///  - `wait()`: blocks until no save is in flight (end of run, signals).
/// The trainer times `save` itself: that is the step's ckpt_stall_ms.
template <class C>
concept checkpointer = requires(C c, const checkpoint_state& s, checkpoint_state& out) {
  { c.save(s) } -> std::same_as<void>;
  { c.load_latest(out) } -> std::same_as<bool>;
  { c.wait() } -> std::same_as<void>;
};

}  // namespace trainkit::checkpoint
