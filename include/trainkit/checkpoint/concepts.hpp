// trainkit/checkpoint/concepts.hpp — the Checkpointer role and the state it moves.
//
// The trainer gathers a `checkpoint_state` (model and optimizer tensors, data position, step,
// metadata) and hands it to the checkpointer. Saving may finish in the background, and the copy
// of the state may run during the next step until its optimizer update (`defers_snapshot`); the
// trainer times the calls that block the loop (the ckpt_stall the step profile shows).
//
// Under ZeRO-1 each rank holds a different shard of the optimizer state, so no rank can save the
// whole state: an optimizer whose state is sharded says so (`sharded_optimizer`), the trainer
// hands every rank's part to a `sharded_checkpointer` together with a `save_communicator` (the
// reducer's collectives), and the checkpointer's save and load are collective.
#pragma once

#include <concepts>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
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

/// One rank's slice of the sharded tensors of a state: elements [offset, offset + count) of each
/// of them, whose whole has `total` elements, cut over `world_size` ranks (ZeRO-1).
struct shard_range {
  int rank = 0;
  int world_size = 1;
  std::uint64_t offset = 0;
  std::uint64_t count = 0;
  std::uint64_t total = 0;

  friend bool operator==(const shard_range&, const shard_range&) = default;
};

/// The state of a run part of which is sharded over ranks. `common` is what every rank holds the
/// same of (model parameters, the optimizer's step, the data position in `meta`): rank 0 writes
/// it and every rank loads it. `shard` is this rank's slices of the sharded tensors, each named
/// after the whole tensor it is a slice of ("optim.m", shape {range.count}), so a checkpoint of
/// N ranks can be resliced for M, or reassembled into the whole tensor one process uses.
struct sharded_checkpoint_state {
  checkpoint_state common;
  std::vector<state_tensor> shard;
  shard_range range;
};

/// What an optimizer whose state is sharded over ranks hands the trainer.
struct optimizer_shard {
  std::vector<state_tensor> common;  // the same on every rank ("optim.step")
  std::vector<state_tensor> shard;   // this rank's slices, named after the whole tensors
  shard_range range;
};

/// Optional hook of an optimizer: its state is sharded over ranks (ZeRO-1), so the trainer saves
/// and resumes it with a sharded_checkpointer instead of `state()` on rank 0.
/// Requires:
///  - `o.sharded_state()`: an optimizer_shard viewing the optimizer's own storage (a save reads
///    it, a resume writes it), the range being this rank's cut of the flat buffer.
template <class O>
concept sharded_optimizer = requires(O o) {
  { o.sharded_state() } -> std::same_as<optimizer_shard>;
};

/// The collectives a sharded save or load uses so that every rank reaches the same decision
/// (commit or not, which checkpoint to load). The data-parallel reducers provide them
/// (reduce::rank_aware); `single_process` is the world of one.
/// Requires, every call collective (every rank calls it, in the same order):
///  - `rank()`, `world_size()`: this rank in [0, world_size);
///  - `sum(span<double>)`: element-wise sum over ranks, in place;
///  - `any(bool)`: true on every rank if it is true on one.
template <class C>
concept save_communicator = requires(C c, const C cc, std::span<double> values, bool flag) {
  { cc.rank() } -> std::convertible_to<int>;
  { cc.world_size() } -> std::convertible_to<int>;
  { c.sum(values) } -> std::same_as<void>;
  { c.any(flag) } -> std::same_as<bool>;
};

/// One process, no other ranks.
struct single_process {
  int rank() const noexcept { return 0; }
  int world_size() const noexcept { return 1; }
  void sum(std::span<double>) noexcept {}
  bool any(bool flag) noexcept { return flag; }
};

static_assert(save_communicator<single_process>);

/// A checkpointer that writes and reads sharded states over the ranks of `Comm`.
/// Requires:
///  - `save_sharded(state, comm)`: collective; every rank writes its shard, rank 0 also the
///    common part, and the checkpoint becomes visible to resume only once every shard is complete
///    (a failure on any rank leaves nothing, and throws on every rank);
///  - `load_latest_sharded(state, comm)`: collective; every rank fills its common tensors and its
///    range of the sharded ones from the newest checkpoint every rank can load (any world size
///    wrote it, or a checkpoint of whole tensors), the same on every rank; false when none.
template <class C, class Comm>
concept sharded_checkpointer = checkpointer<C> && save_communicator<Comm> &&
    requires(C c, const sharded_checkpoint_state& s, sharded_checkpoint_state& out, Comm& comm) {
  { c.save_sharded(s, comm) } -> std::same_as<void>;
  { c.load_latest_sharded(out, comm) } -> std::same_as<bool>;
};

/// A checkpointer that can hold an optimizer's state: any checkpointer when the state is whole
/// on every rank; a sharded_checkpointer over the ranks' communicator when it is sharded.
template <class C, class Optimizer, class Comm>
concept checkpointer_for_optimizer = checkpointer<C> &&
    (!sharded_optimizer<Optimizer> || sharded_checkpointer<C, Comm>);

/// A checkpointer that can hold the state of a model whose tensors live in `Space`.
template <class C, class Space>
concept checkpointer_for = checkpointer<C> &&
    (std::same_as<Space, host_memory> || bool(C::reads_device_memory));

}  // namespace trainkit::checkpoint
