// tests/cuda/optim_reference.hpp — the CPU side of the adamw_cuda tests, compiled by g++
// (optim_reference.cpp): adamw_cpu run over plain vectors, so the .cu test never includes Eigen.
#pragma once

#include <vector>

#include "trainkit/core/tensor.hpp"
#include "trainkit/optim/adamw_config.hpp"

namespace trainkit::test_ref {

struct adamw_run {
  std::vector<std::vector<float>> params;  // parameters after each step
  std::vector<float> norms;                // the returned gradient norm of each step
};

/// adamw_cpu over a model with `layout` and `params`, one step per entry of `grads` at the
/// matching learning rate, each clipped by global norm at `max_norm` (0 = off) first.
adamw_run adamw_cpu_steps(const std::vector<tensor_info>& layout, std::vector<float> params,
                          const std::vector<std::vector<float>>& grads,
                          const std::vector<float>& lrs, const optim::adamw_config& config,
                          double max_norm);

}  // namespace trainkit::test_ref
