// trainkit/comm/nccl_bucket_stream.hpp — the stream and event machinery both NCCL reducers run
// their bucket reductions on.
//
// The trainer's compute stream runs backward; the reducer's own communication stream runs the
// collectives. When backward has enqueued the last kernel writing gradient bucket i
// (core/step_protocol.hpp), `begin_bucket(i)` records an event on the compute stream and makes the
// communication stream wait on it, then hands the communication stream back for the bucket's
// collectives — so layer L is reduced while backward computes layer L-1. `finish` records one
// event on the communication stream and makes the compute stream wait on it (whatever the step
// enqueues next sees the reduced gradients, and the host never waits), then asks NCCL for an
// asynchronous error: a failed peer shows there. It also keeps the bookkeeping of publication: a
// bucket published twice in a step, one of another model's or one missing at finish is a
// config_error naming the reducer and the bucket.
//
// nccl_allreduce and nccl_zero1 differ only in the collectives they enqueue per bucket.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainkit/comm/nccl_check.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/stream.hpp"
#include "trainkit/core/error.hpp"

namespace trainkit::comm {

class nccl_bucket_stream {
 public:
  /// `owner` names the reducer in messages ("nccl_allreduce").
  explicit nccl_bucket_stream(std::string owner) : owner_(std::move(owner)) {}

  nccl_bucket_stream(nccl_bucket_stream&&) noexcept = default;  // only before attach
  nccl_bucket_stream& operator=(nccl_bucket_stream&&) = delete;
  nccl_bucket_stream(const nccl_bucket_stream&) = delete;
  nccl_bucket_stream& operator=(const nccl_bucket_stream&) = delete;

  /// The buckets' names in publication-index order and the compute stream backward runs on.
  /// Creates the communication stream (if not yet) and one event per bucket.
  void attach(std::vector<std::string> names, cudaStream_t compute) {
    names_ = std::move(names);
    compute_ = compute;
    ready_.assign(names_.size(), false);
    (void)stream();
    bucket_done_.clear();
    for (std::size_t i = 0; i < names_.size(); ++i) bucket_done_.emplace_back(false);
    reduced_.emplace(false);
    attached_ = true;
  }

  bool attached() const noexcept { return attached_; }
  cudaStream_t compute_stream() const noexcept { return compute_; }

  /// The communication stream (created on first use: the scalar hooks may run before attach).
  cudaStream_t stream() {
    if (!stream_) stream_.emplace();
    return stream_->get();
  }

  /// Bucket i's last writer is enqueued on the compute stream: orders the communication stream
  /// after it and returns that stream, where the caller enqueues the bucket's collectives.
  /// Throws config_error before attach, for an index out of range or a second publication.
  cudaStream_t begin_bucket(std::size_t i) {
    if (!attached_) throw config_error(owner_ + ": bucket_ready before attach");
    if (i >= names_.size())
      throw config_error(owner_ + ": bucket " + std::to_string(i) + " of " +
                         std::to_string(names_.size()));
    if (ready_[i])
      throw config_error(owner_ + ": bucket '" + names_[i] + "' published twice in one step");
    ready_[i] = true;
    const cudaStream_t comm_stream = stream();
    bucket_done_[i].record(compute_);
    TRAINKIT_CUDA_CHECK(cudaStreamWaitEvent(comm_stream, bucket_done_[i].get(), 0));
    return comm_stream;
  }

  /// Orders the compute stream after everything enqueued on the communication stream (no host
  /// wait) and checks `comm` for an asynchronous error. Throws config_error if a bucket was not
  /// published this step; the next step starts clean either way.
  void finish(ncclComm_t comm) {
    if (!attached_) throw config_error(owner_ + ": finish before attach");
    const std::size_t missing =
        std::size_t(std::find(ready_.begin(), ready_.end(), false) - ready_.begin());
    ready_.assign(names_.size(), false);
    if (missing < names_.size())
      throw config_error(owner_ + ": bucket '" + names_[missing] +
                         "' was not published before finish()");
    reduced_->record(stream());
    TRAINKIT_CUDA_CHECK(cudaStreamWaitEvent(compute_, reduced_->get(), 0));
    nccl_check_async(comm);
  }

 private:
  std::string owner_;
  std::vector<std::string> names_;  // per bucket, for messages
  cudaStream_t compute_ = nullptr;
  bool attached_ = false;
  std::vector<bool> ready_;  // published this step
  std::optional<cuda::stream> stream_;
  std::vector<cuda::event> bucket_done_;  // per bucket: its last writer on the compute stream
  std::optional<cuda::event> reduced_;    // all of the step's collectives on the comm stream
};

}  // namespace trainkit::comm
