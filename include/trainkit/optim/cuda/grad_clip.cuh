// trainkit/optim/cuda/grad_clip.cuh — the kernels of the device clipping step
// (optim/device_grad_clip.hpp): the gradients' sum of squares, whole or per norm chunk, the sum of
// the chunks' partials, and the clipping factor.
//
// Two ways to the sum of squares, by what the ranks hold (comm/gradient_layout.hpp):
//  - whole (every rank holds all the summed gradients): one CUB TransformReduce of squares in
//    double (run-to-run deterministic on one GPU, CUB's documentation);
//  - per chunk (each rank holds a shard): one partial per norm chunk (comm/norm_chunks.hpp, the
//    grid the CPU norm and the ZeRO-1 cut use, so each chunk lies in exactly one rank's shard and
//    its partial does not depend on how many ranks there are), then, once the reducer has
//    combined the ranks' partials, their sum. Both kernels are one fixed tree in double: thread t
//    of a block adds its elements t, t + blockDim, ... in index order with explicitly rounded
//    operations (no FMA contraction), then the block's threads are added by
//    core/cuda/block_reduce.cuh (warp butterflies, then warps in index order). No atomics: the same
//    inputs give the same bits on every run, every rank and every world size. It is not CUB's
//    order, so the two ways can differ in the last bit.
// Then a one-thread kernel writes {‖g‖, factor} to device memory with grad_clip.hpp's
// clip_factor (the one rule, TRAINKIT_HOST_DEVICE), where the optimizer's update reads it.
// Not for users: optim/device_grad_clip.hpp is the interface.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>

#include <cstddef>

#include "trainkit/comm/norm_chunks.hpp"
#include "trainkit/core/cuda/block_reduce.cuh"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/optim/grad_clip.hpp"

namespace trainkit::optim::kernels {

using bf16_t = __nv_bfloat16;

// ---- the whole sum of squares (CUB) ----------------------------------------------------------

/// x ↦ x² in double (the transform of the norm's reduction).
struct square_bf16_to_double {
  __host__ __device__ double operator()(const bf16_t& x) const {
    const double d = double(__bfloat162float(x));
    return d * d;
  }
};

/// Bytes of temporary storage `sum_of_squares` needs for n elements.
inline std::size_t sum_of_squares_temp_bytes(std::size_t n) {
  std::size_t bytes = 0;
  TRAINKIT_CUDA_CHECK(cub::DeviceReduce::TransformReduce(
      nullptr, bytes, static_cast<const bf16_t*>(nullptr), static_cast<double*>(nullptr), n,
      ::cuda::std::plus<double>{}, square_bf16_to_double{}, 0.0, nullptr));
  return bytes;
}

/// *out = Σ g[i]² in double, on `s`.
inline void sum_of_squares(double* out, const bf16_t* g, std::size_t n, void* temp,
                           std::size_t temp_bytes, cudaStream_t s) {
  TRAINKIT_CUDA_CHECK(cub::DeviceReduce::TransformReduce(
      temp, temp_bytes, g, out, n, ::cuda::std::plus<double>{}, square_bf16_to_double{}, 0.0, s));
}

// ---- per norm chunk (fixed tree) -------------------------------------------------------------

/// Threads per block of both chunk kernels: a first guess, not measured (a chunk of 32768 bf16
/// is 128 elements per thread).
inline constexpr int norm_threads = 256;

/// partials[c] = Σ g[i]² over chunk c of [begin, end) (chunks of norm_chunk_elements from
/// `begin`, the last one possibly shorter), one block per chunk.
template <class = void>
__global__ void __launch_bounds__(norm_threads)
    chunk_sums_of_squares_kernel(double* partials, const bf16_t* g, std::size_t begin,
                                 std::size_t end) {
  __shared__ double scratch[cuda::warp_size];
  const std::size_t lo = begin + std::size_t(blockIdx.x) * comm::norm_chunk_elements;
  const std::size_t hi =
      lo + comm::norm_chunk_elements < end ? lo + comm::norm_chunk_elements : end;
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
  const std::size_t chunks = comm::norm_chunk_count(end - begin);
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

// ---- the clipping factor ---------------------------------------------------------------------

/// norm_and_scale[0] = ‖g‖ (float), [1] = clipping factor: optim::clip_factor, in double from the
/// double sum, exactly as the host step computes it.
template <class = void>
__global__ void clip_factor_kernel(float* norm_and_scale, const double* sum_sq, double max_norm) {
  const double norm = sqrt(*sum_sq);
  norm_and_scale[0] = float(norm);
  norm_and_scale[1] = float(optim::clip_factor(norm, max_norm));
}

inline void clip_factor(float* norm_and_scale, const double* sum_sq, double max_norm,
                        cudaStream_t s) {
  clip_factor_kernel<><<<1, 1, 0, s>>>(norm_and_scale, sum_sq, max_norm);
  TRAINKIT_CUDA_CHECK_LAUNCH("clip_factor_kernel");
}

}  // namespace trainkit::optim::kernels
