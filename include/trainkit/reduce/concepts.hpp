// trainkit/reduce/concepts.hpp — the GradientReducer role, the sixth policy.
//
// With one process there is nothing to reduce (`reduce::single`). With many ranks the reducer
// sums every gradient bucket across them, starting on a bucket as soon as the model publishes it
// during the last micro-step's backward (core/step_protocol.hpp), so communication overlaps the
// rest of backward. `finish` is the point after which the clipping step and the optimizer may read
// the gradients: on a device it makes the compute stream wait for the reductions (an event, not a
// host synchronisation).
//
// Clipping is not the reducer's: the trainer owns the rule (its threshold,
// trainer_config::grad_clip, and the clipping step it runs after `finish`, optim/grad_clip.hpp).
// The reducer only states the two facts that step needs and only it knows: which gradient ranges
// this rank holds summed (all of them after an all-reduce, this rank's shard after a
// reduce-scatter), and how the ranks' partial sums of squares combine into the one-process norm
// (nothing to do, or a sum over ranks). It also says which gradient layout it delivers
// (comm/gradient_layout.hpp), which the trainer compares with the optimizer's at compile time. This
// folder includes nothing from optim/ (tests/layers).
#pragma once

#include <concepts>
#include <cstddef>
#include <span>
#include <type_traits>

#include "trainkit/comm/gradient_layout.hpp"
#include "trainkit/core/execution_context.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/model/concepts.hpp"

namespace trainkit::reduce {

/// Requires, for a model M:
///  - `attach(model, ctx)`: called once by the trainer before the first step; the reducer may
///    keep both references (the trainer owns the model and the context for the reducer's life);
///  - `bucket_ready(i)`: bucket i of `model.gradient_buckets()` is final (enqueued, on a device):
///    start reducing it;
///  - `finish()`: after the last micro-step; every bucket's reduction is complete, or ordered
///    before later work on the context;
///  - `delivered_gradients`, a static constexpr trainkit::gradient_layout: what the gradient buffer
///    holds after `finish()` — `replicated` (single, the all-reduces) or `reduce_scattered` (the
///    ZeRO-1 reducers); the optimizer's `expected_gradients` must be the same;
///  - `owned_gradients()`: after attach, the ranges of the gradient buffer this rank holds summed
///    after `finish()` — the buckets' ranges for a replicated layout, this rank's shard (on the
///    norm chunk grid, comm/zero1_shards.hpp; possibly empty) for a reduce-scattered one;
///  - `combine_norm_partials(partials, ctx)`: collective, after `finish()`. `partials` (in the
///    context's memory space) holds the clipping step's partial sums of squares, the same count
///    on every rank, each rank's non-zero only where it owns the gradients; afterwards every rank
///    holds the one-process values. Replicated: nothing to do (every rank owns everything);
///    reduce-scattered: the element-wise sum over ranks (each slot has one non-zero addend, so
///    exact in any order). On a device it is enqueued after the context's work and the context
///    waits for it (events, no host wait).
template <class R, class M>
concept gradient_reducer_for = model::model<M> &&
    requires(R r, const R cr, M& m, execution_context_t<typename M::memory_space>& ctx,
             std::size_t bucket, std::span<double> partials) {
  { r.attach(m, ctx) } -> std::same_as<void>;
  { r.bucket_ready(bucket) } -> std::same_as<void>;
  { r.finish() } -> std::same_as<void>;
  requires std::same_as<std::remove_cv_t<decltype(R::delivered_gradients)>, gradient_layout>;
  { cr.owned_gradients() } -> std::convertible_to<std::span<const model::gradient_range>>;
  { r.combine_norm_partials(partials, ctx) } -> std::same_as<void>;
};

/// What the trainer asks of the ranks besides gradients: who it is, and the few scalars every rank
/// must agree on (the step's loss, the validation loss, whether to stop). All of them are
/// collective: every rank calls them in the same order, or the job hangs. A reducer without them
/// is treated as one process. Requires:
///  - `rank()`, `world_size()`: this rank in [0, world_size);
///  - `sum(span<double>)`: element-wise sum over ranks, in place, the same bits on every rank (the
///    trainer relies on x + 0 + ... + 0 == x: each element has one non-zero addend);
///  - `average(double)`: the mean over ranks, summed in rank order then divided by world_size,
///    the same bits on every rank;
///  - `any(bool)`: true on every rank if it is true on one (the stop consensus).
template <class R>
concept rank_aware = requires(R r, const R cr, std::span<double> values, double x, bool flag) {
  { cr.rank() } -> std::convertible_to<int>;
  { cr.world_size() } -> std::convertible_to<int>;
  { r.sum(values) } -> std::same_as<void>;
  { r.average(x) } -> std::same_as<double>;
  { r.any(flag) } -> std::same_as<bool>;
};

}  // namespace trainkit::reduce
