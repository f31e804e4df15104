// trainkit/checkpoint/concepts.hpp — the Checkpointer role and the state it moves.
//
// The trainer gathers a `checkpoint_state` (model and optimizer tensors, data position, step,
// metadata) and hands it to the checkpointer. Saving may finish in the background; the
// checkpointer reports how long `save` blocked the loop (the stall the step profile shows).
#pragma once

#include <concepts>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainkit/core/memory_space.hpp"
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
///  - `wait()`: blocks until no save is in flight (end of run, signals);
///  - `C::reads_device_memory`: whether `save` and `load_latest` handle tensors in device memory
///    (`state_tensor::on_device`); the trainer refuses to compose a host-only checkpointer with a
///    device model (checkpointer_for), instead of throwing at the first save.
/// The trainer times `save` itself: that is the step's ckpt_stall_ms.
template <class C>
concept checkpointer = requires(C c, const checkpoint_state& s, checkpoint_state& out) {
  { c.save(s) } -> std::same_as<void>;
  { c.load_latest(out) } -> std::same_as<bool>;
  { c.wait() } -> std::same_as<void>;
  { C::reads_device_memory } -> std::convertible_to<bool>;
};

/// Optional hook: a background save that failed is reported by the next `take_error()` (an
/// optional message); the trainer prints it as a warning after each step.
template <class C>
concept reports_save_errors = requires(C c) {
  { c.take_error() } -> std::convertible_to<std::optional<std::string>>;
};

/// Optional hook: `warnings()` lists what `load_latest` skipped (corrupt checkpoints); the
/// trainer prints them after a resume.
template <class C>
concept reports_warnings = requires(const C cc) {
  { cc.warnings() } -> std::convertible_to<const std::vector<std::string>&>;
};

/// A checkpointer that can hold the state of a model whose tensors live in `Space`.
template <class C, class Space>
concept checkpointer_for = checkpointer<C> &&
    (std::same_as<Space, host_memory> || bool(C::reads_device_memory));

}  // namespace trainkit::checkpoint
