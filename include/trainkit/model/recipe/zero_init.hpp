// trainkit/model/recipe/zero_init.hpp — zero-initialised output projections: the attention and
// MLP output projections (and, optionally, an untied head) start at zero.
//
// With every block's output projection at zero each residual block starts as the identity, so the
// network begins as a shallow one and grows its depth as those weights move; a zero head starts
// every logit at 0 (the loss at ln V, the uniform prediction). modded-nanogpt zero-initialises
// c_proj of attention and MLP and its lm_head (github.com/KellerJordan/modded-nanogpt, the
// "zero-init projections" record, after muP's zero readout: Yang et al. 2022, "Tensor Programs V",
// arXiv:2203.03466). An init option applied to the parameters after a family's own
// initialisation: by name, since roles do not tell an output projection from another matrix;
// trainkit's GPT-2 and Llama layouts both call them "attprojw" and "fcprojw"
// (model/gpt2/config.hpp, model/llama/config.hpp). Off: never called, today's initial weights.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "trainkit/core/error.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/core/tensor_role.hpp"

namespace trainkit::model::recipe {

/// The output projections of trainkit's layouts (GPT-2 and Llama alike).
inline constexpr std::string_view output_projection_names[] = {"attprojw", "fcprojw"};

/// Sets every element of the output projections (and, with `head`, of every tensor of role head:
/// an untied output head) to zero; returns the elements zeroed. Throws config_error when the
/// layout has no output projection of those names (a family this does not know), or `head` is
/// asked of a layout with no head tensor (a tied head is the embedding and stays as it is).
template <class S>
std::size_t zero_output_projections(std::span<S> params, std::span<const tensor_info> layout,
                                    bool head) {
  std::size_t zeroed = 0, projections = 0, heads = 0;
  for (const tensor_info& t : layout) {
    const bool projection =
        std::find(std::begin(output_projection_names), std::end(output_projection_names), t.name) !=
        std::end(output_projection_names);
    const bool is_head = head && t.role == tensor_role::head;
    if (!projection && !is_head) continue;
    if (t.offset + t.numel() > params.size())
      throw config_error("zero_output_projections: tensor '" + t.name + "' leaves the " +
                         std::to_string(params.size()) + " parameters");
    std::fill_n(params.begin() + std::ptrdiff_t(t.offset), t.numel(), S(0));
    zeroed += t.numel();
    projections += projection;
    heads += is_head;
  }
  if (projections == 0)
    throw config_error(
        "zero_output_projections: the layout has no tensor named attprojw or fcprojw");
  if (head && heads == 0)
    throw config_error(
        "zero_output_projections: a zero head was asked for but the layout has no tensor of role "
        "head (a tied head is the embedding)");
  return zeroed;
}

}  // namespace trainkit::model::recipe
