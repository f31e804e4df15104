// examples/custom_policy/broken_model.cpp — must not compile: a model that forgot flops_per_token.
//
// The trainer reports MFU, so trainkit::model::model requires every model to say what a token
// costs. This wrapper forwards everything else to mlp_lm, and the composition below is rejected
// at compile time with a message naming the missing expression (docs/writing_a_policy.md shows
// it). Built by the must_not_compile.custom_policy_missing_flops test; with TRAINKIT_MNC_VALID
// the member is present and the same file compiles, so the test can only pass for this reason.
#include <trainkit/trainkit.hpp>

#include "char_corpus.hpp"
#include "mlp_lm.hpp"

namespace tk = trainkit;

struct forgetful_model {
  using memory_space = tk::host_memory;
  using parameter_type = float;
  custom_policy::mlp_lm inner{{}, 1};

  void forward_backward(tk::batch_view<tk::host_memory> b, const tk::model::micro_step& micro,
                        tk::host_context& ctx) {
    inner.forward_backward(b, micro, ctx);
  }
  double step_loss() const { return inner.step_loss(); }
  std::span<const tk::model::gradient_bucket> gradient_buckets() const {
    return inner.gradient_buckets();
  }
  float forward(tk::batch_view<tk::host_memory> b) { return inner.forward(b); }
  void zero_grad(tk::host_context& ctx) { inner.zero_grad(ctx); }
#ifdef TRAINKIT_MNC_VALID
  double flops_per_token(int seq_len) const {
    return inner.flops_per_token(seq_len);
  }
#endif
  std::span<const tk::tensor_info> parameter_layout() const {
    return inner.parameter_layout();
  }
  std::span<float> parameters() {
    return inner.parameters();
  }
  std::span<float> gradients() {
    return inner.gradients();
  }
  std::size_t num_parameters() const {
    return inner.num_parameters();
  }
  std::vector<tk::state_tensor> state() {
    return inner.state();
  }
};

using broken = tk::trainer<custom_policy::char_corpus, tk::prefetch::threaded<4>, forgetful_model,
                           tk::optim::adamw_cpu, tk::checkpoint::sync_checkpointer>;

int main() {
  return sizeof(broken) > 0 ? 0 : 1;
}
