// trainkit/trainer/calibrate.hpp — measuring what a GEMM actually reaches on this machine.
//
// The peak table holds datasheet numbers; a real GEMM on a real part reaches less (clocks under
// power limits, memory-bound shapes, a CPU whose vector width or core count differs from the
// nominal figure). `--calibrate` times one large GEMM at start-up so the report can state MFU
// against both the datasheet and the measured rate: the gap between the two says how much of the
// shortfall is the device and how much is the training step.
//
// Hook for other devices: a model may provide `double calibrate_tflops()` (e.g. a bf16 cuBLASLt
// GEMM on its stream); the trainer calls it when present (see `calibrate_for` below) and falls
// back to the Eigen sgemm for host-memory models.
#pragma once

#include <Eigen/Core>

#include <algorithm>
#include <concepts>
#include <string>

#include "trainkit/core/error.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/timing.hpp"

namespace trainkit {

/// What a calibration measured.
struct gemm_calibration {
  double tflops = 0;  // best of the timed repetitions: 2·n³ / time
  int n = 0;          // square GEMM size
  int reps = 0;
  double best_ms = 0;
  std::string what;  // e.g. "Eigen sgemm 1024^3 (f32)"
};

/// Times C = A·B for random n×n fp32 matrices with Eigen (the CPU model's GEMM), one untimed
/// warm-up run then the best of `reps`. Best rather than mean: the question is what the machine
/// can reach, and on a shared machine the mean measures the neighbours.
inline gemm_calibration calibrate_cpu_sgemm(int n = 1024, int reps = 5) {
  if (n <= 0 || reps <= 0)
    throw config_error("calibrate_cpu_sgemm: n and reps must be positive (n=" + std::to_string(n) +
                       ", reps=" + std::to_string(reps) + ")");
  using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const matrix a = matrix::Random(n, n), b = matrix::Random(n, n);
  matrix c(n, n);
  c.noalias() = a * b;  // warm-up: page faults, thread start-up
  double best = 1e300;
  for (int i = 0; i < reps; ++i) {
    stopwatch sw;
    c.noalias() = a * b;
    best = std::min(best, sw.elapsed_ms());
  }
  // Keep the result observable so the product cannot be optimised away.
  volatile float sink = c(0, 0);
  (void)sink;
  gemm_calibration r;
  r.n = n;
  r.reps = reps;
  r.best_ms = best;
  r.tflops = 2.0 * double(n) * n * n / (best / 1e3) / 1e12;
  r.what = "Eigen sgemm " + std::to_string(n) + "^3 (f32)";
  return r;
}

/// The calibration for a model: its own `calibrate_tflops()` when it has one (a device model
/// measures on its device, in its compute dtype), the Eigen sgemm for host models, or nothing.
template <class Model>
gemm_calibration calibrate_for(Model& model) {
  if constexpr (requires {
                  { model.calibrate_tflops() } -> std::convertible_to<double>;
                }) {
    gemm_calibration r;
    r.tflops = double(model.calibrate_tflops());
    r.what = "the model's own GEMM calibration";
    return r;
  } else if constexpr (requires { typename Model::memory_space; } &&
                       std::same_as<typename Model::memory_space, host_memory>) {
    return calibrate_cpu_sgemm();
  } else {
    return {};  // tflops 0: no calibration available for this model
  }
}

}  // namespace trainkit
