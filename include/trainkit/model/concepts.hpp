// trainkit/model/concepts.hpp — the Model role.
//
// A model keeps its parameters and gradients in flat buffers described by a list of named tensors
// (the order llm.c uses for GPT-2), computes the loss of a batch and accumulates gradients, and
// says how many FLOPs a token costs so the trainer can report MFU.
#pragma once

#include <concepts>
#include <cstddef>
#include <span>
#include <vector>

#include "trainkit/core/batch.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/tensor.hpp"

namespace trainkit::model {

/// Requires:
///  - `memory_space`: where batches, parameters and gradients live;
///  - `parameter_type`: element type of `parameters()` and `gradients()`;
///  - `forward_backward(batch, grad_scale)`: returns the mean loss over the batch's B·T targets and
///    *adds* grad_scale·∂loss/∂θ to the gradients (gradient accumulation: grad_scale = 1/steps);
///  - `forward(batch)`: the mean loss, gradients untouched (evaluation);
///  - `zero_grad()`;
///  - `flops_per_token(T)`: training FLOPs per token at sequence length T (forward + backward),
///    DESIGN.md's formula 6·N + 12·L·C·T with N excluding position embeddings;
///  - `parameter_layout()`: named tensors covering `parameters()` exactly, in llm.c order;
///  - `state()`: the tensors a checkpoint must hold to restore the model (host or device memory).
template <class M>
concept model = requires(M m, const M cm, batch_view<typename M::memory_space> b, float scale) {
  typename M::memory_space;
  typename M::parameter_type;
  { m.forward_backward(b, scale) } -> std::same_as<float>;
  { m.forward(b) } -> std::same_as<float>;
  { m.zero_grad() } -> std::same_as<void>;
  { cm.flops_per_token(int{}) } -> std::convertible_to<double>;
  { cm.parameter_layout() } -> std::same_as<std::span<const tensor_info>>;
  { m.parameters() } -> std::same_as<std::span<typename M::parameter_type>>;
  { m.gradients() } -> std::same_as<std::span<typename M::parameter_type>>;
  { cm.num_parameters() } -> std::convertible_to<std::size_t>;
  { m.state() } -> std::same_as<std::vector<state_tensor>>;
};

}  // namespace trainkit::model
