// trainkit/reduce/cuda/zero1_norm.cuh — the kernels of nccl_zero1's sharded gradient norm: one
// partial sum of squares per norm chunk of a rank's shard, and the sum of all ranks' partials.
//
// The grid is optim::norm_chunk_elements (the one the CPU norm and the ZeRO-1 shard cut use), so
// each chunk lies in exactly one rank's shard and its partial does not depend on how many ranks
// there are. Both kernels are one fixed tree in double: thread t of a block adds its elements
// t, t + blockDim, ... in index order with explicitly rounded operations (no FMA contraction),
// then the block's threads are added by core/cuda/block_reduce.cuh (warp butterflies, then warps
// in index order). No atomics: the same inputs give the same bits on every run, every rank and
// every world size. It is not the order CUB uses in adamw_cuda / device_grad_clip, so the norm is
// not the single-GPU norm bit for bit. Not for users: reduce/nccl_zero1.hpp is the interface.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "trainkit/core/cuda/block_reduce.cuh"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/optim/grad_clip.hpp"

namespace trainkit::reduce::kernels {

using bf16_t = __nv_bfloat16;

/// Threads per block of both kernels: a first guess, not measured (a chunk of 32768 bf16 is 128
/// elements per thread).
inline constexpr int norm_threads = 256;

/// partials[c] = Σ g[i]² over chunk c of [begin, end) (chunks of norm_chunk_elements from
/// `begin`, the last one possibly shorter), one block per chunk.
template <class = void>
__global__ void __launch_bounds__(norm_threads)
    chunk_sums_of_squares_kernel(double* partials, const bf16_t* g, std::size_t begin,
                                 std::size_t end) {
  __shared__ double scratch[cuda::warp_size];
  const std::size_t lo = begin + std::size_t(blockIdx.x) * optim::norm_chunk_elements;
  const std::size_t hi =
      lo + optim::norm_chunk_elements < end ? lo + optim::norm_chunk_elements : end;
  double s = 0.0;
  for (std::size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    const double x = double(__bfloat162float(g[i]));
    s = __dadd_rn(s, __dmul_rn(x, x));
  }
  s = cuda::block_sum(s, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

/// The partial sums of [begin, end) into partials[0, chunks), on `s`.
inline void chunk_sums_of_squares(double* partials, const bf16_t* g, std::size_t begin,
                                  std::size_t end, cudaStream_t s) {
  if (end <= begin) return;
  const std::size_t chunks =
      (end - begin + optim::norm_chunk_elements - 1) / optim::norm_chunk_elements;
  chunk_sums_of_squares_kernel<><<<unsigned(chunks), norm_threads, 0, s>>>(partials, g, begin, end);
  TRAINKIT_CUDA_CHECK_LAUNCH("chunk_sums_of_squares_kernel");
}

/// *out = Σ partials[0, n) in the fixed order above, one block.
template <class = void>
__global__ void __launch_bounds__(norm_threads)
    sum_partials_kernel(double* out, const double* partials, std::size_t n) {
  __shared__ double scratch[cuda::warp_size];
  double s = 0.0;
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) s = __dadd_rn(s, partials[i]);
  s = cuda::block_sum(s, scratch);
  if (threadIdx.x == 0) *out = s;
}

inline void sum_partials(double* out, const double* partials, std::size_t n, cudaStream_t s) {
  sum_partials_kernel<><<<1, norm_threads, 0, s>>>(out, partials, n);
  TRAINKIT_CUDA_CHECK_LAUNCH("sum_partials_kernel");
}

}  // namespace trainkit::reduce::kernels
