// trainkit/trainer/sinks/deferred.hpp — sinks that get each step once it is complete.
//
// A step's wall time (dt_ms, and the rates and `other_ms` derived from it) is known only after
// the step's last phase, so a file that stores the final figures cannot be written inside the
// step it describes without leaving that write out of the step's time. `deferred` holds the last
// complete step and hands it to its sinks at the start of the next step's log phase (`flush`):
// the write then blocks, and is counted in, the next step, and steps keep tiling the run.
#pragma once

#include <optional>
#include <tuple>
#include <utility>

#include "trainkit/trainer/report.hpp"
#include "trainkit/trainer/sinks/concepts.hpp"
#include "trainkit/trainer/step_metrics.hpp"

namespace trainkit {

template <step_sink... Sinks>
class deferred_sinks {
 public:
  explicit deferred_sinks(Sinks... sinks) : sinks_(std::move(sinks)...) {}

  /// Keeps `m` until the next flush (a later hold replaces it: flush between steps).
  void hold(const step_metrics& m) { pending_ = m; }

  /// Hands the held step, if any, to every sink.
  void flush() {
    if (!pending_) return;
    std::apply([this](auto&... s) { (s.on_step(*pending_), ...); }, sinks_);
    pending_.reset();
  }

  void on_end(const run_summary& r) {
    flush();
    std::apply([&r](auto&... s) { (s.on_end(r), ...); }, sinks_);
  }

 private:
  std::tuple<Sinks...> sinks_;
  std::optional<step_metrics> pending_;
};

}  // namespace trainkit
