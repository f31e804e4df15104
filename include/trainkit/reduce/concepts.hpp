// trainkit/reduce/concepts.hpp — the GradientReducer role, the sixth policy.
//
// With one process there is nothing to reduce (`reduce::single`). With many ranks the reducer
// averages every gradient bucket across them, starting on a bucket as soon as the model publishes
// it during the last micro-step's backward (model/step_protocol.hpp), so communication overlaps
// the rest of backward. `finish` is the point after which the clipping step and the optimizer may
// read the gradients: on a device it makes the compute stream wait for the reductions (an event,
// not a host synchronisation).
#pragma once

#include <concepts>
#include <cstddef>

#include "trainkit/core/execution_context.hpp"
#include "trainkit/model/concepts.hpp"

namespace trainkit::reduce {

/// Requires, for a model M:
///  - `attach(model, ctx)`: called once by the trainer before the first step; the reducer may
///    keep both references (the trainer owns the model and the context for the reducer's life);
///  - `bucket_ready(i)`: bucket i of `model.gradient_buckets()` is final (enqueued, on a device):
///    start reducing it;
///  - `finish()`: after the last micro-step; every bucket's reduction is complete, or ordered
///    before later work on the context.
template <class R, class M>
concept gradient_reducer_for = model::model<M> &&
    requires(R r, M& m, execution_context_t<typename M::memory_space>& ctx, std::size_t bucket) {
  { r.attach(m, ctx) } -> std::same_as<void>;
  { r.bucket_ready(bucket) } -> std::same_as<void>;
  { r.finish() } -> std::same_as<void>;
};

}  // namespace trainkit::reduce
