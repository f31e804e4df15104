// Tests for the CPU's peak FLOP/s (core/device_info.hpp's cpu_peak, core/cpu_features.hpp's
// measure_core_ghz), the figure the trainer's MFU divides by on --device cpu. The rules per
// vector unit are pinned on made-up CPUs (an AMD Zen 5 and Zen 4, an Intel Sapphire Rapids, AVX2
// and SSE machines); on the machine running the test, the peak must be what peak_tflops("cpu")
// answers and a real product, one thread, must not beat the one-core peak: a peak set too low
// (the 0.2 TFLOP/s placeholder this replaced, a vector width or clock read wrong) gives an MFU
// above 100%. Planted: 16 instead of 64 fp32 FLOP/cycle for AVX-512, and the clock read from
// /proc/cpuinfo (2.6 GHz under this machine's hypervisor, the cores run at ~4.5): the product test
// failed with both.
#include "trainkit/core/device_info.hpp"  // first: the header compiles on its own

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "trainkit/core/linalg/gemm_cpu.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace tk = trainkit;

namespace {

tk::cpu_features amd(unsigned family, bool bf16) {
  tk::cpu_features f;
  f.vendor = "AuthenticAMD";
  f.family = family;
  f.avx2 = f.fma = f.avx512f = f.avx512bw = f.avx512vl = true;
  f.avx512_bf16 = bf16;
  return f;
}

TEST(CpuPeak, PerCoreRatesFollowTheVectorUnits) {
  // AMD EPYC Zen 5 (family 0x1a): two 512-bit FMA pipes, VDPBF16PS at twice that.
  auto zen5 = tk::estimate_cpu_peak(amd(0x1a, true), 2, 4.5);
  EXPECT_EQ(zen5.f32_flops_per_cycle, 64);
  EXPECT_EQ(zen5.bf16_flops_per_cycle, 128);
  EXPECT_NEAR(zen5.f32_tflops, 2 * 64 * 4.5e9 / 1e12, 1e-12);
  EXPECT_NEAR(zen5.bf16_tflops, 2 * 128 * 4.5e9 / 1e12, 1e-12);
  EXPECT_DOUBLE_EQ(zen5.tflops(tk::compute_dtype::bf16), zen5.bf16_tflops);
  EXPECT_NE(zen5.basis.find("2 cores"), std::string::npos) << zen5.basis;
  EXPECT_NE(zen5.basis.find("4.50 GHz"), std::string::npos) << zen5.basis;
  // Zen 4 (family 0x19) runs AVX-512 on 256-bit units: half.
  auto zen4 = tk::estimate_cpu_peak(amd(0x19, true), 1, 3.0);
  EXPECT_EQ(zen4.f32_flops_per_cycle, 32);
  EXPECT_EQ(zen4.bf16_flops_per_cycle, 64);
  // Intel Sapphire Rapids: AVX-512 with two FMA units, AMX-BF16 tiles.
  tk::cpu_features spr;
  spr.vendor = "GenuineIntel";
  spr.family = 6;
  spr.avx2 = spr.fma = spr.avx512f = spr.avx512_bf16 = spr.amx_bf16 = true;
  auto p = tk::estimate_cpu_peak(spr, 56, 2.0);
  EXPECT_EQ(p.f32_flops_per_cycle, 64);
  EXPECT_EQ(p.bf16_flops_per_cycle, 1024);
  EXPECT_NEAR(p.bf16_tflops, 56 * 1024 * 2.0e9 / 1e12, 1e-9);
  // AVX2 + FMA without bf16 instructions: bf16 is no faster than fp32.
  tk::cpu_features avx2;
  avx2.avx2 = avx2.fma = true;
  p = tk::estimate_cpu_peak(avx2, 4, 3.0);
  EXPECT_EQ(p.f32_flops_per_cycle, 32);
  EXPECT_EQ(p.bf16_flops_per_cycle, 32);
  p = tk::estimate_cpu_peak(tk::cpu_features{}, 1, 2.0);
  EXPECT_EQ(p.f32_flops_per_cycle, 8);
  // No clock measured: no peak (the trainer then states no MFU rather than a wrong one).
  EXPECT_EQ(tk::estimate_cpu_peak(amd(0x1a, true), 2, 0.0).f32_tflops, 0.0);
}

#if defined(__x86_64__) && defined(__unix__)

TEST(CpuPeak, ThisCpuIsWhatTheTableAnswersForCpu) {
  const tk::cpu_peak p = tk::this_cpu_peak();
  EXPECT_GT(p.ghz, 0.5) << p.basis;
  EXPECT_LT(p.ghz, 8.0) << p.basis;
  EXPECT_GE(p.cores, 1);
#if defined(_OPENMP)
  EXPECT_LE(p.cores, omp_get_max_threads());  // the cores the run uses, not the machine's
#endif
  EXPECT_DOUBLE_EQ(*tk::peak_tflops("cpu", tk::compute_dtype::f32), p.f32_tflops);
  EXPECT_DOUBLE_EQ(*tk::peak_tflops("CPU", tk::compute_dtype::bf16), p.bf16_tflops);
  EXPECT_GE(p.bf16_tflops, p.f32_tflops);
  if (tk::this_cpu().avx512_bf16 && !tk::this_cpu().amx_bf16) {
    EXPECT_DOUBLE_EQ(p.bf16_tflops, 2 * p.f32_tflops);
  }
}

// The best rate of `reps` products (M, K)·(K, N) on this thread under `settings`, in TFLOP/s.
double best_rate(const tk::linalg::gemm_settings& settings, int reps) {
  namespace la = tk::linalg;
  const la::scoped_gemm_settings scope(settings);
  const la::index M = 512, N = 768, K = 768;
  std::vector<float> a(std::size_t(M * K), 0.25f), b(std::size_t(K * N), 0.5f),
      c(std::size_t(M * N));
  double best_s = 1e30;
  for (int r = 0; r < reps + 1; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    la::gemm(c.data(), la::operand<float>{a.data(), K}, la::operand<float>{b.data(), N}, M, N, K,
             false, la::split::longer_side, [](la::index, la::index, la::index, la::index) {});
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) best_s = std::min(best_s, s);  // the first warms the pages and the JIT
  }
  EXPECT_FLOAT_EQ(c[0], 0.25f * 0.5f * K);
  return 2.0 * double(M) * N * K / best_s / 1e12;
}

TEST(CpuPeak, AProductOnOneCoreStaysBelowItsPeak) {
#if defined(_OPENMP)
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
#endif
  const tk::cpu_peak one_core = tk::estimate_cpu_peak(tk::this_cpu(), 1, tk::this_cpu_peak().ghz);
  const double f32 = best_rate(tk::linalg::gemm_settings{}, 8);
  // 10% for the clock's measurement noise under a hypervisor; a peak read wrong is off by far more
  EXPECT_LT(f32, 1.1 * one_core.f32_tflops) << one_core.basis;
  std::printf("one thread: fp32 %.1f GFLOP/s of a %.1f GFLOP/s peak\n", 1e3 * f32,
              1e3 * one_core.f32_tflops);
  EXPECT_GT(f32, 0.0);
  tk::linalg::gemm_settings bf16;
  bf16.precision = tk::linalg::gemm_precision::bf16;
  if (tk::linalg::gemm_settings_problem(bf16).empty()) {
    const double rate = best_rate(bf16, 8);
    EXPECT_LT(rate, 1.1 * one_core.bf16_tflops) << one_core.basis;
    std::printf("one thread: bf16 %.1f GFLOP/s of a %.1f GFLOP/s peak\n", 1e3 * rate,
                1e3 * one_core.bf16_tflops);
  }
#if defined(_OPENMP)
  omp_set_num_threads(saved);
#endif
}

#endif

}  // namespace
