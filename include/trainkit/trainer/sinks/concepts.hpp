// trainkit/trainer/sinks/concepts.hpp — the StepSink role: where a run's metrics go.
//
// The trainer measures; sinks show or store what it measured. Each shipped sink (console,
// JSONL metrics file, TensorBoard event file) is a small class driven by the same two calls, so
// the loop does not know how a step is rendered or stored.
#pragma once

#include "trainkit/trainer/report.hpp"
#include "trainkit/trainer/step_metrics.hpp"

namespace trainkit {

/// Requires:
///  - `on_step(m)`: one step's metrics (called in the log phase, so its time counts as log_ms);
///  - `on_end(summary)`: the run is over; the summary is the one run() returns.
template <class S>
concept step_sink = requires(S s, const step_metrics& m, const run_summary& r) {
  s.on_step(m);
  s.on_end(r);
};

}  // namespace trainkit
