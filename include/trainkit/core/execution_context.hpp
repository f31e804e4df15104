// trainkit/core/execution_context.hpp — where a training step's work is ordered, per memory space.
//
// The trainer owns one execution context and passes it to every call of the step protocol
// (model::micro_step, the reducer, the clipping step, the optimizer's update). On the host it is
// empty: every call returns with its work done. On a CUDA device it is the compute stream
// (core/cuda/execution_context.hpp): policies enqueue on it and order their own streams after it
// with events, and the trainer synchronises it once per optimizer step, after the update, to read
// the loss and the gradient norm. `execution_context_t<Space>` names the context of a space. The
// device context is only declared here (defined by the CUDA header), so host-only code can name
// it — a mock device policy in a must-not-compile test, say — without seeing CUDA types.
#pragma once

#include "trainkit/core/memory_space.hpp"

namespace trainkit {

/// Host work: nothing to order, nothing to wait for.
struct host_context {
  /// Waits for the work enqueued so far: on the host it is already done.
  void synchronize() const noexcept {}
};

/// `execution_context_of<Space>::type` is the context of the space's step.
template <class Space>
struct execution_context_of;

template <>
struct execution_context_of<host_memory> {
  using type = host_context;
};

namespace cuda {
class execution_context;  // core/cuda/execution_context.hpp
}

template <>
struct execution_context_of<device_memory> {
  using type = cuda::execution_context;
};

template <class Space>
using execution_context_t = typename execution_context_of<Space>::type;

}  // namespace trainkit
