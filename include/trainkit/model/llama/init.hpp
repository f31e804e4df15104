// trainkit/model/llama/init.hpp — the Llama family's initial parameters, one implementation
// for every model of the family (the CPU one now, a CUDA one later starts from the same weights).
//
// GPT-2's recipe carried over (gpt2/init.hpp): matrices, the embedding and the untied head
// N(0, 0.02), the residual projections (attprojw, fcprojw) N(0, 0.02/√(2L)), RMSNorm gains 1. The
// padded vocabulary rows [V, Vp) of wte and lm_head stay zero: they are not tokens. Draws come from
// normal_sampler tensor by tensor in llama_parameter_layout order, each rounded to Scalar once.
// The recipe's tensors (llama_config::recipe) come last, so the others draw what they drew before
// them: value-embedding tables N(0, 0.02) as wte, their mixing weights (λ₀, λ₁) = (0.5, 0.5) and
// the U-net skip weights 1 (modded-nanogpt's starts); zero_init_projections then zeroes attprojw,
// fcprojw and an untied lm_head. No Eigen: a CUDA unit may include it.
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
#include "trainkit/model/recipe/zero_init.hpp"

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
  const auto layout = llama_parameter_layout(cfg);
  for (const tensor_info& t : layout) {
    Scalar* p = params.data() + t.offset;
    if (t.name == "ve_lambdas") {  // v ← 0.5·v + 0.5·E[token] (modded-nanogpt's start)
      std::fill_n(p, t.numel(), Scalar(0.5));
      continue;
    }
    if (t.role == tensor_role::norm) {
      std::fill_n(p, t.numel(), Scalar(1));  // RMSNorm gains; U-net skip weights
      continue;
    }
    const double stddev = (t.name == "attprojw" || t.name == "fcprojw") ? residual_std : 0.02;
    if (t.role == tensor_role::embedding || t.role == tensor_role::head) {
      // A table (or k stacked tables) of Vp rows: the V real rows drawn, the padded ones zero.
      const std::size_t width = std::size_t(t.shape.back()),
                        rows = std::size_t(t.shape[t.shape.size() - 2]),
                        tables = t.numel() / (rows * width);
      for (std::size_t k = 0; k < tables; ++k)
        for (std::size_t i = 0; i < std::size_t(cfg.vocab_size) * width; ++i)
          p[k * rows * width + i] = Scalar(stddev * normal());
      continue;
    }
    for (std::size_t i = 0; i < t.numel(); ++i) p[i] = Scalar(stddev * normal());
  }
  // Zero-initialised output projections: after the draws, so every other tensor is as without.
  if (cfg.recipe.zero_init_projections)
    recipe::zero_output_projections(params, std::span<const tensor_info>(layout),
                                    !cfg.tied_embeddings);
}

}  // namespace trainkit::model::detail
