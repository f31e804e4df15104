// trainkit/core/calibrate_cpu.hpp — the CPU's measured fp32 GEMM rate, for mfu_settings.calibrate.
//
// Times the GEMM the CPU model itself uses (Eigen, OpenMP-parallel when enabled), so MFU against
// this rate says how much of the step is GEMM-shaped work running at the machine's real speed.
// The "cpu" row of the peak table is a nominal figure for one 2-core machine; this measures the
// one that is running.
#pragma once

#include <Eigen/Core>

#include <algorithm>
#include <string>

#include "trainkit/core/error.hpp"
#include "trainkit/core/gemm_calibration.hpp"
#include "trainkit/core/timing.hpp"

namespace trainkit {

/// Times C = A·B for random n×n fp32 matrices: one untimed warm-up run, then the best of `reps`.
/// Best rather than mean: the question is what the machine can reach, and on a shared machine
/// the mean measures the neighbours.
inline gemm_calibration calibrate_cpu_sgemm(int n = 1024, int reps = 5) {
  if (n <= 0 || reps <= 0)
    throw config_error("calibrate_cpu_sgemm: n and reps must be positive (n=" + std::to_string(n) +
                       ", reps=" + std::to_string(reps) + ")");
  using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const matrix a = matrix::Random(n, n), b = matrix::Random(n, n);
  matrix c(n, n);
  c.noalias() = a * b;  // warm-up: page faults, OpenMP thread start-up
  double best = 1e300;
  for (int i = 0; i < reps; ++i) {
    stopwatch sw;
    c.noalias() = a * b;
    best = std::min(best, sw.elapsed_ms());
  }
  volatile float sink = c(0, 0);  // keep the product observable
  (void)sink;
  gemm_calibration r;
  r.n = n;
  r.reps = reps;
  r.best_ms = best;
  r.tflops = 2.0 * double(n) * n * n / (best / 1e3) / 1e12;
  r.what = "Eigen sgemm " + std::to_string(n) + "^3 (f32)";
  return r;
}

}  // namespace trainkit
