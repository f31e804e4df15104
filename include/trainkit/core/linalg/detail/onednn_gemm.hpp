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
//
// Signals. oneDNN's JIT fp32 GEMM kernels before 3.11.2 (jit_avx512_common_gemm_f32,
// jit_avx_gemm_f32; uxlfoundation/oneDNN issue 4845, fixed by PR 4855) point the stack pointer
// into a heap workspace while they run (on AVX-512 CPUs whenever K > 84: every product of a
// model). A signal handled on that thread meanwhile has its frame (~3 KB with AVX-512 state)
// pushed below the workspace, over the heap's chunk headers; the process later aborts in free()
// ("corrupted size vs. prev_size while consolidating"). That was the abort of
// gpt_fineweb.mpi_sigterm with oneDNN fp32 (SIGTERM/SIGUSR1 stop a rank mid-step). So
// onednn_sgemm blocks the asynchronous signals on the calling thread for the call (one
// pthread_sigmask pair, ~0.7 µs) with such a oneDNN: a signal waits until the product is done and
// is then handled on the real stack, where the trainer's handler sets its stop flag as before.
// Faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP) stay unblocked. The bf16 kernels never move
// the stack pointer (checked in oneDNN's sources) and run unguarded.
// Not for users: gemm_cpu.hpp is the interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "trainkit/core/error.hpp"

#if defined(__unix__)
#include <pthread.h>
#include <signal.h>
#endif

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

/// Whether oneDNN `major.minor.patch`'s JIT fp32 GEMM kernels run with the stack pointer in a heap
/// workspace, so that a signal handled during one corrupts the heap (fixed in 3.11.2 and 3.12).
constexpr bool sgemm_moves_stack_into_heap(int major, int minor, int patch) noexcept {
  if (major != 3) return major < 3;
  return minor < 11 || (minor == 11 && patch < 2);
}

/// Blocks the asynchronous signals on the calling thread while it lives, when `active`; restores
/// the thread's mask after. Faults stay deliverable: blocking them would not defer them but kill
/// the process.
class async_signals_blocked {
 public:
  explicit async_signals_blocked(bool active) noexcept {
#if defined(__unix__)
    if (!active) return;
    sigset_t all;
    sigfillset(&all);
    for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP}) sigdelset(&all, s);
    active_ = pthread_sigmask(SIG_BLOCK, &all, &saved_) == 0;
#else
    (void)active;
#endif
  }
  ~async_signals_blocked() {
#if defined(__unix__)
    if (active_) pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
#endif
  }
  async_signals_blocked(const async_signals_blocked&) = delete;
  async_signals_blocked& operator=(const async_signals_blocked&) = delete;

 private:
#if defined(__unix__)
  sigset_t saved_{};
#endif
  bool active_ = false;
};

#if defined(TRAINKIT_HAS_ONEDNN)
/// Whether the oneDNN this process loaded has the signal-unsafe fp32 kernels (asked once).
inline bool onednn_sgemm_needs_signal_block() noexcept {
  static const bool needs = [] {
    const dnnl_version_t* v = dnnl_version();
    return v == nullptr || sgemm_moves_stack_into_heap(v->major, v->minor, v->patch);
  }();
  return needs;
}

/// C (M, N), rows ldc apart, = (or += when add) op(A)·op(B), fp32, on the calling thread when
/// called inside a parallel region; asynchronous signals wait for the product (see the top).
inline void onednn_sgemm(float* c, std::ptrdiff_t ldc, const float* a, std::ptrdiff_t lda, bool ta,
                         const float* b, std::ptrdiff_t ldb, bool tb, std::ptrdiff_t M,
                         std::ptrdiff_t N, std::ptrdiff_t K, bool add) {
  const async_signals_blocked guard(onednn_sgemm_needs_signal_block());
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
