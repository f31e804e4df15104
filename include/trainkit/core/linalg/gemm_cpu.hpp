// trainkit/core/linalg/gemm_cpu.hpp — the CPU matrix product every host-side GEMM goes through:
// row-major operands in flat buffers, one slab of the output per OpenMP thread, an epilogue per
// slab.
//
// Shared by whatever runs GEMMs on the host (gpt2_cpu's layers today; an optimizer that needs
// matrix products, e.g. an orthogonalising one, can call it without depending on a model). Results
// are bit-identical run to run for a fixed thread count: slabs are fixed by the shapes and the
// thread count, never by scheduling.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstddef>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace trainkit::linalg {

using index = std::ptrdiff_t;

template <class S>
using row_matrix = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// A row-major matrix in a flat buffer, `stride` elements from one row to the next, read as its
/// transpose when `transposed`. Products take these rather than Eigen expressions, so each TU
/// instantiates Eigen's product machinery for four operand shapes (A or Aᵀ times B or Bᵀ) instead
/// of one per call site's expression type: that was most of the compile time of every program
/// that trains gpt2_cpu.
template <class S>
struct operand {
  const S* data = nullptr;
  index stride = 0;  // elements between rows of the *stored* matrix
  bool transposed = false;
};

/// C (M, N), rows `ldc` apart, = (or += when `add`) op(A) (M, K) · op(B) (K, N). One thread.
template <class S>
void gemm_block(S* c, index ldc, operand<S> a, operand<S> b, index M, index N, index K, bool add) {
  using in_map = Eigen::Map<const row_matrix<S>, Eigen::Unaligned, Eigen::OuterStride<>>;
  using out_map = Eigen::Map<row_matrix<S>, Eigen::Unaligned, Eigen::OuterStride<>>;
  out_map out(c, M, N, Eigen::OuterStride<>(ldc));
  auto run = [&](const auto& lhs, const auto& rhs) {
    if (add)
      out.noalias() += lhs * rhs;
    else
      out.noalias() = lhs * rhs;
  };
  const Eigen::OuterStride<> sa(a.stride), sb(b.stride);
  if (!a.transposed && !b.transposed)
    run(in_map(a.data, M, K, sa), in_map(b.data, K, N, sb));
  else if (!a.transposed)
    run(in_map(a.data, M, K, sa), in_map(b.data, N, K, sb).transpose());
  else if (!b.transposed)
    run(in_map(a.data, K, M, sa).transpose(), in_map(b.data, K, N, sb));
  else
    run(in_map(a.data, K, M, sa).transpose(), in_map(b.data, N, K, sb).transpose());
}

/// How gemm() cuts C between threads: along the longer side, or by rows when the epilogue needs
/// whole rows (a bias gradient summed per output row of dW).
enum class split { longer_side, rows };

/// C (M, N), dense row-major, = (or += when `add`) op(A) · op(B), then epilogue(r0, nr, c0, nc) on
/// each block of C once its product is done.
///
/// Each OpenMP thread computes one contiguous slab of C with a single-threaded Eigen GEMM and runs
/// the epilogue (bias, residual, bias gradient) on it while the slab is still in cache, so threads
/// meet once per layer product. Eigen's own parallel GEMM shares packed panels between threads and
/// spin-waits on them many times per product, which is ruinous when another process holds one of
/// the cores (measured on the shared 2-core build machine: 1–6 GFLOP/s instead of ~25). Slabs are
/// fixed by the shapes and the thread count, so results do not depend on scheduling.
template <class S, class Epilogue>
void gemm(S* c, operand<S> a, operand<S> b, index M, index N, index K, bool add, split how,
          Epilogue&& epilogue) {
  int threads = 1;
#if defined(_OPENMP)
  // Below ~4 MFLOP a slab is too small to pay for the team.
  if (double(M) * double(N) * double(K) >= 2e6 && !omp_in_parallel())
    threads = omp_get_max_threads();
#endif
  if (threads <= 1) {  // small (or no OpenMP): Eigen's own heuristics decide
    (void)how;
    gemm_block(c, N, a, b, M, N, K, add);
    epilogue(index(0), M, index(0), N);
    return;
  }
#if defined(_OPENMP)
  const bool split_cols = how == split::longer_side && N >= M;
  const index extent = split_cols ? N : M;
  constexpr index granule = 16;  // slab edges on whole AVX-512 packets
  const index per = ((extent + threads - 1) / threads + granule - 1) / granule * granule;
#pragma omp parallel num_threads(threads)
  {
    const index begin = index(omp_get_thread_num()) * per;
    const index n = std::min(per, extent - begin);
    if (n > 0) {
      if (split_cols) {  // columns [begin, begin+n) of C and of op(B)
        operand<S> part = b;
        part.data += b.transposed ? begin * b.stride : begin;
        gemm_block(c + begin, N, a, part, M, n, K, add);
        epilogue(index(0), M, begin, n);
      } else {  // rows [begin, begin+n) of C and of op(A)
        operand<S> part = a;
        part.data += a.transposed ? begin : begin * a.stride;
        gemm_block(c + begin * N, N, part, b, n, N, K, add);
        epilogue(begin, n, index(0), N);
      }
    }
  }
#endif
}

}  // namespace trainkit::linalg
