// trainkit/core/linalg/detail/onednn_gemm.hpp — the two oneDNN GEMMs the CPU GEMM funnel
// (core/linalg/gemm_cpu.hpp) calls when trainkit is built with oneDNN (TRAINKIT_HAS_ONEDNN, set by
// CMake when it finds Debian's libdnnl-dev), and the fp32 → bf16 rounding of their operands.
//
// Why oneDNN: it chooses its kernels at run time (JIT for AVX2, AVX-512, AVX512_BF16, AMX), so one
// portable binary (built for x86-64-v3) runs 512-bit fp32 kernels and native bf16 products where
// the CPU has them; Eigen's kernels are fixed by the compiler flags (AVX2 at x86-64-v3: half an
// AVX-512 machine's rate). Both calls are oneDNN's row-major BLAS-like entry points:
// dnnl_sgemm (public, dnnl.h) and dnnl_gemm_bf16bf16f32 (exported with DNNL_API since oneDNN 1.x
// and declared by oneDNN's own tests and by Intel's extensions, but not in dnnl.h: CMake checks
// that the library links it before defining TRAINKIT_HAS_ONEDNN). Called inside an OpenMP
// parallel region they run on the calling thread only, which is how the funnel uses them: one slab
// of C per thread, fixed by the shapes, so results do not depend on scheduling.
// Not for users: gemm_cpu.hpp is the interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "trainkit/core/error.hpp"

#if defined(TRAINKIT_HAS_ONEDNN)
#include <oneapi/dnnl/dnnl.h>

// oneDNN's src/common/gemm.cpp: C (M, N) = alpha·op(A)·op(B) + beta·C, row-major, A and B in bf16
// (oneDNN's bfloat16_t is 16 bits of storage, passed here as std::uint16_t), C in fp32.
extern "C" dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M, dnnl_dim_t N,
                                               dnnl_dim_t K, float alpha, const std::uint16_t* A,
                                               dnnl_dim_t lda, const std::uint16_t* B,
                                               dnnl_dim_t ldb, float beta, float* C,
                                               dnnl_dim_t ldc);
#endif

namespace trainkit::linalg::detail {

/// Whether this build calls oneDNN (the GEMM funnel's fp32 kernels and the bf16 precision).
inline constexpr bool has_onednn =
#if defined(TRAINKIT_HAS_ONEDNN)
    true;
#else
    false;
#endif

/// fp32 → bf16 bits, round to nearest even, NaN kept a (quiet) NaN; branch-free so loops over it
/// vectorise. Equal to bf16::from_float (core/bf16.hpp) for every input.
inline std::uint16_t round_to_bf16(float f) noexcept {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  return std::uint16_t(nan ? ((u >> 16) | 0x0040u) : rounded);
}

/// `rows` rows of `cols` floats, `stride` apart, to a dense bf16 matrix (rows, cols).
inline void round_rows_to_bf16(std::uint16_t* out, const float* in, std::ptrdiff_t rows,
                               std::ptrdiff_t cols, std::ptrdiff_t stride) {
  for (std::ptrdiff_t r = 0; r < rows; ++r) {
    const float* src = in + r * stride;
    std::uint16_t* dst = out + r * cols;
    for (std::ptrdiff_t c = 0; c < cols; ++c) dst[c] = round_to_bf16(src[c]);
  }
}

inline void check_onednn(int status, const char* what, std::ptrdiff_t M, std::ptrdiff_t N,
                         std::ptrdiff_t K) {
  if (status != 0)
    throw config_error(std::string("linalg: oneDNN ") + what + " failed (status " +
                       std::to_string(status) + ") for M=" + std::to_string(M) +
                       " N=" + std::to_string(N) + " K=" + std::to_string(K));
}

#if defined(TRAINKIT_HAS_ONEDNN)
/// C (M, N), rows ldc apart, = (or += when add) op(A)·op(B), fp32, on the calling thread when
/// called inside a parallel region.
inline void onednn_sgemm(float* c, std::ptrdiff_t ldc, const float* a, std::ptrdiff_t lda, bool ta,
                         const float* b, std::ptrdiff_t ldb, bool tb, std::ptrdiff_t M,
                         std::ptrdiff_t N, std::ptrdiff_t K, bool add) {
  check_onednn(dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.0f, a, lda, b, ldb,
                          add ? 1.0f : 0.0f, c, ldc),
               "sgemm", M, N, K);
}

/// The same with A and B in bf16 (products exact in fp32, sums in fp32).
inline void onednn_gemm_bf16(float* c, std::ptrdiff_t ldc, const std::uint16_t* a,
                             std::ptrdiff_t lda, bool ta, const std::uint16_t* b,
                             std::ptrdiff_t ldb, bool tb, std::ptrdiff_t M, std::ptrdiff_t N,
                             std::ptrdiff_t K, bool add) {
  check_onednn(dnnl_gemm_bf16bf16f32(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.0f, a, lda, b, ldb,
                                     add ? 1.0f : 0.0f, c, ldc),
               "gemm_bf16bf16f32", M, N, K);
}
#endif

}  // namespace trainkit::linalg::detail
