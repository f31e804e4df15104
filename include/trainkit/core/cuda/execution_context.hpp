// trainkit/core/cuda/execution_context.hpp — the device execution context: the compute stream.
//
// Everything of a training step that touches parameters or gradients is enqueued on this one
// stream (model kernels, clipping, the optimizer's update), so stream order alone makes each part
// see the previous one's results. Other streams (a prefetcher's copies, a reducer's collectives, a
// checkpoint stager) order themselves against it with events: they record an event on `stream()`
// and wait on it, or make `stream()` wait on theirs — never a host synchronisation. The trainer
// calls `synchronize()` once per optimizer step, after the optimizer's update has been enqueued.
// It also times device phases (times_device_phases, core/execution_context.hpp): `begin_phase`
// and `end_phase` record timing events on the stream (taken from a pool that grows to a step's
// need and is reused every step), and `device_phase_ms()`, after the synchronisation, adds up the
// intervals between them — how long the stream spent in each phase, waits on other streams
// included. Recording an event is a few microseconds of host time; nothing waits.
// Host-compilable (cuda_runtime.h only).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/stream.hpp"
#include "trainkit/core/error.hpp"
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

  /// Marks the start of phase `p` in stream order (a timing event; no host wait).
  void begin_phase(device_phase p) {
    if (open_)
      throw config_error("execution_context::begin_phase: phases do not nest (one is open)");
    intervals_.push_back({p, record(), 0});
    open_ = true;
  }
  /// Marks the end of the phase begun last. The phase is closed before the event is recorded:
  /// when recording fails (a kernel fault's sticky error) the next begin_phase reports the
  /// device's error, not "phases do not nest" (trainer/device_phases.hpp drops this one).
  void end_phase(device_phase p) {
    if (!open_ || intervals_.back().phase != p)
      throw config_error("execution_context::end_phase: not the phase begun last");
    open_ = false;
    intervals_.back().end = record();  // end stays 0 (< begin: not counted) if this throws
  }
  /// After synchronize(): stream milliseconds per phase since the previous call.
  device_phase_times device_phase_ms() {
    device_phase_times ms{};
    for (const interval& i : intervals_)
      if (i.end > i.begin)
        ms[std::size_t(i.phase)] += double(elapsed_ms(events_[i.begin], events_[i.end]));
    intervals_.clear();
    used_ = 0;
    open_ = false;
    return ms;
  }

 private:
  struct interval {
    device_phase phase;
    std::size_t begin, end;  // indices into events_
  };

  std::size_t record() {
    if (used_ == events_.size()) events_.emplace_back(true);
    events_[used_].record(stream_.get());
    return used_++;
  }

  trainkit::cuda::stream stream_{true};
  std::vector<trainkit::cuda::event> events_;  // the pool; the first used_ are this step's
  std::vector<interval> intervals_;
  std::size_t used_ = 0;
  bool open_ = false;
};

static_assert(times_device_phases<execution_context>);

}  // namespace trainkit::cuda
