// trainkit/model/cuda/gpt2_host_init.hpp — GPT-2's initial parameters computed on the host,
// without Eigen.
//
// The CUDA model must start from exactly the weights basic_gpt2_cpu<float>(cfg, seed) draws (so a
// CPU and a GPU run of one seed can be compared), but gpt2_cpu.hpp brings Eigen, which nvcc
// compiles with a flood of warnings. This repeats gpt2_cpu's initialisation loop over the same
// normal_sampler: tensors in layout order, matrices and embeddings N(0, 0.02), residual
// projections N(0, 0.02/√(2L)), LayerNorm gains 1, biases and wte's padded rows 0, each draw
// rounded to float as the CPU model stores it. A g++ test (tests/cuda/test_cuda_core.cpp) checks
// the two agree bit for bit; if gpt2_cpu's initialisation changes, that test fails.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "trainkit/model/detail/normal_sampler.hpp"
#include "trainkit/model/gpt2_config.hpp"

namespace trainkit::model {

/// The flat parameter buffer (gpt2_parameter_layout order) of a freshly initialised GPT-2.
inline std::vector<float> gpt2_initial_parameters(const gpt2_config& cfg, std::uint64_t seed) {
  cfg.validate();
  std::vector<float> params(cfg.num_parameters(), 0.0f);
  detail::normal_sampler normal(seed);
  const double residual_std = 0.02 / std::sqrt(2.0 * cfg.num_layers);
  for (const tensor_info& t : gpt2_parameter_layout(cfg)) {
    float* p = params.data() + t.offset;
    if (t.name == "ln1w" || t.name == "ln2w" || t.name == "lnfw") {
      std::fill_n(p, t.numel(), 1.0f);
    } else if (t.role == tensor_role::matrix || t.role == tensor_role::embedding) {
      const double stddev = (t.name == "attprojw" || t.name == "fcprojw") ? residual_std : 0.02;
      const std::size_t n =
          t.name == "wte" ? std::size_t(cfg.vocab_size) * cfg.channels : t.numel();
      for (std::size_t i = 0; i < n; ++i) p[i] = float(stddev * normal());
    }
  }
  return params;
}

}  // namespace trainkit::model
