// tests/cuda/optim_reference.cpp — g++ side of the adamw_cuda tests: adamw_cpu over a host model
// that is nothing but a parameter buffer, a gradient buffer and a layout.
#include "optim_reference.hpp"

#include <span>
#include <stdexcept>
#include <utility>

#include "trainkit/core/batch.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/grad_clip.hpp"

namespace trainkit::test_ref {
namespace {

/// A host "model" with given parameters and gradients: all adamw_cpu needs.
struct buffer_model {
  using memory_space = host_memory;
  using parameter_type = float;

  std::vector<tensor_info> layout;
  std::vector<float> params, grads;

  float forward_backward(batch_view<host_memory>, float) { throw std::logic_error("unused"); }
  float forward(batch_view<host_memory>) { throw std::logic_error("unused"); }
  void zero_grad() {}
  double flops_per_token(int) const { return 0.0; }
  std::span<const tensor_info> parameter_layout() const { return layout; }
  std::span<float> parameters() { return params; }
  std::span<float> gradients() { return grads; }
  std::size_t num_parameters() const { return params.size(); }
  std::vector<state_tensor> state() { return {}; }
};
static_assert(model::parameter_holder<buffer_model>);

}  // namespace

adamw_run adamw_cpu_steps(const std::vector<tensor_info>& layout, std::vector<float> params,
                          const std::vector<std::vector<float>>& grads,
                          const std::vector<float>& lrs, const optim::adamw_config& config,
                          double max_norm) {
  buffer_model m{layout, std::move(params), {}};
  m.grads.assign(m.params.size(), 0.0f);
  optim::adamw_cpu opt(m, config);
  optim::clip_then_update<host_memory> clipped_update(max_norm);
  adamw_run out;
  for (std::size_t s = 0; s < grads.size(); ++s) {
    m.grads = grads[s];
    out.norms.push_back(clipped_update(opt, m, lrs[s]));
    out.params.push_back(m.params);
  }
  return out;
}

}  // namespace trainkit::test_ref
