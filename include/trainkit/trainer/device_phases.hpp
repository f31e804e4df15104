// trainkit/trainer/device_phases.hpp — device-side phase accounting: what the device waited for,
// booked to the phase that made it wait.
//
// On a CUDA device the loop only enqueues a step's work; its one host wait is the
// synchronize() at the end, which the phase clock books to compute. A reduction the backward did
// not hide, a checkpoint copy the update must wait for, a batch copy or the optimizer's kernels
// then all read as compute, and comm_ms / ckpt_stall_ms stay near 0 however long the device
// waited. With a context that times device phases (times_device_phases,
// core/execution_context.hpp) the loop brackets each such part with `begin_device_phase` /
// `end_device_phase` (events on the compute stream, no host wait), and after the synchronisation
// `account_device_phases` moves from compute into each phase the stream time the host has not
// already booked to it. Moving keeps the phases tiling the step's wall time. The stalls go first
// (comm, ckpt_stall, h2d, then optimizer), and no more than compute holds is moved: the host's wait
// for them can only have landed there. On other contexts (the host's) all three are no-ops.
// docs/cuda.md, "Phase accounting on a device".
#pragma once

#include <algorithm>
#include <array>

#include "trainkit/core/execution_context.hpp"
#include "trainkit/prefetch/concepts.hpp"
#include "trainkit/trainer/phase_clock.hpp"
#include "trainkit/trainer/step_metrics.hpp"

namespace trainkit {

/// The trainer's phase (step_metrics.hpp's table) a device phase is booked to.
constexpr phase booked_phase(device_phase p) noexcept {
  switch (p) {
    case device_phase::h2d:
      return phase::h2d;
    case device_phase::comm:
      return phase::comm;
    case device_phase::optimizer:
      return phase::optimizer;
    case device_phase::ckpt_stall:
      return phase::ckpt_stall;
  }
  return phase::other;
}

/// Opens device phase `p` on a context that times them; nothing otherwise.
template <class Ctx>
void begin_device_phase(Ctx& ctx, device_phase p) {
  if constexpr (times_device_phases<Ctx>) ctx.begin_phase(p);
}

/// Closes device phase `p` (the one opened last).
template <class Ctx>
void end_device_phase(Ctx& ctx, device_phase p) {
  if constexpr (times_device_phases<Ctx>) ctx.end_phase(p);
}

/// A host phase and its device phase in one scope: the phase clock times the block into
/// `booked_phase(p)` while the device phase brackets the work it enqueues.
///   { device_timed timed(clock, ctx, device_phase::comm); reducer.finish(); }
/// The destructor never throws. Ending the device phase records an event, a CUDA call: after a
/// kernel fault it fails with the device's sticky error. Thrown from a destructor that would
/// std::terminate (always, while the block's own exception unwinds: the real error, lost), so
/// the destructor drops it; a sticky error fails every later CUDA call with the same message, so
/// the next one (the next phase's event, the step's synchronize()) reports it where it can be
/// thrown. cuda::execution_context closes the phase before it records, so that next call is the
/// device's error, not "phases do not nest".
template <class Ctx>
class device_timed {
 public:
  device_timed(phase_clock& clock, Ctx& ctx, device_phase p)
      : timed_(clock.time(booked_phase(p))), ctx_(ctx), phase_(p) {
    begin_device_phase(ctx_, phase_);
  }
  ~device_timed() {  // before the clock's lap (timed_)
    try {
      end_device_phase(ctx_, phase_);
    } catch (...) {  // reported by the next CUDA call (see the class comment)
    }
  }
  device_timed(const device_timed&) = delete;
  device_timed& operator=(const device_timed&) = delete;

 private:
  phase_clock::scope timed_;
  Ctx& ctx_;
  device_phase phase_;
};

/// The next micro-batch from `source`, timed into step `m`. The time it blocked is data_wait,
/// except the part a device prefetcher says was its host-to-device copy (h2d); copy time that
/// overlapped compute blocked nothing. A prefetcher bound to `ctx` makes the stream wait for its
/// copy inside the h2d device phase.
template <class Prefetcher, class Ctx>
auto timed_next_batch(Prefetcher& source, Ctx& ctx, phase_clock& clock, step_metrics& m) {
  const double waited_before = m.data_wait_ms;
  auto batch = [&] {
    auto timed = clock.time(phase::data_wait);
    begin_device_phase(ctx, device_phase::h2d);
    auto b = source.next();
    end_device_phase(ctx, device_phase::h2d);
    return b;
  }();
  if constexpr (prefetch::reports_copy_wait<Prefetcher>)
    clock.move(phase::data_wait, phase::h2d,
               std::min(m.data_wait_ms - waited_before, source.last_h2d_wait_ms()));
  return batch;
}

/// After the step's synchronize(): books the device phases' stream time (see the file comment).
/// `clock` times the step `m`; returns the device times read (zeros on other contexts).
template <class Ctx>
device_phase_times account_device_phases(Ctx& ctx, phase_clock& clock, const step_metrics& m) {
  device_phase_times device{};
  if constexpr (times_device_phases<Ctx>) {
    device = ctx.device_phase_ms();
    constexpr std::array order{device_phase::comm, device_phase::ckpt_stall, device_phase::h2d,
                               device_phase::optimizer};
    for (const device_phase p : order) {
      const phase to = booked_phase(p);
      // The host's own time in the phase (enqueueing, or a host-side wait) is already booked;
      // a stream that sat idle waiting for that enqueueing measured the same time again. The
      // host books its part of fetching a batch to data_wait (and the copy's share to h2d).
      double booked = m.*info(to).field;
      if (p == device_phase::h2d) booked += m.data_wait_ms;
      const double unbooked = device[std::size_t(p)] - booked;
      const double ms = std::clamp(unbooked, 0.0, std::max(0.0, m.compute_ms));
      if (ms > 0) clock.move(phase::compute, to, ms);
    }
  }
  return device;
}

}  // namespace trainkit
