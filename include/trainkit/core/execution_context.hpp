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
//
// Device-side phase accounting (optional, concept `times_device_phases`): on a device the host
// only enqueues most of a step, so the time the device spends waiting for a reduction, a
// checkpoint copy or a batch copy shows up on the host as one long wait in the step's single
// synchronize(). A context that times device phases brackets each phase's work in stream order
// (`begin_phase`/`end_phase`: CUDA events on the compute stream, no host wait) and, read after the
// synchronisation, says how long the stream spent in each (`device_phase_ms`). The trainer then
// moves that much of the host's wait from compute into the phase (trainer/device_phases.hpp), so
// the phases still tile the step and the report can say communication- or checkpoint-bound on a
// device. docs/cuda.md, "Phase accounting on a device".
#pragma once

#include <array>
#include <concepts>
#include <cstddef>

#include "trainkit/core/memory_space.hpp"

namespace trainkit {

/// The phases of a step a device context can time on its stream (the rest of the stream's time
/// is compute). The trainer's phase table names them h2d, comm, optimizer and ckpt_stall.
enum class device_phase : std::size_t {
  h2d,         // waiting for a batch's host-to-device copy (a prefetcher bound to the context)
  comm,        // waiting for the gradient reduction on the communication stream
  optimizer,   // the clipping step and the optimizer's update
  ckpt_stall,  // waiting for a checkpoint's snapshot copy before the update
};
inline constexpr std::size_t device_phase_count = 4;

/// Milliseconds of stream time per device_phase.
using device_phase_times = std::array<double, device_phase_count>;

/// A context that times device phases (optional; the trainer uses it when present).
/// Requires:
///  - `begin_phase(p)` / `end_phase(p)`: mark in stream order where phase p's work (or wait)
///    starts and ends; enqueue only (no host synchronisation); a phase may open several times in a
///    step (its intervals add up); phases do not nest;
///  - `device_phase_ms()`: called after `synchronize()`, the stream time of each phase marked
///    since the previous call (which it forgets: one call per step).
template <class C>
concept times_device_phases = requires(C& c, device_phase p) {
  c.begin_phase(p);
  c.end_phase(p);
  { c.device_phase_ms() } -> std::same_as<device_phase_times>;
};

/// Host work: nothing to order, nothing to wait for.
struct host_context {
  /// Waits for the work enqueued so far: on the host it is already done.
  void synchronize() const noexcept {}
};
static_assert(!times_device_phases<host_context>, "host work is timed by the host clock alone");

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
