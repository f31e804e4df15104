// trainkit/core/calibrate_cpu.hpp — the CPU's measured GEMM rate, for mfu_settings.calibrate.
//
// Times the product the CPU models themselves run: linalg::gemm (core/linalg/gemm_cpu.hpp) under
// the process's current settings — oneDNN's or Eigen's fp32 kernels, or bf16 operands, over the
// OpenMP team in the funnel's slabs — so MFU against this rate says how much of the step is
// GEMM-shaped work running at the speed the same kernels reach on this machine. The peak
// (device_info.hpp's cpu_peak: cores × FLOP/cycle × clock) is the other yardstick; this one is
// what the libraries achieve.
#pragma once

#include <algorithm>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/core/gemm_calibration.hpp"
#include "trainkit/core/linalg/gemm_cpu.hpp"
#include "trainkit/core/timing.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace trainkit {

/// Times C = A·B for random n×n float matrices through linalg::gemm with the current settings:
/// one untimed warm-up run, then the best of `reps`. Best rather than mean: the question is what
/// the machine can reach, and on a shared machine the mean measures the neighbours.
inline gemm_calibration calibrate_cpu_sgemm(int n = 1024, int reps = 5) {
  if (n <= 0 || reps <= 0)
    throw config_error("calibrate_cpu_sgemm: n and reps must be positive (n=" + std::to_string(n) +
                       ", reps=" + std::to_string(reps) + ")");
  namespace la = linalg;
  const std::size_t count = std::size_t(n) * std::size_t(n);
  std::vector<float> a(count), b(count), c(count);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& x : a) x = u(rng);
  for (auto& x : b) x = u(rng);
  auto product = [&] {
    la::gemm(c.data(), la::operand<float>{a.data(), n}, la::operand<float>{b.data(), n}, n, n, n,
             false, la::split::longer_side, [](la::index, la::index, la::index, la::index) {});
  };
  product();  // warm-up: page faults, OpenMP thread start-up, oneDNN's JIT
  double best = 1e300;
  for (int i = 0; i < reps; ++i) {
    stopwatch sw;
    product();
    best = std::min(best, sw.elapsed_ms());
  }
  volatile float sink = c[0];  // keep the product observable
  (void)sink;
  const la::gemm_settings s = la::current_gemm_settings();
  const bool bf16 = s.precision == la::gemm_precision::bf16;
  int threads = 1;
#if defined(_OPENMP)
  threads = omp_get_max_threads();
#endif
  gemm_calibration r;
  r.n = n;
  r.reps = reps;
  r.best_ms = best;
  r.tflops = 2.0 * double(n) * n * n / (best / 1e3) / 1e12;
  r.what = std::string(bf16                                    ? "oneDNN bf16 gemm "
                       : s.library == la::gemm_library::onednn ? "oneDNN sgemm "
                                                               : "Eigen sgemm ") +
           std::to_string(n) + "^3 (" + (bf16 ? "bf16" : "f32") + ", " + std::to_string(threads) +
           " thread" + (threads == 1 ? "" : "s") + ")";
  return r;
}

}  // namespace trainkit
