// trainkit/checkpoint/stager.hpp — how the asynchronous checkpointer snapshots a training state:
// the Stager policy, and `host_stager` for states in host memory.
//
// `basic_asio_checkpointer<Stager>` never touches tensor memory itself: it lays the state out in
// a staging area the stager owns and asks the stager to copy into it. A host stager copies with
// memcpy and is done when `stage` returns. A CUDA stager (built with CUDA) owns pinned memory and
// queues cudaMemcpyAsync on a side stream ordered after the optimizer step by an event, so `stage`
// returns as soon as the copies are queued; the writer thread then calls `wait_staged` (an event
// synchronize) before it reads the bytes. Keeping that split in the policy lets the CUDA half
// plug in without changing the checkpointer.
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
///  - `s.reserve(bytes)` -> `std::byte*`: host-readable staging memory of at least `bytes` bytes
///    (64-byte aligned), allocated once and reused while later states fit; pinned for a stager
///    that copies from a device. Called only when no save is in flight;
///  - `s.stage(copies)`: starts copying every `copies[i].tensor` into `copies[i].staging`; returns
///    when the caller may modify the tensors again *as far as the host is concerned* (a host
///    stager: the bytes are copied; a device stager: the copies are queued after the work that
///    produced the state, and later device work that overwrites it is ordered after them);
///  - `s.wait_staged()`: blocks until the copies of the last `stage` have landed; called on the
///    writer thread before it reads the staging area. May throw (a device error);
///  - `s.unstage(copies)`: the reverse, for loading: copies each staging range into its tensor
///    and returns when the tensors hold the bytes.
template <class S>
concept stager = requires(S s, std::size_t bytes, std::span<const stage_copy> copies) {
  { S::reads_device_memory } -> std::convertible_to<bool>;
  { s.reserve(bytes) } -> std::same_as<std::byte*>;
  { s.stage(copies) } -> std::same_as<void>;
  { s.wait_staged() } -> std::same_as<void>;
  { s.unstage(copies) } -> std::same_as<void>;
}
&&std::movable<S>;

/// The stager for states in host memory (the CPU model): a plain memcpy into a reused buffer.
class host_stager {
 public:
  static constexpr bool reads_device_memory = false;

  std::byte* reserve(std::size_t bytes) { return buffer_.reserve(bytes); }

  void stage(std::span<const stage_copy> copies) {
    check_host(copies);
    for (const auto& c : copies)
      if (c.tensor->bytes() > 0) std::memcpy(c.staging, c.tensor->data, c.tensor->bytes());
  }

  /// Nothing to wait for: `stage` copied synchronously.
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
