// trainkit/core/cuda/execution_context.hpp — the device execution context: the compute stream.
//
// Everything of a training step that touches parameters or gradients is enqueued on this one
// stream (model kernels, clipping, the optimizer's update), so stream order alone makes each part
// see the previous one's results. Other streams (a prefetcher's copies, a reducer's collectives, a
// checkpoint stager) order themselves against it with events: they record an event on `stream()`
// and wait on it, or make `stream()` wait on theirs — never a host synchronisation. The trainer
// calls `synchronize()` once per optimizer step, after the optimizer's update has been enqueued.
// Host-compilable (cuda_runtime.h only).
#pragma once

#include <cuda_runtime.h>

#include "trainkit/core/cuda/stream.hpp"
#include "trainkit/core/execution_context.hpp"

namespace trainkit::cuda {

/// Owns the compute stream (non-blocking: stream 0 work of other code does not serialise it).
class execution_context {
 public:
  execution_context() = default;
  execution_context(execution_context&&) noexcept = default;
  execution_context& operator=(execution_context&&) noexcept = default;

  cudaStream_t stream() const noexcept { return stream_.get(); }
  /// The one host wait of a step: blocks until everything enqueued on the stream has run.
  void synchronize() const { stream_.synchronize(); }

 private:
  trainkit::cuda::stream stream_{true};
};

}  // namespace trainkit::cuda
