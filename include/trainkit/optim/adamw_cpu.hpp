// trainkit/optim/adamw_cpu.hpp — AdamW for models in host memory.
//
// The update is the one llm.c's `adamw_update` and PyTorch's AdamW compute: first and second
// moments with bias correction and *decoupled* weight decay (Loshchilov & Hutter 2019), applied
// only to tensors whose role is in `adamw_config::decay_roles`; by default (llm.c's rule) the
// matrices and both embeddings, wte and wpe, decay and biases and LayerNorm parameters do not. The
// clipping step (the trainer's, at its threshold; optim/grad_clip.hpp) hands `update`
// the clipping factor, which is folded into the same pass as a scale on the gradient, so gradients
// are read once and never modified; the optimizer knows no threshold and no norm. The
// update is elementwise, so its OpenMP split cannot change results. Moments, update and state
// layout follow llm.c, so checkpoints of the CPU and CUDA optimizers hold the same tensors.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "trainkit/comm/gradient_layout.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/execution_context.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/model/concepts.hpp"
#include "trainkit/optim/adamw_config.hpp"
#include "trainkit/optim/clip_scale.hpp"
#include "trainkit/optim/decay_segments.hpp"

namespace trainkit::optim {

/// AdamW over a host-memory model whose parameters are `Scalar`. Moments are kept in `Scalar`
/// (float for the fp32 CPU reference, as llm.c keeps them).
template <class Scalar>
class basic_adamw_cpu {
  static_assert(std::floating_point<Scalar>, "basic_adamw_cpu computes in Scalar: float or double");

 public:
  using memory_space = host_memory;
  using parameter_type = Scalar;
  using config_type = adamw_config;
  static constexpr gradient_layout expected_gradients = gradient_layout::replicated;

  /// Allocates zeroed moments for `model.num_parameters()` elements and records which ranges get
  /// weight decay. Throws config_error for a bad config or a layout that leaves the buffer.
  template <model::parameter_holder M>
  requires std::same_as<typename M::memory_space, host_memory> basic_adamw_cpu(const M& model,
                                                                               adamw_config config)
      : config_(config),
        layout_(model.parameter_layout().begin(), model.parameter_layout().end()),
        m_(static_cast<std::size_t>(model.num_parameters()), Scalar(0)),
        v_(m_.size(), Scalar(0)) {
    config_.validate();
    segments_ = decay_segments(layout_, m_.size(), config_.decay_roles, "adamw_cpu");
  }

  /// One AdamW update at learning rate `lr` from the model's gradients times `clip.factor`.
  template <model::parameter_holder M>
  requires std::same_as<typename M::memory_space, host_memory> &&
      std::same_as<typename M::parameter_type, Scalar>
  void update(M& model, float lr, const clip_scale<host_memory>& clip, host_context&) {
    check_sizes(model);
    const std::span<Scalar> params = model.parameters();
    const std::span<Scalar> grads = model.gradients();
    const Scalar grad_scale = static_cast<Scalar>(clip.factor);

    ++step_;
    const double t = static_cast<double>(step_);
    const Scalar beta1 = config_.beta1;
    const Scalar beta2 = config_.beta2;
    const Scalar eps = config_.eps;
    const Scalar bias1 = static_cast<Scalar>(1.0 - std::pow(double(config_.beta1), t));
    const Scalar bias2 = static_cast<Scalar>(1.0 - std::pow(double(config_.beta2), t));
    const Scalar rate = lr;

    const update_constants k{
        grad_scale, beta1, Scalar(1) - beta1, beta2, Scalar(1) - beta2, bias1, bias2, eps, rate};
    Scalar* p = params.data();
    const Scalar* g = grads.data();
    Scalar* m = m_.data();
    Scalar* v = v_.data();
#pragma omp parallel
    {
      for (const decay_segment& s : segments_) {
        const Scalar decay = s.decay ? static_cast<Scalar>(config_.weight_decay) : Scalar(0);
        const auto blocks = std::ptrdiff_t((s.end - s.begin + update_block - 1) / update_block);
        // Segments are disjoint, so a thread may move on without waiting for the others.
#pragma omp for schedule(static) nowait
        for (std::ptrdiff_t b = 0; b < blocks; ++b) {
          const std::size_t begin = s.begin + std::size_t(b) * update_block;
          const std::size_t count = std::min(update_block, s.end - begin);
          update_range(k, decay, p + begin, g + begin, m + begin, v + begin, count);
        }
      }
    }
  }

  /// Updates applied so far (t in the bias correction); restored with `state()`.
  std::uint64_t steps_taken() const noexcept {
    return step_;
  }

  /// "optim.m", "optim.v" (shape {N}) and "optim.step" (u64 {1}), viewing this optimizer's own
  /// storage: a checkpointer reads them to save and writes them to restore.
  std::vector<state_tensor> state() {
    const auto n = static_cast<std::int64_t>(m_.size());
    std::vector<state_tensor> out;
    out.push_back(make_state_tensor("optim.m", std::span<Scalar>(m_), {n}));
    out.push_back(make_state_tensor("optim.v", std::span<Scalar>(v_), {n}));
    out.push_back(make_state_tensor("optim.step", std::span<std::uint64_t>(&step_, 1), {1}));
    return out;
  }

  const adamw_config& config() const noexcept {
    return config_;
  }

  /// Bytes of optimizer state (both moments): what ZeRO-1 divides by the ranks.
  std::size_t state_bytes() const noexcept {
    return (m_.size() + v_.size()) * sizeof(Scalar);
  }

  /// The parameter layout copied from the model at construction.
  std::span<const tensor_info> parameter_layout() const noexcept {
    return layout_;
  }

 private:
  template <class M>
  void check_sizes(M& model) const {
    if (model.parameters().size() != m_.size() || model.gradients().size() != m_.size())
      throw config_error("adamw_cpu: model has " + std::to_string(model.parameters().size()) +
                         " parameters and " + std::to_string(model.gradients().size()) +
                         " gradients but the optimizer was built for " + std::to_string(m_.size()));
  }

  // Elements per work item: the three array statements of `update_range` then run over data
  // still in L1/L2 (4 arrays × 2048 floats = 32 KiB), so memory traffic is that of one pass.
  static constexpr std::size_t update_block = 2048;

  struct update_constants {
    Scalar grad_scale, beta1, one_minus_beta1, beta2, one_minus_beta2, bias1, bias2, eps, rate;
  };

  // The AdamW formulas over `count` elements, written with Eigen arrays because Eigen vectorises
  // the square root: std::sqrt stays scalar under GCC's default -fmath-errno, which made the
  // update 3x slower than the memory traffic it needs. Every operation is elementwise and
  // IEEE-exact (no reassociation), so the result does not depend on how elements are split.
  static void update_range(const update_constants& k, Scalar decay, Scalar* p, const Scalar* g,
                           Scalar* m, Scalar* v, std::size_t count) {
    using array = Eigen::Array<Scalar, Eigen::Dynamic, 1>;
    const auto n = Eigen::Index(count);
    Eigen::Map<array> P(p, n), M(m, n), V(v, n);  // (count,)
    const Eigen::Map<const array> G(g, n);        // (count,)
    const auto grad = G * k.grad_scale;
    M = k.beta1 * M + k.one_minus_beta1 * grad;
    V = k.beta2 * V + k.one_minus_beta2 * grad * grad;
    P -= k.rate * ((M / k.bias1) / ((V / k.bias2).sqrt() + k.eps) + decay * P);
  }

  adamw_config config_;
  std::vector<tensor_info> layout_;
  std::vector<decay_segment> segments_;
  std::vector<Scalar> m_;  // (N,) first moment
  std::vector<Scalar> v_;  // (N,) second moment
  std::uint64_t step_ = 0;
};

using adamw_cpu = basic_adamw_cpu<float>;

}  // namespace trainkit::optim
