// tests/optim/muon_twin_reference.hpp — the g++ side of test_muon_cuda_step: runs muon_cuda's host
// twin (optim/detail/muon_cuda_twin.hpp, which includes Eigen through adamw_cpu.hpp) so that the
// nvcc unit need not include it.
#pragma once

#include <span>
#include <vector>

#include "trainkit/core/tensor.hpp"
#include "trainkit/optim/muon_config.hpp"

namespace muon_twin_reference {

/// The twin's fp32 master weights after one update per entry of `grads` (each the model's
/// gradients, rounded to bf16 by the twin), at rates `lrs` and clipping factors `factors`, from
/// `params` (rounded to bf16 by the twin).
std::vector<float> master_after(std::span<const trainkit::tensor_info> layout,
                                std::span<const float> params,
                                const trainkit::optim::muon_config& config,
                                const std::vector<std::vector<float>>& grads,
                                const std::vector<float>& lrs, const std::vector<float>& factors);

}  // namespace muon_twin_reference
