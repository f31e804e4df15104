// trainkit/core/cuda/block_reduce.cuh — warp and block sums and maxima in a fixed order.
//
// Every reduction runs in a fixed tree (warp shuffles, then warps in index order), so a kernel that
// uses them gives bit-identical results run after run; nothing here uses atomics.
#pragma once

#include <cuda_runtime.h>

namespace trainkit::cuda {

inline constexpr int warp_size = 32;
inline constexpr unsigned full_mask = 0xffffffffu;

__device__ inline float warp_sum(float v) {
  for (int o = warp_size / 2; o > 0; o /= 2) v += __shfl_xor_sync(full_mask, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = warp_size / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(full_mask, v, o));
  return v;
}

/// Sum over the block, every thread gets the result. `scratch` holds ≥ 32 floats of shared
/// memory; blockDim.x is a multiple of 32. Warps are summed in index order: deterministic.
__device__ inline float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % warp_size, warp = threadIdx.x / warp_size;
  const int warps = blockDim.x / warp_size;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}

/// The same in double (norms summed in double: optim, reduce/nccl_zero1.hpp); `scratch` holds
/// ≥ 32 doubles.
__device__ inline double warp_sum(double v) {
  for (int o = warp_size / 2; o > 0; o /= 2) v += __shfl_xor_sync(full_mask, v, o);
  return v;
}
__device__ inline double block_sum(double v, double* scratch) {
  const int lane = threadIdx.x % warp_size, warp = threadIdx.x / warp_size;
  const int warps = blockDim.x / warp_size;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}

__device__ inline float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % warp_size, warp = threadIdx.x / warp_size;
  const int warps = blockDim.x / warp_size;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = -INFINITY;
  for (int w = 0; w < warps; ++w) m = fmaxf(m, scratch[w]);
  return m;
}

}  // namespace trainkit::cuda
