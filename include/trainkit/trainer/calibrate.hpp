// trainkit/trainer/calibrate.hpp — how the trainer finds a model's GEMM calibration.
//
// `trainer_config.mfu.calibrate` asks the model to time a GEMM in its own compute dtype on its own device before
// step 1 (so the time is not billed to any step), and the report then states MFU against both
// the datasheet peak and the measured rate: the gap between the two says how much of the
// shortfall is the device and how much is the training step. A model opts in with either
//   gemm_calibration calibrate_gemm();   // full record (what was timed, size, best time)
//   double calibrate_tflops();           // just the rate
// the CPU models time the GEMM funnel with the run's library and precision (core/calibrate_cpu.hpp:
// oneDNN or Eigen, fp32 or bf16); a CUDA model would time a bf16
// cuBLASLt GEMM on its stream. This header stays free of Eigen and CUDA so nvcc TUs include it.
#pragma once

#include <concepts>

#include "trainkit/core/gemm_calibration.hpp"

namespace trainkit {

/// Requires: `calibrate_gemm()` returning gemm_calibration, or `calibrate_tflops()` returning a
/// number.
template <class Model>
concept calibratable_model = requires(Model& m) {
  { m.calibrate_gemm() } -> std::convertible_to<gemm_calibration>;
}
|| requires(Model& m) {
  { m.calibrate_tflops() } -> std::convertible_to<double>;
};

/// The model's calibration, or an empty record (tflops 0) when it provides none.
template <class Model>
gemm_calibration calibrate_for(Model& model) {
  if constexpr (requires {
                  { model.calibrate_gemm() } -> std::convertible_to<gemm_calibration>;
                }) {
    return model.calibrate_gemm();
  } else if constexpr (requires {
                         { model.calibrate_tflops() } -> std::convertible_to<double>;
                       }) {
    gemm_calibration r;
    r.tflops = double(model.calibrate_tflops());
    r.what = "the model's GEMM calibration";
    return r;
  } else {
    return {};
  }
}

}  // namespace trainkit
