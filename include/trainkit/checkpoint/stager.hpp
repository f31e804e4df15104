// trainkit/checkpoint/stager.hpp — how the asynchronous checkpointer snapshots a training state:
// the Stager policy, and `host_stager` for states in host memory.
//
// `basic_asio_checkpointer<Stager>` never touches tensor memory itself: it lays the state out in
// a staging area the stager owns and asks the stager to copy into it. The copy does not run
// inside `save`: the state does not change until the next optimizer update, so it overlaps the
// next step's forward and backward, and only the update waits for it (the checkpointer's
// `before_update`). Where the copy runs is the stager's choice, told by `queues_copies`:
//  * host_stager copies with memcpy; the checkpointer runs it on its writer thread, and
//    `before_update` waits until that memcpy has finished;
//  * a CUDA stager owns pinned memory and, inside `save`, queues cudaMemcpyAsync on a side stream
//    ordered after the compute stream by an event; `before_update` makes the compute stream wait
//    for the copies on the device (no host wait), and the writer thread calls `wait_staged` (an
//    event synchronize) before it reads the bytes.
// Keeping that split in the policy lets the CUDA half plug in without changing the checkpointer.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstring>
#include <span>

#include "trainkit/checkpoint/detail/staging_buffer.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/tensor.hpp"

namespace trainkit::checkpoint {

/// One tensor's trip between its own memory and its place in the staging area.
struct stage_copy {
  const state_tensor* tensor = nullptr;  // saving: the source; loading: the destination
  std::byte* staging = nullptr;          // tensor->bytes() bytes of host memory
};

/// Requires:
///  - `S::reads_device_memory` (a constant bool): whether `stage`/`unstage` handle tensors with
///    `on_device` set; the checkpointer rejects device tensors up front with config_error when
///    it is false, before any copy or disk access;
///  - `S::queues_copies` (a constant bool): false when `stage` copies synchronously — the
///    checkpointer then calls `reserve` and `stage` on its writer thread, and its `before_update`
///    blocks until `stage` has returned there; true when `stage` only queues copies that run on
///    their own (a device stream) — the checkpointer calls `reserve` and `stage` inside `save`, on
///    the loop's thread, and `before_update` calls `order_after_stage`;
///  - `s.reserve(bytes)` -> `std::byte*`: host-readable staging memory of at least `bytes` bytes
///    (64-byte aligned), allocated once and reused while later states fit; pinned for a stager
///    that copies from a device. Called only when no save is in flight;
///  - `s.stage(copies)`: copies (or queues the copies of) every `copies[i].tensor` into
///    `copies[i].staging`. The tensors are not modified until the checkpointer's `before_update`
///    has returned;
///  - `s.order_after_stage()`: called on the loop's thread by `before_update` (for a stager that
///    queues copies); on return, work issued afterwards that overwrites the tensors cannot run
///    before the copies of the last `stage` have read them (a device stager: the streams that
///    write the state wait for the copies on the device). A stager that copies synchronously
///    has nothing to do here;
///  - `s.wait_staged()`: blocks until the copies of the last `stage` have landed; called on the
///    writer thread before it reads the staging area. May throw (a device error);
///  - `s.unstage(copies)`: the reverse, for loading: copies each staging range into its tensor
///    and returns when the tensors hold the bytes.
template <class S>
concept stager = requires(S s, std::size_t bytes, std::span<const stage_copy> copies) {
  { S::reads_device_memory } -> std::convertible_to<bool>;
  { S::queues_copies } -> std::convertible_to<bool>;
  { s.reserve(bytes) } -> std::same_as<std::byte*>;
  { s.stage(copies) } -> std::same_as<void>;
  { s.order_after_stage() } -> std::same_as<void>;
  { s.wait_staged() } -> std::same_as<void>;
  { s.unstage(copies) } -> std::same_as<void>;
}
&&std::movable<S>;

/// The stager for states in host memory (the CPU model): a plain memcpy into a reused buffer,
/// run on the checkpointer's writer thread while the next step computes.
class host_stager {
 public:
  static constexpr bool reads_device_memory = false;
  static constexpr bool queues_copies = false;

  std::byte* reserve(std::size_t bytes) { return buffer_.reserve(bytes); }
  /// How many times `reserve` had to map new memory (a test's window on prepare).
  std::size_t allocations() const noexcept { return buffer_.allocations(); }

  void stage(std::span<const stage_copy> copies) {
    check_host(copies);
    for (const auto& c : copies)
      if (c.tensor->bytes() > 0) std::memcpy(c.staging, c.tensor->data, c.tensor->bytes());
  }

  /// Nothing to order or wait for: `stage` copied synchronously (the checkpointer waits for it).
  void order_after_stage() noexcept {}
  void wait_staged() noexcept {}

  void unstage(std::span<const stage_copy> copies) {
    check_host(copies);
    for (const auto& c : copies)
      if (c.tensor->bytes() > 0) std::memcpy(c.tensor->data, c.staging, c.tensor->bytes());
  }

 private:
  // The checkpointer already rejects device tensors for this stager; this keeps host_stager
  // safe on its own, as any policy should be.
  static void check_host(std::span<const stage_copy> copies) {
    for (const auto& c : copies)
      if (c.tensor->on_device)
        throw config_error("checkpoint tensor '" + c.tensor->name +
                           "' is in device memory, which host_stager cannot read");
  }

  detail::staging_buffer buffer_;
};

static_assert(stager<host_stager>);

}  // namespace trainkit::checkpoint
