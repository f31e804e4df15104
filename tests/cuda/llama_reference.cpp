// tests/cuda/llama_reference.cpp — g++ side of the CUDA Llama tests (llama_reference.hpp).
#include "llama_reference.hpp"

#include <algorithm>
#include <span>

#include "trainkit/core/batch.hpp"
#include "trainkit/model/llama/cpu.hpp"

namespace trainkit::test_ref {

namespace {
// The recipe's window schedule reads the step: llama_cpu's set_step, where it has one.
template <class M>
void set_step_if_any(M& m, std::int64_t step) {
  if constexpr (requires { m.set_step(step); }) m.set_step(step);
}
}  // namespace

llama_result llama_forward_backward(const model::llama_config& cfg,
                                    const std::vector<float>& params,
                                    const std::vector<std::int32_t>& inputs,
                                    const std::vector<std::int32_t>& targets, int B, int T,
                                    std::int64_t step) {
  model::llama_cpu m(cfg, model::zero_parameters);
  set_step_if_any(m, step);
  std::copy(params.begin(), params.end(), m.parameters().begin());
  llama_result r;
  const auto logits = m.forward_logits(std::span<const std::int32_t>(inputs), B, T);
  r.logits.assign(logits.begin(), logits.end());
  m.zero_grad();
  r.loss = m.forward_backward(batch_view<host_memory>{inputs.data(), targets.data(), B, T}, 1.0f);
  r.grads.assign(m.gradients().begin(), m.gradients().end());
  return r;
}

std::vector<float> llama_cpu_initial_parameters(const model::llama_config& cfg,
                                                std::uint64_t seed) {
  model::llama_cpu m(cfg, seed);
  return {m.parameters().begin(), m.parameters().end()};
}

}  // namespace trainkit::test_ref
