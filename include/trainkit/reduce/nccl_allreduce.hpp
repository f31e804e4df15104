// trainkit/reduce/nccl_allreduce.hpp — data-parallel gradient averaging on GPUs with NCCL.
//
// One process per GPU; every rank runs the same trainer on its own slice of the global batch.
// When backward has enqueued the last kernel writing a gradient bucket (core/step_protocol.hpp),
// `bucket_ready` records an event on the compute stream, makes the reducer's own communication
// stream wait on it and enqueues an in-place ncclAllReduce (sum, bf16) on each of the bucket's
// ranges — so layer L's reduction runs on the network while backward computes layer L-1.
// `finish` records an event on the communication stream and makes the compute stream wait on it:
// the trainer's clipping step (optim/device_grad_clip.hpp, on the compute stream; every rank holds
// the summed gradients whole, gradient_layout::replicated, so it owns every bucket's ranges and
// has no partial sums to combine) and the optimizer see the reduced gradients, and the host never
// waits. A sum
// is the whole reduction because the trainer scales each micro-step by 1/(micro-batches × ranks)
// (docs/distributed.md). The rank-aware hooks (reduce/concepts.hpp: the loss, the validation loss
// and the stop consensus) are small NCCL collectives on the communication stream with a host wait,
// a few times per step.
//
// The communicator is a comm::nccl_communicator (comm/nccl_communicator.hpp: `single()` for one
// GPU, or comm/nccl_mpi.hpp's `nccl_communicator_from_mpi`); the streams, events and publication
// bookkeeping are comm::nccl_bucket_stream's, shared with nccl_zero1; each bucket's collectives
// are one NCCL group (comm::nccl_group), closed even when a check inside it throws. Link
// trainkit::nccl.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <climits>
#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "trainkit/comm/gradient_layout.hpp"
#include "trainkit/comm/nccl_bucket_stream.hpp"
#include "trainkit/comm/nccl_check.hpp"
#include "trainkit/comm/nccl_communicator.hpp"
#include "trainkit/comm/nccl_group.hpp"
#include "trainkit/comm/nccl_scalars.hpp"
#include "trainkit/comm/nccl_sum_op.hpp"
#include "trainkit/core/bf16.hpp"
#include "trainkit/core/cuda/execution_context.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/reduce/concepts.hpp"

namespace trainkit::reduce {

class nccl_allreduce {
 public:
  /// Reduces over `comm`, which must outlive the reducer. `premultiply` scales every rank's
  /// gradients inside the sum (comm/nccl_sum_op.hpp): 1 in training, where the trainer scales the
  /// micro-steps; the one-GPU tests pass 2 so that a world of one launches a real reduction.
  explicit nccl_allreduce(const comm::nccl_communicator& comm, float premultiply = 1.0f)
      : comm_(&comm), op_(premultiply, "nccl_allreduce") {}

  nccl_allreduce(nccl_allreduce&&) noexcept = default;  // only before attach (the trainer's move)
  nccl_allreduce& operator=(nccl_allreduce&&) = delete;
  nccl_allreduce(const nccl_allreduce&) = delete;
  nccl_allreduce& operator=(const nccl_allreduce&) = delete;

  int rank() const noexcept { return comm_->rank(); }
  int world_size() const noexcept { return comm_->world_size(); }
  /// After finish() every element holds the sum over ranks.
  static constexpr gradient_layout delivered_gradients = gradient_layout::replicated;

  /// The rank-aware hooks (comm/nccl_scalars.hpp): collective, each waits on the host.
  void sum(std::span<double> values) { scalars_.sum(comm_->get(), streams_.stream(), values); }
  double average(double x) {
    return scalars_.average(comm_->get(), streams_.stream(), world_size(), x);
  }
  bool any(bool flag) { return scalars_.any(comm_->get(), streams_.stream(), flag); }

  /// Keeps where the model's bf16 gradients are (device memory) and how they are bucketed; the
  /// bucket stream takes the compute stream and makes its events.
  template <class M>
  requires std::same_as<typename M::memory_space, device_memory> &&
      std::same_as<typename M::parameter_type, trainkit::bf16>
  void attach(M& model, cuda::execution_context& ctx) {
    const auto grads = model.gradients();
    const auto buckets = model.gradient_buckets();
    std::vector<std::string> names;
    owned_.clear();
    for (const gradient_bucket& b : buckets) {
      for (const gradient_range& r : b.ranges) {
        if (r.offset + r.count > grads.size())
          throw config_error("nccl_allreduce: bucket '" + b.name + "' reaches past the " +
                             std::to_string(grads.size()) + " gradients");
        owned_.push_back(r);
      }
      names.push_back(b.name);
    }
    base_ = grads.data();
    buckets_.assign(buckets.begin(), buckets.end());
    streams_.attach(std::move(names), ctx.stream());
    op_.create(comm_->get());
  }

  /// Bucket i's last writer is enqueued on the compute stream: reduce it on the comm stream after.
  void bucket_ready(std::size_t i) {
    const cudaStream_t s = streams_.begin_bucket(i);
    // One group per bucket: NCCL launches its ranges as one operation.
    comm::nccl_group group(comm_->get());
    for (const gradient_range& r : buckets_[i].ranges) {
      trainkit::bf16* p = base_ + r.offset;
      for (std::size_t done = 0; done < r.count;) {  // counts are size_t, but stay in int pieces
        const std::size_t n = std::min<std::size_t>(r.count - done, INT_MAX);
        comm::nccl_check(
            ncclAllReduce(p + done, p + done, n, ncclBfloat16, op_.get(), comm_->get(), s),
            "ncclAllReduce", comm_->get());
        done += n;
      }
    }
    group.end();
  }

  /// Orders the compute stream after every bucket's reduction (no host wait). Throws
  /// config_error if a bucket was not published this step.
  void finish() { streams_.finish(comm_->get()); }

  /// Every bucket's ranges (after attach): every rank holds all the summed gradients.
  std::span<const gradient_range> owned_gradients() const noexcept { return owned_; }
  /// Nothing to combine: every rank computed every partial sum, from the same summed gradients.
  void combine_norm_partials(std::span<double>, cuda::execution_context&) noexcept {}

 private:
  const comm::nccl_communicator* comm_;
  trainkit::bf16* base_ = nullptr;        // gradients() of the attached model, device memory
  std::vector<gradient_bucket> buckets_;  // copied: publication order, ranges
  std::vector<gradient_range> owned_;     // every bucket's ranges
  comm::nccl_bucket_stream streams_{"nccl_allreduce"};
  comm::nccl_scalars scalars_;  // the rank-aware hooks
  comm::nccl_sum_op op_;        // the buckets' reduction: ncclSum unless pre-multiplied
};

static_assert(rank_aware<nccl_allreduce>);

}  // namespace trainkit::reduce
