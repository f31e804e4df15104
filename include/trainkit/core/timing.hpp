// trainkit/core/timing.hpp — monotonic wall-clock timing for the step profile.
#pragma once

#include <chrono>

namespace trainkit {

/// Milliseconds since construction or the last `restart()`, on the steady clock.
class stopwatch {
 public:
  using clock = std::chrono::steady_clock;

  stopwatch() noexcept : start_(clock::now()) {}
  void restart() noexcept { start_ = clock::now(); }
  double elapsed_ms() const noexcept {
    return std::chrono::duration<double, std::milli>(clock::now() - start_).count();
  }
  /// Returns the elapsed time and restarts: consecutive laps tile the timeline without gaps.
  double lap_ms() noexcept {
    const auto now = clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - start_).count();
    start_ = now;
    return ms;
  }

 private:
  clock::time_point start_;
};

}  // namespace trainkit
