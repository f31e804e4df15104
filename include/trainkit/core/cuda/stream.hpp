// trainkit/core/cuda/stream.hpp — RAII CUDA streams and events, and the time between two events.
//
// Device work is asynchronous, so timing it with a host clock measures the enqueue, not the work:
// phases are timed with events recorded on the stream that runs them (METHOD.md). Both types are
// movable and non-copyable; destructors never throw (a failure there is ignored, as the handle is
// gone either way). Host-compilable (cuda_runtime.h only).
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "trainkit/core/cuda/check.hpp"

namespace trainkit::cuda {

/// An owned cudaStream_t. `non_blocking` streams do not synchronise with the legacy default
/// stream, so a prefetcher's copies can overlap work other code issues on stream 0.
class stream {
 public:
  explicit stream(bool non_blocking = true) {
    TRAINKIT_CUDA_CHECK(cudaStreamCreateWithFlags(
        &handle_, non_blocking ? cudaStreamNonBlocking : cudaStreamDefault));
  }
  stream(stream&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  stream& operator=(stream&& o) noexcept {
    if (this != &o) {
      reset();
      handle_ = std::exchange(o.handle_, nullptr);
    }
    return *this;
  }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream() { reset(); }

  cudaStream_t get() const noexcept { return handle_; }
  operator cudaStream_t() const noexcept { return handle_; }

  void synchronize() const { TRAINKIT_CUDA_CHECK(cudaStreamSynchronize(handle_)); }

 private:
  void reset() noexcept {
    if (handle_) (void)cudaStreamDestroy(handle_);
    handle_ = nullptr;
  }
  cudaStream_t handle_ = nullptr;
};

/// An owned cudaEvent_t. Timing events cost a little more to record; pass `timing = false` for
/// events used only to order streams or to poll completion.
class event {
 public:
  explicit event(bool timing = true) {
    TRAINKIT_CUDA_CHECK(
        cudaEventCreateWithFlags(&handle_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  event(event&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  event& operator=(event&& o) noexcept {
    if (this != &o) {
      reset();
      handle_ = std::exchange(o.handle_, nullptr);
    }
    return *this;
  }
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  ~event() { reset(); }

  cudaEvent_t get() const noexcept { return handle_; }
  operator cudaEvent_t() const noexcept { return handle_; }

  void record(cudaStream_t s) { TRAINKIT_CUDA_CHECK(cudaEventRecord(handle_, s)); }
  void synchronize() const { TRAINKIT_CUDA_CHECK(cudaEventSynchronize(handle_)); }

  /// True when the work before the last record() has completed; never blocks.
  bool ready() const {
    const cudaError_t e = cudaEventQuery(handle_);
    if (e == cudaErrorNotReady) return false;
    TRAINKIT_CUDA_CHECK(e);
    return true;
  }

  /// Makes `s` wait (on the device) for this event: orders two streams without a host stall.
  void wait_on(cudaStream_t s) const { TRAINKIT_CUDA_CHECK(cudaStreamWaitEvent(s, handle_, 0)); }

 private:
  void reset() noexcept {
    if (handle_) (void)cudaEventDestroy(handle_);
    handle_ = nullptr;
  }
  cudaEvent_t handle_ = nullptr;
};

/// Milliseconds of device time between two recorded timing events; waits for `end` to complete.
inline float elapsed_ms(const event& start, const event& end) {
  end.synchronize();
  float ms = 0.0f;
  TRAINKIT_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), end.get()));
  return ms;
}

}  // namespace trainkit::cuda
