// trainkit/model/llama/init.hpp — the Llama family's initial parameters, one implementation
// for every model of the family (the CPU one now, a CUDA one later starts from the same weights).
//
// GPT-2's recipe carried over (gpt2/init.hpp): matrices, the embedding and the untied head
// N(0, 0.02), the residual projections (attprojw, fcprojw) N(0, 0.02/√(2L)), RMSNorm gains 1. The
// padded vocabulary rows [V, Vp) of wte and lm_head stay zero: they are not tokens. Draws come from
// normal_sampler tensor by tensor in llama_parameter_layout order, each rounded to Scalar once.
// No Eigen: a CUDA unit may include it.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "trainkit/core/error.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/model/detail/normal_sampler.hpp"
#include "trainkit/model/llama/config.hpp"

namespace trainkit::model::detail {

/// Writes the family's initialisation of `seed` over all of `params` (llama_parameter_layout(cfg)
/// order, cfg.num_parameters() elements; config_error otherwise).
template <std::floating_point Scalar>
void llama_initialize(const llama_config& cfg, std::uint64_t seed, std::span<Scalar> params) {
  if (params.size() != cfg.num_parameters())
    throw config_error("llama initialisation: " + std::to_string(params.size()) +
                       " parameters given, shape " + cfg.to_string() + " has " +
                       std::to_string(cfg.num_parameters()));
  std::fill(params.begin(), params.end(), Scalar(0));  // padded vocabulary rows
  normal_sampler normal(seed);
  const double residual_std = 0.02 / std::sqrt(2.0 * cfg.num_layers);
  for (const tensor_info& t : llama_parameter_layout(cfg)) {
    Scalar* p = params.data() + t.offset;
    if (t.role == tensor_role::norm) {
      std::fill_n(p, t.numel(), Scalar(1));  // RMSNorm gains
      continue;
    }
    const double stddev = (t.name == "attprojw" || t.name == "fcprojw") ? residual_std : 0.02;
    const bool table = t.role == tensor_role::embedding || t.role == tensor_role::head;
    const std::size_t n =
        table ? std::size_t(cfg.vocab_size) * std::size_t(cfg.channels) : t.numel();
    for (std::size_t i = 0; i < n; ++i) p[i] = Scalar(stddev * normal());
  }
}

}  // namespace trainkit::model::detail
