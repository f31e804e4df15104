// trainkit/trainer/phase_clock.hpp — times the phases of a step, one RAII scope per phase.
//
// One stopwatch is lapped at the end of every scope, so consecutive scopes tile the step: the
// host time between two scopes (a loop test, a metrics assignment) is counted in the scope that
// ends next rather than lost. Each scope is also an NVTX range named and coloured from the phase
// table, so an Nsight Systems timeline matches the report bar for bar.
#pragma once

#include "trainkit/core/timing.hpp"
#include "trainkit/trainer/nvtx.hpp"
#include "trainkit/trainer/step_metrics.hpp"

namespace trainkit {

class phase_clock {
 public:
  /// Starts timing now; phases are added to `m`.
  explicit phase_clock(step_metrics& m) noexcept : m_(&m) {}

  class scope {
   public:
    scope(phase_clock& clock, phase p) noexcept
        : clock_(clock), field_(info(p).field), range_(info(p).name, info(p).argb) {}
    ~scope() {
      range_.end();
      clock_.m_->*field_ += clock_.lap_.lap_ms();
    }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;

   private:
    phase_clock& clock_;
    double step_metrics::*field_;
    nvtx_range range_;
  };

  /// `{ auto timed = clock.time(phase::compute); ... }`: the block's time goes to compute_ms.
  [[nodiscard]] scope time(phase p) noexcept { return scope(*this, p); }

  /// Moves `ms` already booked to `from` over to `to` (e.g. the copy part of a data wait).
  void move(phase from, phase to, double ms) noexcept {
    m_->*info(from).field -= ms;
    m_->*info(to).field += ms;
  }

  /// Re-targets the clock at another step's metrics (the time since the last lap goes there).
  void attach(step_metrics& m) noexcept { m_ = &m; }

 private:
  step_metrics* m_;
  stopwatch lap_;
};

}  // namespace trainkit
