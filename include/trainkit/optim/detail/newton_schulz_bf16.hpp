// trainkit/optim/detail/newton_schulz_bf16.hpp — the host twin of the CUDA Newton–Schulz
// iteration (optim/cuda/newton_schulz.cuh): the same steps, rounded to bf16 at the same points.
//
// The device iteration keeps X, A = X·Xᵀ and B = b·A + c·A² in bf16 and accumulates each product
// in fp32 (cuBLASLt, CUBLAS_COMPUTE_32F), folding the sums into the GEMM's epilogue
// (D = α·P + β·C, rounded once): B = bf16(c·(A·A) + b·A), X ← bf16((B·X) + a·X). This function
// does exactly that with plain loops in float, so a GPU test can compare the kernel with it at the
// tolerance of a differently ordered fp32 sum rather than of bf16 itself, and a CPU test can
// measure what bf16 costs against the fp32 iteration (detail/newton_schulz.hpp). No Eigen: it is
// included from .cu tests.
#pragma once

#include <cmath>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "trainkit/core/bf16.hpp"
#include "trainkit/optim/detail/ns_coefficients.hpp"

namespace trainkit::optim::detail {

inline float round_to_bf16(float x) noexcept {
  return bf16::from_float(x).to_float();
}

/// out (rows, cols) = the bf16 Newton–Schulz orthogonalisation of g (rows, cols), both row-major
/// floats (g is read as bf16: it is rounded first, as the device reads bf16 momentum). One
/// iteration per entry of `iterations` (per-iteration coefficients: Polar Express).
inline void newton_schulz_bf16_reference(const float* g, float* out, std::ptrdiff_t rows,
                                         std::ptrdiff_t cols,
                                         std::span<const ns_coefficients> iterations) {
  const bool tall = rows > cols;
  const std::ptrdiff_t s = tall ? cols : rows, l = tall ? rows : cols;
  const std::size_t n = std::size_t(s) * std::size_t(l);
  std::vector<float> x(n), next(n), gram(std::size_t(s * s)), poly(std::size_t(s * s));
  // The norm in fp32 over the bf16 values, as the normalising kernel's block sum.
  double sq = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const float v = round_to_bf16(g[i]);
    sq += double(v) * double(v);
  }
  const float inv = 1.0f / (static_cast<float>(std::sqrt(sq)) + 1e-7f);
  for (std::ptrdiff_t r = 0; r < rows; ++r)
    for (std::ptrdiff_t c = 0; c < cols; ++c) {
      const float v = round_to_bf16(round_to_bf16(g[r * cols + c]) * inv);
      (tall ? x[std::size_t(c * l + r)] : x[std::size_t(r * cols + c)]) = v;
    }
  for (const ns_coefficients& k : iterations) {
    for (std::ptrdiff_t i = 0; i < s; ++i)  // A = X·Xᵀ (s, s)
      for (std::ptrdiff_t j = 0; j < s; ++j) {
        float acc = 0.0f;
        for (std::ptrdiff_t t = 0; t < l; ++t)
          acc += x[std::size_t(i * l + t)] * x[std::size_t(j * l + t)];
        gram[std::size_t(i * s + j)] = round_to_bf16(acc);
      }
    for (std::ptrdiff_t i = 0; i < s; ++i)  // B = c·A·A + b·A (s, s)
      for (std::ptrdiff_t j = 0; j < s; ++j) {
        float acc = 0.0f;
        for (std::ptrdiff_t t = 0; t < s; ++t)
          acc += gram[std::size_t(i * s + t)] * gram[std::size_t(t * s + j)];
        poly[std::size_t(i * s + j)] =
            round_to_bf16(k.c * acc + k.b * gram[std::size_t(i * s + j)]);
      }
    for (std::ptrdiff_t i = 0; i < s; ++i)  // X ← B·X + a·X (s, l)
      for (std::ptrdiff_t j = 0; j < l; ++j) {
        float acc = 0.0f;
        for (std::ptrdiff_t t = 0; t < s; ++t)
          acc += poly[std::size_t(i * s + t)] * x[std::size_t(t * l + j)];
        next[std::size_t(i * l + j)] = round_to_bf16(acc + k.a * x[std::size_t(i * l + j)]);
      }
    std::swap(x, next);
  }
  for (std::ptrdiff_t r = 0; r < rows; ++r)
    for (std::ptrdiff_t c = 0; c < cols; ++c)
      out[r * cols + c] = tall ? x[std::size_t(c * l + r)] : x[std::size_t(r * cols + c)];
}

/// The same with `steps` iterations of one set of coefficients `k` (Keller Jordan's by default).
inline void newton_schulz_bf16_reference(const float* g, float* out, std::ptrdiff_t rows,
                                         std::ptrdiff_t cols, int steps,
                                         ns_coefficients k = muon_quintic) {
  const std::vector<ns_coefficients> iterations(std::size_t(steps < 0 ? 0 : steps), k);
  newton_schulz_bf16_reference(g, out, rows, cols, std::span<const ns_coefficients>(iterations));
}

}  // namespace trainkit::optim::detail
