// trainkit/trainer/sinks/console.hpp — the trainer's console output: step lines, a live progress
// line and messages.
//
// A step line every `log_every` steps (and on the last step and on steps that evaluated):
//   step     10/200 | loss 5.1234 | lr 1.00e-03 | norm 0.812 | 41.3 ms | 12400 tok/s | MFU 3.1%
// On a terminal the program may also ask for a progress line, redrawn in place with "\r\033[K"
// (carriage return, erase line); messages clear it first so they are not written over it. The
// trainer calls `on_step` inside the step's log phase, before the step's wall time is known: the
// step_metrics it passes carry the time measured so far (the sum of the phases) as dt_ms, with
// the rates derived from it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <string_view>

#include "trainkit/trainer/report.hpp"
#include "trainkit/trainer/sinks/concepts.hpp"
#include "trainkit/trainer/step_metrics.hpp"

namespace trainkit {

/// What the console shows.
struct console_settings {
  int log_every = 1;          // step line every N steps (values <= 0 mean 1)
  bool progress_bar = false;  // live progress line (programs enable it on a terminal)
  bool quiet = false;         // nothing at all

  friend bool operator==(const console_settings&, const console_settings&) = default;
};

class console_sink {
 public:
  /// `steps` is the run's last step, for "step N/steps" and the ETA.
  console_sink(std::ostream& out, console_settings settings, int steps) noexcept
      : out_(&out), settings_(settings), steps_(steps) {
    if (settings_.log_every <= 0) settings_.log_every = 1;
  }

  /// A message line (resume, calibration, warnings): it goes above the progress line.
  void say(std::string_view s) {
    if (settings_.quiet) return;
    if (settings_.progress_bar) *out_ << "\r\033[K";
    *out_ << s << std::flush;
  }

  void on_step(const step_metrics& m) {
    if (settings_.quiet) return;
    const bool print = m.step % std::uint64_t(settings_.log_every) == 0 ||
                       m.step == std::uint64_t(steps_) || !std::isnan(m.val_loss);
    char line[320];
    if (print) {
      int n = std::snprintf(
          line, sizeof line,
          "step %6llu/%d | loss %.4f | lr %.2e | norm %.3f | %.1f ms | %.0f tok/s",
          (unsigned long long)m.step, steps_, m.loss, m.lr, m.grad_norm, m.dt_ms, m.tok_per_s);
      // Nothing runs above its peak: a figure over 100% says the assumed peak is wrong, so it is
      // not printed as a measurement (the end-of-run report says which input to fix).
      if (!std::isnan(m.mfu) && n > 0 && n < int(sizeof line))
        n += m.mfu > 1.0 ? std::snprintf(line + n, sizeof line - n, " | MFU n/a (peak too low)")
                         : std::snprintf(line + n, sizeof line - n, " | MFU %.1f%%", 100 * m.mfu);
      if (!std::isnan(m.val_loss) && n > 0 && n < int(sizeof line))
        std::snprintf(line + n, sizeof line - n, " | val %.4f", m.val_loss);
      say(std::string(line) + "\n");
    }
    if (settings_.progress_bar) {
      constexpr int width = 30;
      const double frac = double(m.step) / std::max(steps_, 1);
      const int filled = int(frac * width);
      const double eta_s = m.dt_ms / 1e3 * double(std::uint64_t(steps_) - m.step);
      std::snprintf(line, sizeof line, "[%-*s] %llu/%d  loss %.4f  %.0f tok/s  ETA %dm%02ds", width,
                    std::string(std::size_t(filled), '=').c_str(), (unsigned long long)m.step,
                    steps_, m.loss, m.tok_per_s, int(eta_s) / 60, int(eta_s) % 60);
      *out_ << "\r\033[K" << line << std::flush;
    }
  }

  /// Clears the progress line, so what the program prints next starts on a clean line.
  void on_end(const run_summary&) {
    if (settings_.progress_bar && !settings_.quiet) *out_ << "\r\033[K" << std::flush;
  }

 private:
  std::ostream* out_;
  console_settings settings_;
  int steps_;
};

static_assert(step_sink<console_sink>);

}  // namespace trainkit
