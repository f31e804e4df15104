// trainkit/checkpoint/host_staged_checkpointer.hpp — lets a host-only Checkpointer
// (sync_checkpointer, no_checkpoint) save and restore states that live partly in CUDA device
// memory.
//
// sync_checkpointer writes tensors straight from their memory and therefore rejects `on_device`
// tensors. This adapter copies every device tensor into one pinned host area (reused, grown only)
// before handing the inner checkpointer a host-only copy of the state, and copies loaded bytes
// back to the device after `load_latest`. The copies are blocking (cudaMemcpy), which is right for
// a synchronous checkpointer whose whole write stalls the loop anyway; the stall it reports
// includes them. For background saves use basic_asio_checkpointer<cuda_stager> instead. An inner
// checkpointer that reads its state after `save` returns (defers_snapshot) reads this pinned
// area, not the model: the model may change at once, and this adapter lets the inner copy finish
// before it overwrites or frees the area. Host tensors are passed through uncopied, so such an
// adapter forwards `before_update` too.
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

  void save(const checkpoint_state& state) {
    stopwatch clock;
    checkpoint_state host = stage(state);
    for (std::size_t i = 0; i < state.tensors.size(); ++i) {
      const state_tensor& t = state.tensors[i];
      if (t.on_device && t.bytes() > 0)
        TRAINKIT_CUDA_CHECK(
            cudaMemcpy(host.tensors[i].data, t.data, t.bytes(), cudaMemcpyDeviceToHost));
    }
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
    for (std::size_t i = 0; i < state.tensors.size(); ++i) {
      const state_tensor& t = state.tensors[i];
      if (t.on_device && t.bytes() > 0)
        TRAINKIT_CUDA_CHECK(
            cudaMemcpy(t.data, host.tensors[i].data, t.bytes(), cudaMemcpyHostToDevice));
    }
    state.step = host.step;
    state.meta = std::move(host.meta);
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
    if constexpr (defers_snapshot<C>) inner_.before_update();  // done reading the pinned area
    std::size_t total = 0;
    for (const auto& t : state.tensors)
      if (t.on_device) total += round_up(t.bytes());
    if (total > staging_.size()) {
      staging_ = cuda::pinned_buffer<std::byte>();
      staging_ = cuda::pinned_buffer<std::byte>(total);
    }
    checkpoint_state host{state.step, {}, state.meta};
    std::size_t offset = 0;
    for (const auto& t : state.tensors) {
      state_tensor h = t;
      if (t.on_device) {
        h.data = t.bytes() > 0 ? staging_.data() + offset : nullptr;
        h.on_device = false;
        offset += round_up(t.bytes());
      }
      host.tensors.push_back(std::move(h));
    }
    return host;
  }

  static std::size_t round_up(std::size_t n) noexcept { return (n + 63) / 64 * 64; }

  // Declared before inner_, so inner_ (whose background copy may still read it) goes first.
  cuda::pinned_buffer<std::byte> staging_;
  C inner_;
  double last_stall_ms_ = 0.0;
};

}  // namespace trainkit::checkpoint
