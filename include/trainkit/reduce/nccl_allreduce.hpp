// trainkit/reduce/nccl_allreduce.hpp — data-parallel gradient averaging on GPUs with NCCL.
//
// One process per GPU; every rank runs the same trainer on its own slice of the global batch.
// When backward has enqueued the last kernel writing a gradient bucket (model/step_protocol.hpp),
// `bucket_ready` records an event on the compute stream, makes the reducer's own communication
// stream wait on it and enqueues an in-place ncclAllReduce (sum, bf16) on each of the bucket's
// ranges — so layer L's reduction runs on the network while backward computes layer L-1.
// `finish` records an event on the communication stream and makes the compute stream wait on it:
// the clipping step and the optimizer see the reduced gradients, and the host never waits. A sum
// is the whole reduction because the trainer scales each micro-step by 1/(micro-batches × ranks)
// (docs/distributed.md). The rank-aware hooks (reduce/concepts.hpp: the loss, the validation loss
// and the stop consensus) are small NCCL collectives on the communication stream with a host wait,
// a few times per step.
//
// The communicator comes from `nccl_communicator`: `single()` for one GPU (the seam a
// single-process run and the GPU test use), or reduce/nccl_mpi.hpp's `nccl_communicator_from_mpi`,
// which broadcasts NCCL's unique id over MPI as llm.c does.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <climits>
#include <concepts>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "trainkit/core/bf16.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/execution_context.hpp"
#include "trainkit/core/cuda/stream.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/model/step_protocol.hpp"
#include "trainkit/reduce/concepts.hpp"
#include "trainkit/reduce/detail/nccl_check.hpp"
#include "trainkit/reduce/detail/nccl_scalars.hpp"

namespace trainkit::reduce {

/// An owned NCCL communicator: this process's rank among `world_size` ranks, on the current
/// CUDA device (set it before constructing: one rank per GPU).
class nccl_communicator {
 public:
  /// Joins the clique named by `id` (ncclGetUniqueId on one rank, given to all).
  nccl_communicator(int world_size, int rank, const ncclUniqueId& id)
      : rank_(rank), size_(world_size) {
    if (world_size < 1 || rank < 0 || rank >= world_size)
      throw config_error("nccl_communicator: rank " + std::to_string(rank) + " of " +
                         std::to_string(world_size));
    detail::nccl_check(ncclCommInitRank(&comm_, world_size, id, rank), "ncclCommInitRank");
  }

  /// A world of one rank: nothing to exchange, every reduction is the identity.
  static nccl_communicator single() {
    ncclUniqueId id;
    detail::nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    return nccl_communicator(1, 0, id);
  }

  nccl_communicator(nccl_communicator&& o) noexcept
      : comm_(std::exchange(o.comm_, nullptr)), rank_(o.rank_), size_(o.size_) {}
  nccl_communicator& operator=(nccl_communicator&&) = delete;
  nccl_communicator(const nccl_communicator&) = delete;
  nccl_communicator& operator=(const nccl_communicator&) = delete;

  ~nccl_communicator() {
    if (comm_) (void)ncclCommDestroy(comm_);  // nothing useful to do with a failure here
  }

  ncclComm_t get() const noexcept { return comm_; }
  int rank() const noexcept { return rank_; }
  int world_size() const noexcept { return size_; }

 private:
  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
};

class nccl_allreduce {
 public:
  /// Reduces over `comm`, which must outlive the reducer.
  explicit nccl_allreduce(const nccl_communicator& comm) : comm_(&comm) {}

  nccl_allreduce(nccl_allreduce&&) noexcept = default;  // only before attach (the trainer's move)
  nccl_allreduce& operator=(nccl_allreduce&&) = delete;
  nccl_allreduce(const nccl_allreduce&) = delete;
  nccl_allreduce& operator=(const nccl_allreduce&) = delete;

  int rank() const noexcept { return comm_->rank(); }
  int world_size() const noexcept { return comm_->world_size(); }

  /// The rank-aware hooks (detail/nccl_scalars.hpp): collective, each waits on the host.
  void sum(std::span<double> values) { scalars_.sum(comm_->get(), comm_stream(), values); }
  double average(double x) {
    return scalars_.average(comm_->get(), comm_stream(), world_size(), x);
  }
  bool any(bool flag) { return scalars_.any(comm_->get(), comm_stream(), flag); }

  /// Keeps where the model's bf16 gradients are (device memory), how they are bucketed, and the
  /// compute stream; creates the communication stream and one event per bucket.
  template <class M>
  requires std::same_as<typename M::memory_space, device_memory> &&
      std::same_as<typename M::parameter_type, trainkit::bf16>
  void attach(M& model, cuda::execution_context& ctx) {
    const auto grads = model.gradients();
    base_ = grads.data();
    compute_ = ctx.stream();
    const auto buckets = model.gradient_buckets();
    buckets_.assign(buckets.begin(), buckets.end());
    for (const model::gradient_bucket& b : buckets_)
      for (const model::gradient_range& r : b.ranges)
        if (r.offset + r.count > grads.size())
          throw config_error("nccl_allreduce: bucket '" + b.name + "' reaches past the " +
                             std::to_string(grads.size()) + " gradients");
    ready_.assign(buckets_.size(), false);
    (void)comm_stream();
    bucket_done_.clear();
    for (std::size_t i = 0; i < buckets_.size(); ++i) bucket_done_.emplace_back(false);
    reduced_.emplace(false);
  }

  /// Bucket i's last writer is enqueued on the compute stream: reduce it on the comm stream after.
  void bucket_ready(std::size_t i) {
    if (base_ == nullptr) throw config_error("nccl_allreduce: bucket_ready before attach");
    if (i >= buckets_.size())
      throw config_error("nccl_allreduce: bucket " + std::to_string(i) + " of " +
                         std::to_string(buckets_.size()));
    if (ready_[i])
      throw config_error("nccl_allreduce: bucket '" + buckets_[i].name +
                         "' published twice in one step");
    ready_[i] = true;
    const cudaStream_t comm_stream = this->comm_stream();
    bucket_done_[i].record(compute_);
    TRAINKIT_CUDA_CHECK(cudaStreamWaitEvent(comm_stream, bucket_done_[i].get(), 0));
    // One group per bucket: NCCL launches its ranges as one operation.
    detail::nccl_check(ncclGroupStart(), "ncclGroupStart", comm_->get());
    for (const model::gradient_range& r : buckets_[i].ranges) {
      trainkit::bf16* p = base_ + r.offset;
      for (std::size_t done = 0; done < r.count;) {  // counts are size_t, but stay in int pieces
        const std::size_t n = std::min<std::size_t>(r.count - done, INT_MAX);
        detail::nccl_check(
            ncclAllReduce(p + done, p + done, n, ncclBfloat16, ncclSum, comm_->get(), comm_stream),
            "ncclAllReduce", comm_->get());
        done += n;
      }
    }
    detail::nccl_check(ncclGroupEnd(), "ncclGroupEnd", comm_->get());
  }

  /// Orders the compute stream after every bucket's reduction (no host wait). Throws
  /// config_error if a bucket was not published this step.
  void finish() {
    if (base_ == nullptr) throw config_error("nccl_allreduce: finish before attach");
    const std::size_t missing =
        std::size_t(std::find(ready_.begin(), ready_.end(), false) - ready_.begin());
    ready_.assign(buckets_.size(), false);  // the next step starts clean either way
    if (missing < buckets_.size())
      throw config_error("nccl_allreduce: bucket '" + buckets_[missing].name +
                         "' was not published before finish()");
    reduced_->record(comm_stream());
    TRAINKIT_CUDA_CHECK(cudaStreamWaitEvent(compute_, reduced_->get(), 0));
    // A peer that failed shows here (the host does not otherwise wait on NCCL).
    ncclResult_t async = ncclSuccess;
    detail::nccl_check(ncclCommGetAsyncError(comm_->get(), &async), "ncclCommGetAsyncError",
                       comm_->get());
    detail::nccl_check(async, "NCCL (asynchronous error)", comm_->get());
  }

 private:
  cudaStream_t comm_stream() {
    if (!comm_stream_) comm_stream_.emplace();
    return comm_stream_->get();
  }

  const nccl_communicator* comm_;
  trainkit::bf16* base_ = nullptr;  // gradients() of the attached model, device memory
  cudaStream_t compute_ = nullptr;
  std::vector<model::gradient_bucket> buckets_;  // copied: publication order, ranges
  std::vector<bool> ready_;                      // published this step
  std::optional<cuda::stream> comm_stream_;
  std::vector<cuda::event> bucket_done_;  // per bucket: its last writer on the compute stream
  std::optional<cuda::event> reduced_;    // all of the step's reductions on the comm stream
  detail::nccl_scalars scalars_;          // the rank-aware hooks
};

static_assert(rank_aware<nccl_allreduce>);

}  // namespace trainkit::reduce
