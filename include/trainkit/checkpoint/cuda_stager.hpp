// trainkit/checkpoint/cuda_stager.hpp — the Stager (stager.hpp) for training states in CUDA
// device memory: device→pinned copies on a side stream, so basic_asio_checkpointer<cuda_stager>
// snapshots a gpt2_cuda + adamw_cuda state while the next step's forward and backward run.
//
// `stage` (inside the checkpointer's `save`) enqueues one cudaMemcpyAsync per device tensor on the
// stager's own stream into pinned staging memory (host tensors are memcpy'd on the spot) and
// records a "staged" event; the writer thread calls `wait_staged` (an event synchronize) before it
// reads the bytes. Ordering:
//  * before the copies: the side stream waits on an event recorded on every *guarded* stream, so
//    the copies see the work that produced the state (the last optimizer update) even if it is
//    still running;
//  * after the copies: `order_after_stage` (the checkpointer's `before_update`, which the trainer
//    calls right before the next optimizer update) makes every guarded stream wait on "staged"
//    (cudaStreamWaitEvent, no host stall). Only the update, which overwrites master weights and
//    moments, is ordered after the snapshot; the forward and backward queued before it run
//    alongside the copies. Guard the streams that write the state:
//      t.checkpointer().stager().guard_stream(t.context().stream());
//    With no guarded stream the stager cannot order anything on the device: `stage` then
//    synchronises the device before queuing the copies and `order_after_stage` waits for them on
//    the host (correct, but the copy then counts as stall).
// `unstage` (resume) copies host→device and synchronises. Host-compilable (cuda_runtime.h only).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstring>
#include <span>
#include <vector>

#include "trainkit/checkpoint/stager.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/stream.hpp"

namespace trainkit::checkpoint {

class cuda_stager {
 public:
  static constexpr bool reads_device_memory = true;
  /// `stage` queues the copies on the side stream and returns (see the file comment).
  static constexpr bool queues_copies = true;

  cuda_stager() = default;

  /// Orders each snapshot after the work queued on `s` before `stage`, and `s`'s work queued
  /// after `order_after_stage` after the snapshot.
  /// `s` must outlive the stager's use (the trainer's model/optimizer streams do).
  void guard_stream(cudaStream_t s) { guarded_.push_back(s); }

  /// Pinned staging memory of at least `bytes` bytes (cudaHostAlloc is page aligned). Grows
  /// only; the contents are not preserved when it grows.
  std::byte* reserve(std::size_t bytes) {
    if (bytes > buffer_.size()) {
      buffer_ = cuda::pinned_buffer<std::byte>();  // free first: peak host memory stays one area
      buffer_ = cuda::pinned_buffer<std::byte>(bytes);
    }
    return buffer_.data();
  }

  void stage(std::span<const stage_copy> copies) {
    const cudaStream_t s = stream_.get();
    if (guarded_.empty()) TRAINKIT_CUDA_CHECK(cudaDeviceSynchronize());
    for (cudaStream_t g : guarded_) {
      produced_.record(g);
      produced_.wait_on(s);
    }
    for (const auto& c : copies) {
      const std::size_t n = c.tensor->bytes();
      if (n == 0) continue;
      if (c.tensor->on_device)
        TRAINKIT_CUDA_CHECK(
            cudaMemcpyAsync(c.staging, c.tensor->data, n, cudaMemcpyDeviceToHost, s));
      else
        std::memcpy(c.staging, c.tensor->data, n);
    }
    staged_.record(s);
  }

  /// Orders the guarded streams' later work (the next optimizer update) after the copies of the
  /// last `stage`, on the device; with no guarded stream, waits for the copies on the host.
  void order_after_stage() {
    for (cudaStream_t g : guarded_) staged_.wait_on(g);
    if (guarded_.empty()) staged_.synchronize();
  }

  /// Blocks until the copies of the last `stage` have landed (throws cuda_error on a device
  /// error). Safe from another thread.
  void wait_staged() { staged_.synchronize(); }

  void unstage(std::span<const stage_copy> copies) {
    const cudaStream_t s = stream_.get();
    for (const auto& c : copies) {
      const std::size_t n = c.tensor->bytes();
      if (n == 0) continue;
      if (c.tensor->on_device)
        TRAINKIT_CUDA_CHECK(
            cudaMemcpyAsync(c.tensor->data, c.staging, n, cudaMemcpyHostToDevice, s));
      else
        std::memcpy(c.tensor->data, c.staging, n);
    }
    stream_.synchronize();
  }

 private:
  cuda::stream stream_{true};
  cuda::event produced_{false};
  cuda::event staged_{false};
  cuda::pinned_buffer<std::byte> buffer_;
  std::vector<cudaStream_t> guarded_;
};

static_assert(stager<cuda_stager>);

}  // namespace trainkit::checkpoint
