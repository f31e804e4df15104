// trainkit/checkpoint/cuda_stager.hpp — the Stager (stager.hpp) for training states in CUDA
// device memory: device→pinned copies on a side stream, so basic_asio_checkpointer<cuda_stager>
// snapshots a gpt2_cuda + adamw_cuda state without stalling the loop for the copy.
//
// `stage` enqueues one cudaMemcpyAsync per device tensor on the stager's own stream into pinned
// staging memory (host tensors are memcpy'd on the spot) and records a "staged" event; the writer
// thread calls `wait_staged` (an event synchronize) before it reads the bytes. Ordering:
//  * before the copies: the side stream waits on an event recorded on every *guarded* stream, so
//    the copies see the work that produced the state even if it is still running (gpt2_cuda and
//    adamw_cuda return with their work finished, so for them this costs nothing);
//  * after the copies: every guarded stream waits on "staged" (cudaStreamWaitEvent, no host
//    stall), so the next optimizer step, which overwrites master weights and moments, cannot run
//    before the snapshot has been read. Guard the streams that write the state:
//      t.checkpointer().stager().guard_stream(t.context().stream());
//    With no guarded stream `stage` cannot order later writers after its copies, so it waits for
//    them itself (correct, but the copy then counts as stall).
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

  cuda_stager() = default;

  /// Orders the snapshot after the work queued on `s` and `s`'s later work after the snapshot.
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
