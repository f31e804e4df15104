// tests/optim/mock_model.hpp — a tiny quadratic "model" satisfying trainkit::model::model, so the
// optimizer can be tested without the GPT-2 implementation.
//
// loss(θ) = ½ Σ (θ_i − target_i)² over a flat buffer laid out as four named tensors: two 2-D
// weight matrices (weight_decay = true) and two 1-D vectors (false), with a gap of unnamed padding
// between them, as a padded vocabulary would leave. Tests also write gradients directly.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "trainkit/core/batch.hpp"
#include "trainkit/core/execution_context.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/core/tensor.hpp"

namespace trainkit_test {

template <class Space = trainkit::host_memory>
class quadratic_model {
 public:
  using memory_space = Space;
  using parameter_type = float;

  explicit quadratic_model(std::uint32_t seed = 1, std::size_t padding = 5) {
    layout_ = {
        {"w1", {16, 8}, 0, trainkit::tensor_role::matrix},
        {"b1", {8}, 128, trainkit::tensor_role::bias},
        {"w2", {8, 24}, 136, trainkit::tensor_role::matrix},
        {"b2", {24}, 136 + 192 + padding, trainkit::tensor_role::bias},  // padding before it
    };
    const std::size_t n = 136 + 192 + padding + 24;
    params_.resize(n);
    grads_.assign(n, 0.0f);
    target_.resize(n);
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& p : params_) p = normal(rng);
    for (auto& t : target_) t = normal(rng);
    buckets_ = {{"all", {{0, n}}}};
  }

  float forward_backward(trainkit::batch_view<Space>, float grad_scale) {
    double loss = 0.0;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const float d = params_[i] - target_[i];
      loss += 0.5 * double(d) * d;
      grads_[i] += grad_scale * d;
    }
    return static_cast<float>(loss);
  }
  /// The step protocol: one bucket (everything), published on the last micro-step.
  void forward_backward(trainkit::batch_view<Space> b, const trainkit::model::micro_step& micro,
                        trainkit::execution_context_t<Space>&) {
    if (micro.first()) loss_sum_ = 0;
    loss_sum_ += forward_backward(b, micro.grad_scale);
    loss_count_ = micro.count;
    if (micro.last()) micro.on_bucket(0);
  }
  double step_loss() const { return loss_sum_ / loss_count_; }
  std::span<const trainkit::model::gradient_bucket> gradient_buckets() const { return buckets_; }
  void zero_grad(trainkit::execution_context_t<Space>&) { zero_grad(); }
  float forward(trainkit::batch_view<Space>) {
    double loss = 0.0;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const double d = double(params_[i]) - target_[i];
      loss += 0.5 * d * d;
    }
    return static_cast<float>(loss);
  }
  void zero_grad() { std::fill(grads_.begin(), grads_.end(), 0.0f); }
  double flops_per_token(int) const { return 6.0 * double(params_.size()); }
  std::span<const trainkit::tensor_info> parameter_layout() const { return layout_; }
  std::span<float> parameters() { return params_; }
  std::span<float> gradients() { return grads_; }
  std::size_t num_parameters() const { return params_.size(); }
  /// Replaces the layout (tests of layout validation).
  void set_layout(std::vector<trainkit::tensor_info> layout) { layout_ = std::move(layout); }
  std::vector<trainkit::state_tensor> state() {
    return {trainkit::make_state_tensor("model.params", std::span<float>(params_),
                                        {std::int64_t(params_.size())})};
  }

 private:
  std::vector<trainkit::tensor_info> layout_;
  std::vector<float> params_;  // (N,)
  std::vector<float> grads_;   // (N,)
  std::vector<float> target_;  // (N,)
  std::vector<trainkit::model::gradient_bucket> buckets_;
  double loss_sum_ = 0;
  int loss_count_ = 1;
};

/// The same model with double parameters: an optimizer for float must not accept it.
class double_model {
 public:
  using memory_space = trainkit::host_memory;
  using parameter_type = double;
  float forward(trainkit::batch_view<memory_space>) { return 0; }
  double flops_per_token(int) const { return 0; }
  std::span<const trainkit::tensor_info> parameter_layout() const { return {}; }
  std::span<double> parameters() { return p_; }
  std::span<double> gradients() { return p_; }
  std::size_t num_parameters() const { return p_.size(); }
  std::vector<trainkit::state_tensor> state() { return {}; }

 private:
  std::vector<double> p_;
};

}  // namespace trainkit_test
