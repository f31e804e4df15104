// trainkit/optim/concepts.hpp — the Optimizer role.
//
// An optimizer updates a model's parameters from its gradients and owns its state (moments, step
// count). It must agree with the model on where parameters live and on their element type, which
// the concept checks so a mismatched composition fails to compile.
#pragma once

#include <concepts>
#include <cstdint>
#include <vector>

#include "trainkit/core/tensor.hpp"
#include "trainkit/model/concepts.hpp"

namespace trainkit::optim {

/// Requires:
///  - `memory_space` and `parameter_type` equal to the model's;
///  - constructible from (const M&, config_type);
///  - `step(model, lr)`: one update from the accumulated gradients, clipping by global norm when
///    configured; returns the global gradient norm *before* clipping;
///  - `steps_taken()`: updates applied so far (drives bias correction);
///  - `state()`: moments and step count as named tensors for checkpoints.
template <class O, class M>
concept optimizer_for = model::model<M> && requires(O o, const O co, M& m, float lr) {
  typename O::memory_space;
  typename O::parameter_type;
  typename O::config_type;
  requires std::same_as<typename O::memory_space, typename M::memory_space>;
  requires std::same_as<typename O::parameter_type, typename M::parameter_type>;
  requires std::constructible_from<O, const M&, typename O::config_type>;
  { o.step(m, lr) } -> std::same_as<float>;
  { co.steps_taken() } -> std::convertible_to<std::uint64_t>;
  { o.state() } -> std::same_as<std::vector<state_tensor>>;
};

}  // namespace trainkit::optim
