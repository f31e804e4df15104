// trainkit/optim/device_grad_clip.hpp — the clipping step for bf16 models in device memory:
// global norm over the gradient buckets and the clipping factor, without a host round trip. The
// trainer runs it after the reducer's finish(), at its threshold (trainer_config::grad_clip); it is
// also the device half of optim::clip_then_update (grad_clip.hpp).
//
// The reducer states facts, the step does the maths (optim/grad_clip.hpp says who owns what).
// The reducer's layout (comm/gradient_layout.hpp, the same on every rank) picks the way:
//  - replicated (reduce::single, nccl_allreduce; and one process without a reducer): every rank
//    holds the summed gradients, so one CUB sum of squares over the buckets (they must cover one
//    contiguous range: GPT-2's and Llama's tile the buffer);
//  - reduce_scattered (nccl_zero1): an array of one double per norm chunk of the buckets' range,
//    zeroed, this rank's slots written from its `owned_gradients()` (one range on the chunk
//    grid), the reducer's `combine_norm_partials` making every rank's array the whole one (an
//    all-reduce: each slot has one non-zero addend), then their fixed-order sum.
// Then a one-thread kernel writes {‖g‖, factor} to device memory (grad_clip.hpp's clip_factor,
// the one rule), which the optimizer's update reads as its gradient scale. The norm is copied to
// pinned host memory on the same stream; `norm()` reads it after the trainer has synchronised the
// context. Buffers are allocated on the first call (cudaMalloc synchronises the device: once,
// before the first step's update). Needs nvcc (CUB); link trainkit::cuda.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "trainkit/comm/gradient_layout.hpp"
#include "trainkit/comm/norm_chunks.hpp"
#include "trainkit/core/bf16.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/execution_context.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/optim/clip_scale.hpp"
#include "trainkit/optim/cuda/grad_clip.cuh"
#include "trainkit/optim/grad_clip.hpp"

namespace trainkit::optim {

class device_grad_clip {
 public:
  /// The trainer's call: the reducer says which gradients this rank holds summed and combines
  /// the ranks' partial sums (reduce/concepts.hpp).
  template <class Reducer>
  clip_scale<device_memory> operator()(std::span<const trainkit::bf16> grads,
                                       std::span<const model::gradient_bucket> buckets,
                                       Reducer& reducer, double max_norm,
                                       cuda::execution_context& ctx) {
    const model::gradient_range all = covered_range(grads.size(), buckets);
    if constexpr (Reducer::delivered_gradients == gradient_layout::replicated) {
      if (!covers(reducer.owned_gradients(), all))
        throw config_error(
            "device_grad_clip: a reducer that delivers replicated gradients owns only part of "
            "the buckets (was it attached?)");
      whole_sum(grads, all, ctx);
      reducer.combine_norm_partials(std::span<double>(sum_sq_.data(), 1), ctx);
    } else {
      chunk_sums(grads, all, owned_range(reducer.owned_gradients(), all), ctx);
      reducer.combine_norm_partials(std::span<double>(partials_.data(), chunks_), ctx);
      kernels::sum_partials(sum_sq_.data(), partials_.data(), chunks_, ctx.stream());
    }
    return factor(max_norm, ctx);
  }

  /// One process: every bucket is this rank's, nothing to combine.
  clip_scale<device_memory> operator()(std::span<const trainkit::bf16> grads,
                                       std::span<const model::gradient_bucket> buckets,
                                       double max_norm, cuda::execution_context& ctx) {
    whole_sum(grads, covered_range(grads.size(), buckets), ctx);
    return factor(max_norm, ctx);
  }

  /// The norm before clipping of the last call: valid once its context has been synchronised.
  double norm() const noexcept { return host_norm_.size() ? double(host_norm_[0]) : 0.0; }

  /// Device bytes of the step's buffers (the per-chunk partials on a sharded layout).
  std::size_t buffer_bytes() const noexcept {
    return temp_.bytes() + sum_sq_.bytes() + norm_and_factor_.bytes() + partials_.bytes();
  }

 private:
  // sum_sq_ = Σ g² over `r` (CUB).
  void whole_sum(std::span<const trainkit::bf16> grads, model::gradient_range r,
                 cuda::execution_context& ctx) {
    allocate();
    const std::size_t need = std::max<std::size_t>(kernels::sum_of_squares_temp_bytes(r.count), 1);
    if (temp_bytes_ < need) {
      temp_bytes_ = need;
      temp_ = cuda::device_buffer<std::byte>(temp_bytes_);
    }
    const auto* g = reinterpret_cast<const kernels::bf16_t*>(grads.data()) + r.offset;
    kernels::sum_of_squares(sum_sq_.data(), g, r.count, temp_.data(), temp_bytes_, ctx.stream());
  }

  // partials_[c] = Σ g² over chunk c of `all` where `mine` holds it, 0 elsewhere.
  void chunk_sums(std::span<const trainkit::bf16> grads, model::gradient_range all,
                  model::gradient_range mine, cuda::execution_context& ctx) {
    allocate();
    const std::size_t chunks = comm::norm_chunk_count(all.count);
    if (partials_.size() < std::max<std::size_t>(chunks, 1))
      partials_ = cuda::device_buffer<double>(std::max<std::size_t>(chunks, 1));
    chunks_ = chunks;
    partials_.fill_bytes_async(0, ctx.stream());
    const auto* g = reinterpret_cast<const kernels::bf16_t*>(grads.data());
    const std::size_t first = (mine.offset - all.offset) / comm::norm_chunk_elements;
    kernels::chunk_sums_of_squares(partials_.data() + first, g, mine.offset,
                                   mine.offset + mine.count, ctx.stream());
  }

  clip_scale<device_memory> factor(double max_norm, cuda::execution_context& ctx) {
    const cudaStream_t s = ctx.stream();
    kernels::clip_factor(norm_and_factor_.data(), sum_sq_.data(), max_norm, s);
    TRAINKIT_CUDA_CHECK(cudaMemcpyAsync(host_norm_.data(), norm_and_factor_.data(),
                                        2 * sizeof(float), cudaMemcpyDeviceToHost, s));
    return {norm_and_factor_.data()};
  }

  void allocate() {
    if (sum_sq_.size()) return;
    sum_sq_ = cuda::device_buffer<double>(1);
    norm_and_factor_ = cuda::device_buffer<float>(2);
    host_norm_ = cuda::pinned_buffer<float>(2);
    host_norm_[0] = host_norm_[1] = 0.0f;
  }

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

  // Whether the ranges of `owned` together hold every element of `all`.
  static bool covers(std::span<const model::gradient_range> owned, model::gradient_range all) {
    std::vector<model::gradient_range> sorted(owned.begin(), owned.end());
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& a, const auto& b) { return a.offset < b.offset; });
    std::size_t reached = all.offset;  // every element before it is owned
    for (const model::gradient_range& r : sorted)
      if (r.offset <= reached) reached = std::max(reached, r.offset + r.count);
    return reached >= all.offset + all.count;
  }

  // The one range of `owned` (empty ranges aside) inside `all`, its ends on the chunk grid of
  // `all` (or at its end); an empty range when this rank owns nothing.
  static model::gradient_range owned_range(std::span<const model::gradient_range> owned,
                                           model::gradient_range all) {
    model::gradient_range mine{all.offset, 0};
    for (const model::gradient_range& r : owned) {
      if (r.count == 0) continue;
      if (mine.count != 0)
        throw config_error("device_grad_clip: a sharded reducer must own one gradient range");
      mine = r;
    }
    const std::size_t end = mine.offset + mine.count, all_end = all.offset + all.count;
    const auto on_grid = [&](std::size_t x) {
      return (x - all.offset) % comm::norm_chunk_elements == 0 || x == all_end;
    };
    if (mine.count != 0 &&
        (mine.offset < all.offset || end > all_end || !on_grid(mine.offset) || !on_grid(end)))
      throw config_error("device_grad_clip: the owned gradient range [" +
                         std::to_string(mine.offset) + ", " + std::to_string(end) +
                         ") is not on the norm chunk grid of the buckets' range");
    return mine;
  }

  cuda::device_buffer<std::byte> temp_;  // CUB temporary storage
  std::size_t temp_bytes_ = 0;
  cuda::device_buffer<double> partials_;        // (chunks,) per norm chunk, sharded layout
  std::size_t chunks_ = 0;                      // chunks of the buckets' range
  cuda::device_buffer<double> sum_sq_;          // (1,) Σ g²
  cuda::device_buffer<float> norm_and_factor_;  // (2,) ‖g‖, clipping factor
  cuda::pinned_buffer<float> host_norm_;        // (2,)
};

template <>
struct grad_clip_of<device_memory> {
  using type = device_grad_clip;
};

}  // namespace trainkit::optim
