// trainkit/optim/adamw_cuda.hpp — AdamW for models in device memory with bf16 parameters
// (gpt2_cuda): fp32 master weights and moments, one fused update kernel.
//
// The math is adamw_cpu's (same `adamw_config`, decoupled weight decay only on tensors whose role
// is in adamw_config::decay_roles, the same decay_segments, bias correction with t = steps taken).
// What differs is where numbers live: the model's bf16 parameters are only a rounded copy of fp32
// master weights kept here (initialised from the model's parameters at construction), so updates
// far below a bf16 ulp accumulate instead of vanishing; after each update the master weights are
// rounded back into the model (to nearest even; stochastic rounding is an option, off by default
// because it makes runs depend on the seed).
//
// In the trainer, `update` is one launch on the execution context's stream: the fused update,
// reading the clipping factor the trainer's clipping step (device_grad_clip.hpp, at the trainer's
// threshold) left in device memory — no host synchronisation; the optimizer knows no threshold and
// no norm. Callers without a trainer clip and update with optim::clip_then_update<device_memory>
// (grad_clip.hpp; its device step comes with this header). Kernels: optim/cuda/adamw.cuh. Needs
// nvcc; link trainkit::cuda.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "trainkit/comm/gradient_layout.hpp"
#include "trainkit/core/bf16.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/execution_context.hpp"
#include "trainkit/core/cuda/stream.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/model/concepts.hpp"
#include "trainkit/optim/adamw_config.hpp"
#include "trainkit/optim/clip_scale.hpp"
#include "trainkit/optim/cuda/adamw.cuh"
#include "trainkit/optim/decay_segments.hpp"
#include "trainkit/optim/device_grad_clip.hpp"

namespace trainkit::optim {

/// Settings of adamw_cuda that adamw_cpu does not have (adamw_config stays shared).
struct adamw_cuda_options {
  bool stochastic_rounding = false;  // bf16 write-back: stochastic instead of nearest-even
  std::uint64_t seed = 0;            // stochastic rounding's hash seed

  friend bool operator==(const adamw_cuda_options&, const adamw_cuda_options&) = default;
};

/// What a trainer passes to adamw_cuda's constructor: the shared AdamW settings and the CUDA
/// options, so a caller sets stochastic rounding through the trainer's optimizer config. Converts
/// from a plain adamw_config (options at their defaults).
struct adamw_cuda_config {
  adamw_config adamw{};
  adamw_cuda_options options{};

  adamw_cuda_config() = default;
  adamw_cuda_config(adamw_config a, adamw_cuda_options o = {}) : adamw(a), options(o) {}
  friend bool operator==(const adamw_cuda_config&, const adamw_cuda_config&) = default;
};

/// A device-memory model with bf16 parameters, which adamw_cuda can update.
template <class M>
concept bf16_device_model =
    model::parameter_holder<M> && std::same_as<typename M::memory_space, device_memory> &&
    std::same_as<typename M::parameter_type, trainkit::bf16>;

namespace detail {

/// The update kernel's segment table for a buffer of `n` elements described by `layout`:
/// decay_segments (adamw_cpu's ranges), each cut into kernels::update_chunk-element chunks
/// numbered consecutively. Throws config_error, prefixed by `who`, for a layout the kernel cannot
/// take. Shared by adamw_cuda (the whole buffer) and zero1_adamw_cuda (the layout clipped to a
/// shard).
inline kernels::segment_table adamw_segment_table(std::span<const tensor_info> layout,
                                                  std::size_t n, const adamw_config& config,
                                                  const std::string& who) {
  const std::vector<decay_segment> ranges = decay_segments(layout, n, config.decay_roles, who);
  if (ranges.size() > std::size_t(kernels::max_segments))
    throw config_error(who + ": the parameter layout splits into " + std::to_string(ranges.size()) +
                       " segments; the update kernel takes at most " +
                       std::to_string(kernels::max_segments));
  kernels::segment_table table{};
  std::uint64_t chunks = 0;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const decay_segment& r = ranges[i];
    table.seg[i] = {r.begin, r.end, std::uint32_t(chunks), r.decay ? config.weight_decay : 0.0f};
    chunks += (r.end - r.begin + kernels::update_chunk - 1) / kernels::update_chunk;
  }
  if (chunks > 0x7fffffffull)
    throw config_error(who + ": " + std::to_string(n) +
                       " parameters need more blocks than one launch allows");
  table.count = int(ranges.size());
  table.total_chunks = std::uint32_t(chunks);
  return table;
}

/// The host-computed constants of update number `step` (1 for the first): adamw_cpu's bias
/// corrections in double, rounded to float as it does.
inline kernels::update_constants adamw_step_constants(const adamw_config& config,
                                                      const adamw_cuda_options& options,
                                                      std::uint64_t step) {
  const double t = static_cast<double>(step);
  kernels::update_constants k;
  k.lr = 0.0f;  // the caller's
  k.beta1 = config.beta1;
  k.one_minus_beta1 = 1.0f - config.beta1;
  k.beta2 = config.beta2;
  k.one_minus_beta2 = 1.0f - config.beta2;
  k.bias1 = static_cast<float>(1.0 - std::pow(double(config.beta1), t));
  k.bias2 = static_cast<float>(1.0 - std::pow(double(config.beta2), t));
  k.eps = config.eps;
  k.stochastic_rounding = options.stochastic_rounding;
  k.seed = options.seed;
  k.step = step;
  return k;
}

}  // namespace detail

class adamw_cuda {
  using bf16_t = kernels::bf16_t;

 public:
  using memory_space = device_memory;
  using parameter_type = trainkit::bf16;
  using config_type = adamw_cuda_config;
  static constexpr gradient_layout expected_gradients = gradient_layout::replicated;

  /// fp32 master weights from the model's bf16 parameters, zeroed moments, the decay segments of
  /// its layout. Throws config_error (bad config, a layout that leaves the buffer or needs more
  /// than kernels::max_segments segments) or cuda_error.
  template <bf16_device_model M>
  adamw_cuda(const M& model, adamw_cuda_config config)
      : adamw_cuda(model, config.adamw, config.options) {}

  template <bf16_device_model M>
  adamw_cuda(const M& model, adamw_config config, adamw_cuda_options options = {})
      : config_(config),
        options_(options),
        layout_(model.parameter_layout().begin(), model.parameter_layout().end()),
        n_(static_cast<std::size_t>(model.num_parameters())) {
    config_.validate();
    table_ = detail::adamw_segment_table(layout_, n_, config_, "adamw_cuda");
    master_ = cuda::device_buffer<float>(n_);
    m_ = cuda::device_buffer<float>(n_);
    v_ = cuda::device_buffer<float>(n_);
    m_.fill_bytes_async(0, stream_);
    v_.fill_bytes_async(0, stream_);
    // parameters() is not const in the Model concept; it is only read here.
    load_master(const_cast<M&>(model).parameters());
  }

  adamw_cuda(adamw_cuda&&) noexcept = default;
  adamw_cuda& operator=(adamw_cuda&&) noexcept = default;
  adamw_cuda(const adamw_cuda&) = delete;
  adamw_cuda& operator=(const adamw_cuda&) = delete;

  /// One update, enqueued on the context's stream after the clipping step that wrote
  /// `clip.norm_and_factor` there; no host synchronisation.
  template <bf16_device_model M>
  void update(M& model, float lr, const clip_scale<device_memory>& clip,
              cuda::execution_context& ctx) {
    check_sizes(model);
    if (!clip.norm_and_factor) throw config_error("adamw_cuda::update: no clipping factor given");
    launch_update(model, lr, clip.norm_and_factor, ctx.stream());
  }

  /// Updates applied so far (t in the bias correction); restored with `state()`.
  std::uint64_t steps_taken() const noexcept { return step_; }

  /// "optim.master" (fp32 master weights), "optim.m", "optim.v" — shape {N}, device memory
  /// (on_device = true) — and "optim.step" (u64 {1}, host). Views of this optimizer's storage.
  std::vector<state_tensor> state() {
    const auto n = static_cast<std::int64_t>(n_);
    std::vector<state_tensor> out;
    auto device_tensor = [n](const char* name, cuda::device_buffer<float>& buf) {
      state_tensor t = make_state_tensor(name, buf.device_span(), {n});
      t.on_device = true;
      return t;
    };
    out.push_back(device_tensor("optim.master", master_));
    out.push_back(device_tensor("optim.m", m_));
    out.push_back(device_tensor("optim.v", v_));
    out.push_back(make_state_tensor("optim.step", std::span<std::uint64_t>(&step_, 1), {1}));
    return out;
  }

  /// Re-reads the master weights from the model's bf16 parameters (after replacing them, e.g.
  /// copy_parameters_from_host). Moments and step count are kept.
  template <bf16_device_model M>
  void reload_master(M& model) {
    load_master(model.parameters());
  }

  /// The fp32 master weights, copied to the host (tests, exports at full precision).
  std::vector<float> master_to_host() const {
    std::vector<float> out(n_);
    cuda::copy_to_host(std::span<float>(out), master_.data(), stream_.get());
    return out;
  }

  const adamw_config& config() const noexcept { return config_; }
  const adamw_cuda_options& options() const noexcept { return options_; }
  std::span<const tensor_info> parameter_layout() const noexcept { return layout_; }
  /// The stream the optimizer's kernels run on.
  cudaStream_t stream() const noexcept { return stream_.get(); }

 private:
  template <class M>
  void check_sizes(M& model) const {
    if (model.parameters().size() != n_ || model.gradients().size() != n_)
      throw config_error("adamw_cuda: model has " + std::to_string(model.parameters().size()) +
                         " parameters and " + std::to_string(model.gradients().size()) +
                         " gradients but the optimizer was built for " + std::to_string(n_));
  }

  template <class M>
  void launch_update(M& model, float lr, const float* norm_and_factor, cudaStream_t s) {
    ++step_;
    kernels::update_constants k = detail::adamw_step_constants(config_, options_, step_);
    k.lr = lr;
    kernels::adamw_update(as_device(model.parameters().data()), master_.data(), m_.data(),
                          v_.data(), as_device(model.gradients().data()), norm_and_factor, table_,
                          k, s);
  }

  static const bf16_t* as_device(const trainkit::bf16* p) noexcept {
    return reinterpret_cast<const bf16_t*>(p);
  }
  static bf16_t* as_device(trainkit::bf16* p) noexcept { return reinterpret_cast<bf16_t*>(p); }

  void load_master(std::span<trainkit::bf16> params) {
    if (params.size() != n_)
      throw config_error("adamw_cuda: model has " + std::to_string(params.size()) +
                         " parameters, the optimizer was built for " + std::to_string(n_));
    kernels::bf16_to_float(master_.data(), as_device(params.data()), n_, stream_.get());
    stream_.synchronize();
  }

  adamw_config config_;
  adamw_cuda_options options_;
  std::vector<tensor_info> layout_;
  std::size_t n_ = 0;
  kernels::segment_table table_{};
  cuda::stream stream_{true};
  cuda::device_buffer<float> master_;  // (N,) fp32 master weights
  cuda::device_buffer<float> m_;       // (N,) first moment
  cuda::device_buffer<float> v_;       // (N,) second moment
  std::uint64_t step_ = 0;
};

}  // namespace trainkit::optim
