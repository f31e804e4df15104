// trainkit/comm/nccl_scalars.hpp — the rank-aware hooks (reduce/concepts.hpp) of the
// NCCL reducers: element-wise sums, rank-order means and the stop consensus over a few doubles.
//
// Shared by nccl_allreduce and nccl_zero1. Each call copies its values to device scratch, runs one
// small NCCL collective on the reducer's communication stream and waits for it on the host: the
// trainer calls them a few times per step, after the step's one synchronisation (the loss, the
// validation loss, whether to stop) and inside sharded checkpoint saves.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "trainkit/comm/nccl_check.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"

namespace trainkit::comm {

class nccl_scalars {
 public:
  /// Element-wise sum over ranks, in place (every rank gets the same bits: NCCL reduces each
  /// element once and broadcasts it). Collective; waits on the host.
  void sum(ncclComm_t comm, cudaStream_t s, std::span<double> values) {
    if (values.empty()) return;
    double* d = scratch(values.size());
    TRAINKIT_CUDA_CHECK(
        cudaMemcpyAsync(d, values.data(), values.size_bytes(), cudaMemcpyHostToDevice, s));
    nccl_check(ncclAllReduce(d, d, values.size(), ncclFloat64, ncclSum, comm, s),
               "ncclAllReduce (sum)", comm);
    TRAINKIT_CUDA_CHECK(
        cudaMemcpyAsync(values.data(), d, values.size_bytes(), cudaMemcpyDeviceToHost, s));
    TRAINKIT_CUDA_CHECK(cudaStreamSynchronize(s));
  }

  /// The mean of x over the `ranks` ranks: gathered, summed in rank order, divided by the number
  /// of ranks, the same bits on every rank. Collective; waits on the host.
  double average(ncclComm_t comm, cudaStream_t s, int ranks, double x) {
    const std::size_t n = std::size_t(ranks);
    double* d = scratch(n + 1);
    TRAINKIT_CUDA_CHECK(cudaMemcpyAsync(d + n, &x, sizeof x, cudaMemcpyHostToDevice, s));
    nccl_check(ncclAllGather(d + n, d, 1, ncclFloat64, comm, s), "ncclAllGather", comm);
    std::vector<double> all(n);
    TRAINKIT_CUDA_CHECK(
        cudaMemcpyAsync(all.data(), d, n * sizeof(double), cudaMemcpyDeviceToHost, s));
    TRAINKIT_CUDA_CHECK(cudaStreamSynchronize(s));
    double sum = 0;
    for (double v : all) sum += v;
    return sum / double(n);
  }

  /// True on every rank when it is true on one. Collective; waits on the host.
  bool any(ncclComm_t comm, cudaStream_t s, bool flag) {
    double v = flag ? 1.0 : 0.0;
    sum(comm, s, std::span<double>(&v, 1));
    return v != 0.0;
  }

 private:
  /// Device scratch, at least n doubles.
  double* scratch(std::size_t n) {
    if (scratch_.size() < n) scratch_ = cuda::device_buffer<double>(std::max<std::size_t>(n, 16));
    return scratch_.data();
  }

  cuda::device_buffer<double> scratch_;
};

}  // namespace trainkit::comm
