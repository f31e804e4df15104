// trainkit/model/cuda/loss_sum.cuh — the step's loss, accumulated on the device.
//
// The classifier leaves one loss per row (B·T floats). Instead of copying them to the host after
// every micro-step (a synchronisation per micro-step), one block adds their mean to a device
// double that the model reads once per optimizer step. One block, rows strided over its threads
// in a fixed order and a fixed shared-memory tree: the sum is the same bit for bit on every run,
// whatever the stream's other work. A template so that several translation units may include it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "trainkit/core/cuda/check.hpp"

namespace trainkit::model::kernels {

inline constexpr int loss_sum_threads = 512;

/// acc[0] = (restart ? 0 : acc[0]) + mean(losses[0..n)); the mean is taken in double.
template <int Threads = loss_sum_threads>
__global__ void __launch_bounds__(Threads)
    accumulate_mean_loss_kernel(double* acc, const float* losses, int n, bool restart) {
  __shared__ double partial[Threads];
  double s = 0.0;
  for (int i = int(threadIdx.x); i < n; i += Threads) s += double(losses[i]);
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int stride = Threads / 2; stride > 0; stride /= 2) {
    if (int(threadIdx.x) < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) acc[0] = (restart ? 0.0 : acc[0]) + partial[0] / double(n);
}

/// Enqueues the accumulation on `s`: no host synchronisation.
inline void accumulate_mean_loss(double* acc, const float* losses, int n, bool restart,
                                 cudaStream_t s) {
  static_assert((loss_sum_threads & (loss_sum_threads - 1)) == 0, "a power of two for the tree");
  accumulate_mean_loss_kernel<loss_sum_threads>
      <<<1, loss_sum_threads, 0, s>>>(acc, losses, n, restart);
  TRAINKIT_CUDA_CHECK_LAUNCH("accumulate_mean_loss_kernel");
}

}  // namespace trainkit::model::kernels
