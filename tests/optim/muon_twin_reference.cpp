// tests/optim/muon_twin_reference.cpp — the g++ side of test_muon_cuda_step (see the header).
#include "muon_twin_reference.hpp"

#include "trainkit/optim/detail/muon_cuda_twin.hpp"

namespace muon_twin_reference {

std::vector<float> master_after(std::span<const trainkit::tensor_info> layout,
                                std::span<const float> params,
                                const trainkit::optim::muon_config& config,
                                const std::vector<std::vector<float>>& grads,
                                const std::vector<float>& lrs, const std::vector<float>& factors) {
  trainkit::optim::detail::muon_cuda_twin twin(layout, params, config);
  for (std::size_t s = 0; s < grads.size(); ++s) twin.update(grads[s], lrs[s], factors[s]);
  return {twin.master().begin(), twin.master().end()};
}

}  // namespace muon_twin_reference
