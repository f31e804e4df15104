// trainkit/optim/device_grad_clip.hpp — the clipping step for bf16 models in device memory whose
// gradients are whole on every rank (reduce::single, reduce::nccl_allreduce; the threshold is the
// trainer's): global norm over the gradient buckets and the clipping factor, without a host round
// trip. Also the device half of optim::clip_then_update (grad_clip.hpp).
//
// Two launches on the execution context's stream: CUB's sum of squares in double over the
// gradients the buckets cover, and a one-thread kernel writing {‖g‖, factor} to device memory
// (grad_clip.hpp's clip_factor rule), which the optimizer's update reads as its gradient scale.
// The norm is copied to pinned host memory on the same stream; `norm()` reads it after the trainer
// has synchronised the context. The buckets must cover one contiguous range of the buffer (GPT-2's
// tile all of it); a shard of a sharded optimizer is one such range. Buffers are allocated on the
// first call (cudaMalloc synchronises the device: once, before the first step's update).
// Needs nvcc (CUB); link trainkit::cuda.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "trainkit/core/bf16.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/execution_context.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/optim/clip_scale.hpp"
#include "trainkit/optim/cuda/adamw.cuh"
#include "trainkit/optim/grad_clip.hpp"

namespace trainkit::optim {

class device_grad_clip {
 public:
  clip_scale<device_memory> operator()(std::span<const trainkit::bf16> grads,
                                       std::span<const model::gradient_bucket> buckets,
                                       double max_norm, cuda::execution_context& ctx) {
    const model::gradient_range r = covered_range(grads.size(), buckets);
    const cudaStream_t s = ctx.stream();
    if (temp_bytes_ < kernels::sum_of_squares_temp_bytes(r.count) || !sum_sq_.size()) {
      temp_bytes_ = std::max<std::size_t>(kernels::sum_of_squares_temp_bytes(r.count), 1);
      temp_ = cuda::device_buffer<std::byte>(temp_bytes_);
      sum_sq_ = cuda::device_buffer<double>(1);
      norm_and_factor_ = cuda::device_buffer<float>(2);
      host_norm_ = cuda::pinned_buffer<float>(2);
    }
    const auto* g = reinterpret_cast<const kernels::bf16_t*>(grads.data()) + r.offset;
    kernels::sum_of_squares(sum_sq_.data(), g, r.count, temp_.data(), temp_bytes_, s);
    kernels::clip_factor(norm_and_factor_.data(), sum_sq_.data(), max_norm, s);
    TRAINKIT_CUDA_CHECK(cudaMemcpyAsync(host_norm_.data(), norm_and_factor_.data(),
                                        2 * sizeof(float), cudaMemcpyDeviceToHost, s));
    return {norm_and_factor_.data()};
  }

  /// The norm before clipping of the last call: valid once its context has been synchronised.
  double norm() const noexcept { return host_norm_.size() ? double(host_norm_[0]) : 0.0; }

 private:
  static model::gradient_range covered_range(std::size_t n,
                                             std::span<const model::gradient_bucket> buckets) {
    std::vector<model::gradient_range> all;
    for (const model::gradient_bucket& b : buckets)
      all.insert(all.end(), b.ranges.begin(), b.ranges.end());
    std::sort(all.begin(), all.end(),
              [](const auto& a, const auto& b) { return a.offset < b.offset; });
    if (all.empty()) return {0, 0};
    std::size_t end = all.front().offset;
    for (const model::gradient_range& r : all) {
      if (r.offset != end)
        throw config_error("device_grad_clip: the gradient buckets leave a gap at element " +
                           std::to_string(end) + "; they must cover one contiguous range");
      end = r.offset + r.count;
    }
    if (end > n)
      throw config_error("device_grad_clip: the gradient buckets end at element " +
                         std::to_string(end) + ", past the " + std::to_string(n) + " gradients");
    return {all.front().offset, end - all.front().offset};
  }

  cuda::device_buffer<std::byte> temp_;  // CUB temporary storage
  std::size_t temp_bytes_ = 0;
  cuda::device_buffer<double> sum_sq_;          // (1,) Σ g²
  cuda::device_buffer<float> norm_and_factor_;  // (2,) ‖g‖, clipping factor
  cuda::pinned_buffer<float> host_norm_;        // (2,)
};

template <>
struct grad_clip_of<device_memory> {
  using type = device_grad_clip;
};

}  // namespace trainkit::optim
