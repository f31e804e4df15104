// trainkit/optim/schedule.hpp — learning-rate schedules: linear warmup, then constant, cosine or
// warmup-stable-decay (WSD).
//
// Warmup follows llm.c (steps are 0-based and step s < warmup gets max_lr·(s+1)/warmup, so the
// first step already moves the weights). Cosine decays from max_lr at the end of warmup to
// final_lr_frac·max_lr at total_steps (Loshchilov & Hutter's SGDR curve, as in GPT-2/3 recipes).
// WSD (Hu et al. 2024, "MiniCPM") holds max_lr and spends only the last decay_frac of the run
// decaying linearly, which lets a run be extended or branched from any stable-phase checkpoint.
// Arithmetic is in double so the value at a step does not depend on float rounding of step counts.
#pragma once

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <string_view>

#include "trainkit/core/error.hpp"
#include "trainkit/optim/detail/number_text.hpp"

namespace trainkit::optim {

enum class schedule_kind { constant, cosine, wsd };

constexpr std::string_view schedule_kind_name(schedule_kind k) noexcept {
  switch (k) {
    case schedule_kind::constant:
      return "constant";
    case schedule_kind::cosine:
      return "cosine";
    case schedule_kind::wsd:
      return "wsd";
  }
  return "?";
}

/// Parses "constant", "cosine" or "wsd" (a program's schedule setting); config_error names the bad value.
inline schedule_kind parse_schedule_kind(std::string_view s) {
  for (schedule_kind k : {schedule_kind::constant, schedule_kind::cosine, schedule_kind::wsd}) {
    if (schedule_kind_name(k) == s) return k;
  }
  throw config_error("unknown learning-rate schedule '" + std::string(s) +
                     "' (valid: constant, cosine, wsd)");
}

/// The learning rate at each 0-based optimizer step. Steps at or past total_steps get the final
/// rate of the schedule (so a run extended past its plan keeps a sane value).
struct lr_schedule {
  schedule_kind kind = schedule_kind::cosine;
  float max_lr = 6e-4f;
  int warmup_steps = 0;
  int total_steps = 1;
  float final_lr_frac = 0.0f;  // final rate = final_lr_frac · max_lr (cosine, wsd)
  float decay_frac = 0.2f;     // wsd: share of total_steps spent decaying

  friend bool operator==(const lr_schedule&, const lr_schedule&) = default;

  /// Throws config_error naming the first field out of range and its value.
  void validate() const {
    using detail::number_text;
    if (!(max_lr >= 0.0f) || !std::isfinite(max_lr))
      throw config_error("lr_schedule: max_lr must be finite and >= 0: " + number_text(max_lr));
    if (total_steps < 1)
      throw config_error("lr_schedule: total_steps must be >= 1: " + std::to_string(total_steps));
    // A warmup longer than the run is allowed (llm.c allows it too): short smoke runs with the
    // default warmup then simply never reach max_lr.
    if (warmup_steps < 0)
      throw config_error("lr_schedule: warmup_steps must be >= 0: " + std::to_string(warmup_steps));
    if (!(final_lr_frac >= 0.0f && final_lr_frac <= 1.0f))
      throw config_error("lr_schedule: final_lr_frac must be in [0,1]: " +
                         number_text(final_lr_frac));
    if (!(decay_frac >= 0.0f && decay_frac <= 1.0f))
      throw config_error("lr_schedule: decay_frac must be in [0,1]: " + number_text(decay_frac));
  }

  /// First step of WSD's decay phase: the last round(decay_frac·total_steps) steps decay, but
  /// never before warmup has finished (a short smoke run with a long warmup still warms up).
  int decay_start() const noexcept {
    const int decay_steps = static_cast<int>(std::lround(double(decay_frac) * total_steps));
    return std::max(total_steps - decay_steps, warmup_steps);
  }

  /// The learning rate for 0-based step `step` (negative steps are treated as 0).
  float at(int step) const noexcept {
    const double peak = max_lr;
    const double floor = peak * double(final_lr_frac);
    if (step < 0) step = 0;
    if (step < warmup_steps) return static_cast<float>(peak * (step + 1) / warmup_steps);
    switch (kind) {
      case schedule_kind::constant:
        return max_lr;
      case schedule_kind::cosine: {
        const int span = total_steps - warmup_steps;
        if (span <= 0) return static_cast<float>(floor);
        const double progress = std::min(1.0, double(step - warmup_steps) / span);
        const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
        return static_cast<float>(floor + coeff * (peak - floor));
      }
      case schedule_kind::wsd: {
        const int start = decay_start();
        if (step < start) return max_lr;
        const int span = total_steps - start;
        if (span <= 0) return static_cast<float>(floor);
        const double progress = std::min(1.0, double(step - start) / span);
        return static_cast<float>(peak + progress * (floor - peak));
      }
    }
    return max_lr;
  }

  /// "cosine max_lr=0.0006 warmup=700 total=19073 final_lr_frac=0 decay_frac=0.2" for logs.
  std::string to_string() const {
    using detail::number_text;
    return std::string(schedule_kind_name(kind)) + " max_lr=" + number_text(max_lr) +
           " warmup=" + std::to_string(warmup_steps) + " total=" + std::to_string(total_steps) +
           " final_lr_frac=" + number_text(final_lr_frac) +
           " decay_frac=" + number_text(decay_frac);
  }
};

}  // namespace trainkit::optim
