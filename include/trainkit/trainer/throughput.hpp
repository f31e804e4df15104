// trainkit/trainer/throughput.hpp — what turns a step's time into tokens/s, TFLOP/s and MFU.
//
// The trainer measures each step's wall time; these helpers derive the rates from it. MFU divides
// the achieved FLOP/s (the model's flops_per_token times tokens/s) by the dense peak of the device
// that ran: `mfu_settings.peak_tflops` when set, else core/device_info.hpp's table for the device
// the model names (names_its_device) or `mfu_settings.device_name`; a device the table does not
// know gets no MFU rather than a wrong one. With `mfu_settings.calibrate` the model times a GEMM
// before step 1 (trainer/calibrate.hpp) and MFU is also stated against that measured rate.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include "trainkit/core/device_info.hpp"
#include "trainkit/core/gemm_calibration.hpp"
#include "trainkit/model/concepts.hpp"
#include "trainkit/trainer/calibrate.hpp"
#include "trainkit/trainer/config.hpp"
#include "trainkit/trainer/nvtx.hpp"
#include "trainkit/trainer/report.hpp"
#include "trainkit/trainer/sinks/console.hpp"
#include "trainkit/trainer/step_metrics.hpp"

namespace trainkit {

/// What turns a step's time into throughput and MFU.
struct step_rates {
  double flops_per_token = 0;
  double peak = 0;        // TFLOP/s; 0 = unknown (no MFU)
  double calibrated = 0;  // measured GEMM TFLOP/s; 0 = not measured
  int devices = 1;        // ranks, one device each: MFU is per device (all ranks' FLOP/s / devices)
};

/// `m` with dt_ms = `dt_ms`, other_ms its part outside the phases and the rates derived.
inline step_metrics with_rates(step_metrics m, double dt_ms, const step_rates& r) {
  m.dt_ms = dt_ms;
  m.other_ms = std::max(0.0, dt_ms - m.phases_ms());
  m.tok_per_s = dt_ms > 0 ? double(m.tokens) / (dt_ms / 1e3) : 0;
  m.tflops = r.flops_per_token * m.tok_per_s / 1e12;
  // tflops is the whole run's (every rank's tokens); a device's share of it is what one device's
  // peak can be compared with. Over N ranks all-ranks/one-peak reads N times too high.
  const double per_device = m.tflops / double(std::max(1, r.devices));
  m.mfu = r.peak > 0 ? per_device / r.peak : NAN;
  m.mfu_calibrated = r.calibrated > 0 ? per_device / r.calibrated : NAN;
  return m;
}

/// The dense peak (TFLOP/s) MFU is measured against; 0 when the device is not in the table.
template <class Model>
double peak_tflops_for(const Model& model, const mfu_settings& mfu) {
  if (mfu.peak_tflops > 0) return mfu.peak_tflops;
  std::string name = mfu.device_name;
  if constexpr (model::names_its_device<Model>) name = model.device_name();
  return peak_tflops(name, mfu.dtype).value_or(0.0);
}

/// The model's GEMM calibration, announced on the console (with its share of `peak` when known).
template <class Model>
gemm_calibration run_calibration(Model& model, double peak, console_sink& console) {
  nvtx_range r("calibrate");
  gemm_calibration c = calibrate_for(model);
  if (c.tflops > 0) {
    std::string line =
        "calibrate: " + c.what + ": " + detail::format("%.4g", c.tflops) + " TFLOP/s measured";
    if (peak > 0)
      line += detail::format(" (%.1f%% of the %.4g TFLOP/s peak)", 100 * c.tflops / peak, peak);
    console.say(line + "\n");
  } else {
    console.say(
        "calibrate: this model provides no GEMM calibration (calibrate_gemm() or "
        "calibrate_tflops()); skipped\n");
  }
  return c;
}

/// The rates of a run of sequences of `seq_len` tokens on `devices` ranks; calibrates first
/// when `mfu.calibrate` (the result lands in `calibration`).
template <class Model>
step_rates measure_step_rates(Model& model, int seq_len, int devices, const mfu_settings& mfu,
                              console_sink& console, gemm_calibration& calibration) {
  step_rates r{double(model.flops_per_token(seq_len)), peak_tflops_for(model, mfu), 0, devices};
  if (mfu.calibrate) calibration = run_calibration(model, r.peak, console);
  r.calibrated = calibration.tflops;
  return r;
}

/// What the end-of-run summary states MFU against.
inline summary_context summary_basis(const step_rates& r, const mfu_settings& mfu) {
  return {r.peak, r.calibrated, mfu.dtype == compute_dtype::bf16 ? "bf16" : "f32"};
}

}  // namespace trainkit
