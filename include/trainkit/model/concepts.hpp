// trainkit/model/concepts.hpp — the Model role.
//
// A model keeps its parameters and gradients in flat buffers described by a list of named tensors
// (the order llm.c uses for GPT-2), accumulates gradients micro-step by micro-step under the step
// protocol (core/step_protocol.hpp), publishes them in gradient buckets as backward finishes
// them, and says how many FLOPs a token costs so the trainer can report MFU.
#pragma once

#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "trainkit/core/batch.hpp"
#include "trainkit/core/execution_context.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/core/tensor.hpp"

namespace trainkit::model {

/// What an optimizer, a reducer or the clipping step needs of a model: flat buffers and a layout.
/// Requires:
///  - `memory_space`: where batches, parameters and gradients live;
///  - `parameter_type`: element type of `parameters()` and `gradients()`;
///  - `parameter_layout()`: named tensors covering `parameters()` exactly, in the model's order;
///  - `parameters()`, `gradients()`: the flat buffers (device memory for a device model);
///  - `num_parameters()`: their length.
template <class M>
concept parameter_holder = requires(M m, const M cm) {
  typename M::memory_space;
  typename M::parameter_type;
  { cm.parameter_layout() } -> std::same_as<std::span<const tensor_info>>;
  { m.parameters() } -> std::same_as<std::span<typename M::parameter_type>>;
  { m.gradients() } -> std::same_as<std::span<typename M::parameter_type>>;
  { cm.num_parameters() } -> std::convertible_to<std::size_t>;
};

/// The model the trainer drives. Requires, beside parameter_holder:
///  - `zero_grad(ctx)`: gradients to zero, enqueued on the execution context;
///  - `forward_backward(batch, micro, ctx)`: adds micro.grad_scale·∂loss/∂θ to the gradients and
///    adds the batch's mean loss (over its B·T targets) to the step's loss where it computes it;
///    `micro.first()` restarts that accumulation. During the backward of the last micro-step it
///    calls `micro.on_bucket(i)` for every bucket i of `gradient_buckets()`, once each, as soon as
///    the bucket's gradients are final (enqueued, on a device). No host synchronisation needed;
///  - `step_loss()`: the mean of the current step's micro-step losses, read after the trainer has
///    synchronised the context (once per optimizer step); throws config_error for bad input found
///    on the device (a token id outside the vocabulary);
///  - `gradient_buckets()`: the buckets, in publication order, tiling `gradients()` exactly;
///  - `forward(batch)`: the mean loss, gradients untouched (evaluation; may synchronise);
///  - `flops_per_token(T)`: training FLOPs per token at sequence length T (forward + backward),
///    docs/architecture.md's formula 6·N + 12·L·C·T with N excluding position embeddings;
///  - `state()`: the tensors a checkpoint must hold to restore the model (host or device memory).
template <class M>
concept model = parameter_holder<M> &&
    requires(M m, const M cm, batch_view<typename M::memory_space> b, const micro_step& micro,
             execution_context_t<typename M::memory_space>& ctx) {
  { m.zero_grad(ctx) } -> std::same_as<void>;
  { m.forward_backward(b, micro, ctx) } -> std::same_as<void>;
  { m.step_loss() } -> std::convertible_to<double>;
  { cm.gradient_buckets() } -> std::same_as<std::span<const gradient_bucket>>;
  { m.forward(b) } -> std::same_as<float>;
  { cm.flops_per_token(int{}) } -> std::convertible_to<double>;
  { m.state() } -> std::same_as<std::vector<state_tensor>>;
};

/// Optional hook: the name of the device the model runs on, for the trainer's peak-FLOP/s lookup
/// (MFU). Without it the trainer uses trainer_config::mfu.device_name.
template <class M>
concept names_its_device = requires(const M cm) {
  { cm.device_name() } -> std::convertible_to<std::string>;
};

}  // namespace trainkit::model
