// trainkit/optim/concepts.hpp — the Optimizer role.
//
// An optimizer updates a model's parameters from its gradients and owns its state (moments, step
// count). It must agree with the model on where parameters live and on their element type, which
// the concept checks so a mismatched composition fails to compile. Clipping is not the
// optimizer's: the threshold is the trainer's (trainer_config::grad_clip), the global norm is
// computed by the trainer's clipping step over the gradient buckets (with the reducer's facts, so
// that a sharded run can sum it across ranks), and `update` receives only the factor. An optimizer
// also says which gradients it reads (comm/gradient_layout.hpp), so that the trainer can refuse a
// reducer delivering others.
#pragma once

#include <concepts>
#include <type_traits>
#include <vector>

#include "trainkit/comm/gradient_layout.hpp"
#include "trainkit/core/execution_context.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/model/concepts.hpp"
#include "trainkit/optim/clip_scale.hpp"

namespace trainkit::optim {

/// Requires:
///  - `memory_space` and `parameter_type` equal to the model's;
///  - constructible from (const M&, config_type);
///  - `update(model, lr, clip, ctx)`: one update from the gradients, each multiplied by the
///    clipping factor `clip` (optim/clip_scale.hpp), enqueued on the execution context;
///  - `expected_gradients`, a static constexpr trainkit::gradient_layout: what `update` reads in
///    the gradient buffer — `replicated` (every element summed over ranks: adamw_*, muon_cpu, and
///    sharded_muon_cpu, which shards its state but not its gradients) or `reduce_scattered` (only
///    this rank's ZeRO-1 shard summed: zero1_adamw_*); the reducer must deliver the same;
///  - `state()`: moments and step count as named tensors for checkpoints.
template <class O, class M>
concept optimizer_for = model::parameter_holder<M> &&
    requires(O o, M& m, float lr, const clip_scale<typename M::memory_space>& clip,
             execution_context_t<typename M::memory_space>& ctx) {
  typename O::memory_space;
  typename O::parameter_type;
  typename O::config_type;
  requires std::same_as<typename O::memory_space, typename M::memory_space>;
  requires std::same_as<typename O::parameter_type, typename M::parameter_type>;
  requires std::constructible_from<O, const M&, typename O::config_type>;
  { o.update(m, lr, clip, ctx) } -> std::same_as<void>;
  requires std::same_as<std::remove_cv_t<decltype(O::expected_gradients)>, gradient_layout>;
  { o.state() } -> std::same_as<std::vector<state_tensor>>;
};

}  // namespace trainkit::optim
