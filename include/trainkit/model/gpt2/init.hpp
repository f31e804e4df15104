// trainkit/model/gpt2/init.hpp — GPT-2's initial parameters, the one implementation both
// GPT-2 models start from.
//
// GPT-2's recipe, as llm.c's train_gpt2.py applies it: matrices and embeddings N(0, 0.02), the
// residual projections (attprojw, fcprojw) N(0, 0.02/√(2L)), biases 0, LayerNorm gains 1 and
// shifts 0. wte's padded rows [V, Vp) stay zero: they are not tokens, and zero keeps their logits
// inert. Draws come from normal_sampler (the same on every standard library), tensor by tensor in
// gpt2_parameter_layout order, each rounded to Scalar once; so gpt2_cpu (float) and gpt2_cuda
// (these floats rounded to bf16) start from the same weights for one seed. No Eigen: nvcc units
// include it through gpt2/cuda.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/model/detail/normal_sampler.hpp"
#include "trainkit/model/gpt2/config.hpp"

namespace trainkit::model::detail {

/// Writes GPT-2's initialisation of `seed` over all of `params` (gpt2_parameter_layout(cfg) order,
/// cfg.num_parameters() elements; config_error otherwise).
template <std::floating_point Scalar>
void gpt2_initialize(const gpt2_config& cfg, std::uint64_t seed, std::span<Scalar> params) {
  if (params.size() != cfg.num_parameters())
    throw config_error("gpt2 initialisation: " + std::to_string(params.size()) +
                       " parameters given, shape " + cfg.to_string() + " has " +
                       std::to_string(cfg.num_parameters()));
  std::fill(params.begin(), params.end(), Scalar(0));  // biases, LayerNorm shifts, padded rows
  normal_sampler normal(seed);
  const double residual_std = 0.02 / std::sqrt(2.0 * cfg.num_layers);
  for (const tensor_info& t : gpt2_parameter_layout(cfg)) {
    Scalar* p = params.data() + t.offset;
    if (t.name == "ln1w" || t.name == "ln2w" || t.name == "lnfw") {
      std::fill_n(p, t.numel(), Scalar(1));  // LayerNorm gains
    } else if (t.role == tensor_role::matrix || t.role == tensor_role::embedding) {
      const double stddev = (t.name == "attprojw" || t.name == "fcprojw") ? residual_std : 0.02;
      const std::size_t n =
          t.name == "wte" ? std::size_t(cfg.vocab_size) * std::size_t(cfg.channels) : t.numel();
      for (std::size_t i = 0; i < n; ++i) p[i] = Scalar(stddev * normal());
    }
  }
}

/// gpt2_initialize into a new buffer; validates `cfg` first (config_error naming the field).
template <std::floating_point Scalar>
std::vector<Scalar> gpt2_initial_parameters(const gpt2_config& cfg, std::uint64_t seed) {
  cfg.validate();
  std::vector<Scalar> params(cfg.num_parameters());
  gpt2_initialize(cfg, seed, std::span<Scalar>(params));
  return params;
}

}  // namespace trainkit::model::detail
