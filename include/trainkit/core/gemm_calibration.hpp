// trainkit/core/gemm_calibration.hpp — what a start-up GEMM measurement found (mfu_settings.calibrate).
//
// The peak table (device_info.hpp) holds datasheet numbers; a real GEMM on a real part reaches
// less (clocks under power limits, a CPU whose vector width or core count differs from the
// nominal figure). A calibration times one large GEMM so MFU can be stated against both. This
// header is only the result type, free of Eigen and CUDA, so any translation unit (nvcc ones
// included) can pass it around; the CPU measurement is in core/calibrate_cpu.hpp.
#pragma once

#include <string>

namespace trainkit {

struct gemm_calibration {
  double tflops = 0;   // measured rate: 2·m·n·k / best time; 0 = not measured
  int n = 0;           // square GEMM size, when square
  int reps = 0;        // timed repetitions (best one kept)
  double best_ms = 0;  // fastest repetition
  std::string what;    // e.g. "Eigen sgemm 1024^3 (f32)", "cuBLASLt bf16 8192^3"
};

}  // namespace trainkit
