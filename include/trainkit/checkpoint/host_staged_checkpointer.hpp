// trainkit/checkpoint/host_staged_checkpointer.hpp — lets a host-only Checkpointer
// (sync_checkpointer, no_checkpoint) save and restore states that live partly in CUDA device
// memory.
//
// sync_checkpointer writes tensors straight from their memory and therefore rejects `on_device`
// tensors. This adapter copies every device tensor into one pinned host area (reused, grown only)
// before handing the inner checkpointer a host-only copy of the state, and copies loaded bytes
// back to the device after `load_latest`. The copies are blocking, which is right for a
// synchronous checkpointer whose whole write stalls the loop anyway; the stall it reports includes
// them. They are ordered after the work that produced the state, whatever stream it ran on: with
// `guard_stream(s)` (the trainer's compute stream) they are enqueued on `s` and waited for, so
// they follow every kernel queued there; without one the device is synchronised first (a legacy-
// stream cudaMemcpy alone would not wait for a non-blocking compute stream). For background saves use basic_asio_checkpointer<cuda_stager> instead. An inner
// checkpointer that reads its state after `save` returns (defers_snapshot) reads this pinned
// area, not the model: the model may change at once, and this adapter lets the inner copy finish
// before it overwrites or frees the area. Host tensors are passed through uncopied, so such an
// adapter forwards `before_update` too. When the inner checkpointer saves sharded states (ZeRO-1:
// sync_checkpointer), so does the adapter: `save_sharded` / `load_latest_sharded` stage the common
// and the shard's device tensors alike and forward the collective calls.
// Host-compilable (cuda_runtime.h only).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainkit/checkpoint/concepts.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/timing.hpp"

namespace trainkit::checkpoint {

template <checkpointer C>
class host_staged_checkpointer {
 public:
  /// It copies device tensors to pinned host memory before the inner checkpointer sees them.
  static constexpr bool reads_device_memory = true;
  explicit host_staged_checkpointer(C inner) : inner_(std::move(inner)) {}

  /// Copies are enqueued on `s` (the stream that writes the state: the trainer's compute stream)
  /// and waited for; nullptr = synchronise the whole device around them instead.
  void guard_stream(cudaStream_t s) noexcept { guarded_ = s; }

  void save(const checkpoint_state& state) {
    stopwatch clock;
    checkpoint_state host = stage(state);
    copy_to_host(state.tensors, host.tensors);
    try {
      inner_.save(host);
    } catch (...) {
      last_stall_ms_ = clock.elapsed_ms();
      throw;
    }
    last_stall_ms_ = clock.elapsed_ms();
  }

  bool load_latest(checkpoint_state& state) {
    checkpoint_state host = stage(state);
    if (!inner_.load_latest(host)) return false;
    copy_to_device(host.tensors, state.tensors);
    state.step = host.step;
    state.meta = std::move(host.meta);
    return true;
  }

  /// The inner checkpointer's sharded save (collective over `comm`) of a host copy of `state`.
  template <save_communicator Comm>
  requires sharded_checkpointer<C, Comm>
  void save_sharded(const sharded_checkpoint_state& state, Comm& comm) {
    stopwatch clock;
    sharded_checkpoint_state host = stage(state);
    copy_to_host(state.common.tensors, host.common.tensors);
    copy_to_host(state.shard, host.shard);
    try {
      inner_.save_sharded(host, comm);
    } catch (...) {
      last_stall_ms_ = clock.elapsed_ms();
      throw;
    }
    last_stall_ms_ = clock.elapsed_ms();
  }

  /// The inner checkpointer's sharded load (collective over `comm`) into a host copy of `state`,
  /// copied back to the device tensors.
  template <save_communicator Comm>
  requires sharded_checkpointer<C, Comm>
  bool load_latest_sharded(sharded_checkpoint_state& state, Comm& comm) {
    sharded_checkpoint_state host = stage(state);
    if (!inner_.load_latest_sharded(host, comm)) return false;
    copy_to_device(host.common.tensors, state.common.tensors);
    copy_to_device(host.shard, state.shard);
    state.common.step = host.common.step;
    state.common.meta = std::move(host.common.meta);
    return true;
  }

  void wait() { inner_.wait(); }
  /// The inner checkpointer's hook: it may still read the state's host tensors.
  void before_update() requires defers_snapshot<C> { inner_.before_update(); }
  double last_stall_ms() const noexcept { return last_stall_ms_; }

  /// The inner checkpointer's skipped-checkpoint lines, when it keeps any (the trainer prints
  /// them after a resume).
  const std::vector<std::string>& warnings() const noexcept requires requires(const C& c) {
    c.warnings();
  }
  { return inner_.warnings(); }

  C& inner() noexcept { return inner_; }

 private:
  // A copy of `state` whose device tensors point into the pinned area (host tensors unchanged).
  checkpoint_state stage(const checkpoint_state& state) {
    reserve(total_device_bytes(state.tensors));
    return {state.step, point_into_staging(state.tensors, 0), state.meta};
  }

  // The same for a sharded state: the common tensors first, then the shard's.
  sharded_checkpoint_state stage(const sharded_checkpoint_state& state) {
    const std::size_t common = total_device_bytes(state.common.tensors);
    reserve(common + total_device_bytes(state.shard));
    return {{state.common.step, point_into_staging(state.common.tensors, 0), state.common.meta},
            point_into_staging(state.shard, common),
            state.range};
  }

  // A pinned area of at least `total` bytes, once the inner checkpointer is done reading it.
  void reserve(std::size_t total) {
    if constexpr (defers_snapshot<C>) inner_.before_update();  // done reading the pinned area
    if (total > staging_.size()) {
      staging_ = cuda::pinned_buffer<std::byte>();
      staging_ = cuda::pinned_buffer<std::byte>(total);
    }
  }

  // Copies of `tensors` whose device tensors point into the pinned area from byte `offset` on.
  std::vector<state_tensor> point_into_staging(const std::vector<state_tensor>& tensors,
                                               std::size_t offset) {
    std::vector<state_tensor> host;
    for (const auto& t : tensors) {
      state_tensor h = t;
      if (t.on_device) {
        h.data = t.bytes() > 0 ? staging_.data() + offset : nullptr;
        h.on_device = false;
        offset += round_up(t.bytes());
      }
      host.push_back(std::move(h));
    }
    return host;
  }

  static std::size_t total_device_bytes(const std::vector<state_tensor>& tensors) {
    std::size_t total = 0;
    for (const auto& t : tensors)
      if (t.on_device) total += round_up(t.bytes());
    return total;
  }

  // After the work that wrote the device tensors (see the file comment); returns with them copied.
  void copy_to_host(const std::vector<state_tensor>& device,
                    const std::vector<state_tensor>& host) const {
    copy(device, host, cudaMemcpyDeviceToHost);
  }

  // Returns with the copies landed, so work queued afterwards on any stream sees them.
  void copy_to_device(const std::vector<state_tensor>& host,
                      const std::vector<state_tensor>& device) const {
    copy(device, host, cudaMemcpyHostToDevice);
  }

  void copy(const std::vector<state_tensor>& device, const std::vector<state_tensor>& host,
            cudaMemcpyKind kind) const {
    bool any = false;  // host-only states need no device (nor one present)
    for (const auto& t : device) any = any || (t.on_device && t.bytes() > 0);
    if (!any) return;
    // Unguarded: every stream's work first (a non-blocking stream's too).
    if (!guarded_) TRAINKIT_CUDA_CHECK(cudaDeviceSynchronize());
    for (std::size_t i = 0; i < device.size(); ++i) {
      if (!device[i].on_device || device[i].bytes() == 0) continue;
      void* to = kind == cudaMemcpyDeviceToHost ? host[i].data : device[i].data;
      const void* from = kind == cudaMemcpyDeviceToHost ? device[i].data : host[i].data;
      TRAINKIT_CUDA_CHECK(cudaMemcpyAsync(to, from, device[i].bytes(), kind, guarded_));
    }
    // The legacy stream (unguarded) or the guarded one: either way the copies are done on return.
    TRAINKIT_CUDA_CHECK(cudaStreamSynchronize(guarded_));
  }

  static std::size_t round_up(std::size_t n) noexcept { return (n + 63) / 64 * 64; }

  // Declared before inner_, so inner_ (whose background copy may still read it) goes first.
  cuda::pinned_buffer<std::byte> staging_;
  C inner_;
  cudaStream_t guarded_ = nullptr;
  double last_stall_ms_ = 0.0;
};

}  // namespace trainkit::checkpoint
