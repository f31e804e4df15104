// trainkit/checkpoint/concepts.hpp — the Checkpointer role and the state it moves.
//
// The trainer gathers a `checkpoint_state` (model and optimizer tensors, data position, step,
// metadata) and hands it to the checkpointer. Saving may finish in the background, and the copy
// of the state may run during the next step until its optimizer update (`defers_snapshot`); the
// trainer times the calls that block the loop (the ckpt_stall the step profile shows).
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
/// The trainer times `save` itself (and `before_update`, see defers_snapshot): that is the step's
/// ckpt_stall_ms.
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

/// Optional hook: the checkpointer's `save` only registers the snapshot and reads the state's
/// tensors later, while the next step's forward and backward run; `before_update()` returns once
/// they may be written again. The trainer calls it right before each optimizer update (the first
/// write to the state after a save) and counts its time as ckpt_stall_ms.
/// Requires:
///  - `c.before_update()`: returns when the tensors of the last `save` have been read (or their
///    later writers are ordered after the reads, on a device); returns at once with no save
///    pending. `wait()` also ends the pending snapshot.
/// What the trainer guarantees in between: the state's tensors (parameters, optimizer moments and
/// step) are only read — forward, backward, evaluation; zero_grad and backward write gradients,
/// which are not part of the state.
template <class C>
concept defers_snapshot = requires(C c) {
  { c.before_update() } -> std::same_as<void>;
};

/// Optional hook: `prepare(state)` reserves, before training starts, what saving a state of this
/// shape needs (the staging memory of an asynchronous checkpointer), so that the first save does
/// not allocate and fault in memory while the loop waits for it. The trainer calls it once before
/// step 1 (when the run checkpoints at all), on the rank that writes; its time is set-up, not
/// ckpt_stall_ms. The state's tensors are not read.
/// Requires:
///  - `c.prepare(state)`: returns once the memory is reserved; later saves of states of the same
///    or smaller size allocate nothing. Throws as `save` would for a state it cannot save.
template <class C>
concept prepares_saves = requires(C c, const checkpoint_state& s) {
  { c.prepare(s) } -> std::same_as<void>;
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
