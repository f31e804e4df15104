// A minimal model and optimizer templated on their memory space, for the must-not-compile tests
// (a real device model needs CUDA; the compile-time checks only look at the declared types).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <trainkit/trainkit.hpp>

namespace mnc {

template <class Space>
struct mock_model {
  using memory_space = Space;
  using parameter_type = float;
  using context = trainkit::execution_context_t<Space>;
  void forward_backward(trainkit::batch_view<Space>, const trainkit::model::micro_step&, context&) {
  }
  double step_loss() const { return 0; }
  std::span<const trainkit::model::gradient_bucket> gradient_buckets() const { return {}; }
  float forward(trainkit::batch_view<Space>) { return 0; }
  void zero_grad(context&) {}
  double flops_per_token(int) const { return 0; }
  std::span<const trainkit::tensor_info> parameter_layout() const { return layout_; }
  std::span<float> parameters() { return params_; }
  std::span<float> gradients() { return grads_; }
  std::size_t num_parameters() const { return params_.size(); }
  std::vector<trainkit::state_tensor> state() { return {}; }
  std::vector<trainkit::tensor_info> layout_;
  std::vector<float> params_, grads_;
};

template <class Space>
struct mock_optimizer {
  using memory_space = Space;
  using parameter_type = float;
  struct config_type {};
  static constexpr trainkit::gradient_layout expected_gradients =
      trainkit::gradient_layout::replicated;
  mock_optimizer(const mock_model<Space>&, config_type) {}
  void update(mock_model<Space>&, float, const trainkit::optim::clip_scale<Space>&,
              trainkit::execution_context_t<Space>&) {}
  std::vector<trainkit::state_tensor> state() { return {}; }
};

}  // namespace mnc
