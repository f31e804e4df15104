// trainkit/reduce/nccl_zero1.hpp — the gradient half of ZeRO-1 on GPUs with NCCL.
//
// The CUDA twin of reduce/mpi_zero1.hpp. Rank r owns one contiguous shard of the flat buffer
// (comm/zero1_shards.hpp, cut on the norm-chunk grid) and needs the sum over ranks of that
// shard's gradients only. When backward has enqueued the last kernel writing a bucket
// (core/step_protocol.hpp), `bucket_ready` records an event on the compute stream, makes the
// reducer's communication stream wait on it, and enqueues one in-place ncclReduce (bf16, sum) per
// piece of the bucket's ranges that lies in one rank's shard, to that rank, grouped
// (comm::nccl_group) — so layer L is reduced while backward computes layer L-1, and the host
// never waits. ncclReduceScatter is not used: it wants equal pieces, and the chunk-grid shards
// differ by up to a chunk; per-owner reductions move the same bytes. In place, so the summed shard
// lands where the optimizer reads it and no receive buffer is needed; the rest of this rank's
// buffer keeps its own unreduced gradients and nothing reads it. `finish` makes the compute
// stream wait for the communication stream (an event). The other half, the all-gather of the
// updated parameters, is optim/zero1_adamw_cuda.hpp's, on the same communicator.
//
// Clipping is the trainer's (optim/device_grad_clip.hpp); this reducer states its two facts: it
// owns its shard (`owned_gradients`), so the step writes the partial sums of squares of that
// shard's norm chunks into its slots of a zeroed array of one double per chunk of the whole
// buffer; and the ranks' arrays combine by one in-place ncclAllReduce (sum, fp64) on the
// communication stream, ordered after the compute stream by events and before it again
// (`combine_norm_partials`: each slot has one non-zero addend, so the sum is exact whatever
// NCCL's order). The step then adds them in a fixed order. No host wait inside the step.
//
// What is bit-identical, and what is not:
//  - every rank computes the same norm and factor bits (the same partials, added in the same
//    order), and the norm of given summed gradients does not depend on the world size (each
//    chunk's partial comes from the same elements through the same tree);
//  - the norm is not the replicated layout's bit for bit (CUB's tree differs from the chunk
//    tree, optim/cuda/grad_clip.cuh), so one rank of ZeRO-1 and the single-GPU composition can
//    differ in the clip factor's last bit;
//  - the summed gradients are NCCL's: bf16 addition of the ranks' bf16 contributions, in NCCL's
//    order. Two ranks give c_0 + c_1 rounded once (commutative); with three or more the order is
//    NCCL's and not nccl_allreduce's. Unlike the CPU, 2 GPUs x 1 micro-batch do not reproduce
//    1 GPU x 2 micro-batches: gpt2_cuda adds its second micro-step onto the bf16 buffer with its
//    own rounding (docs/cuda.md, "Precision").
//
// Like nccl_allreduce it only sums (the trainer scales micro-steps by 1/(micro-batches x ranks)),
// and it is rank_aware and a checkpoint::save_communicator over the same communicator. Link
// trainkit::nccl. Never run on a GPU.
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
#include <vector>

#include "trainkit/checkpoint/concepts.hpp"
#include "trainkit/comm/gradient_layout.hpp"
#include "trainkit/comm/nccl_bucket_stream.hpp"
#include "trainkit/comm/nccl_check.hpp"
#include "trainkit/comm/nccl_communicator.hpp"
#include "trainkit/comm/nccl_group.hpp"
#include "trainkit/comm/nccl_scalars.hpp"
#include "trainkit/comm/nccl_sum_op.hpp"
#include "trainkit/comm/zero1_shards.hpp"
#include "trainkit/core/bf16.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/execution_context.hpp"
#include "trainkit/core/cuda/stream.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/reduce/concepts.hpp"

namespace trainkit::reduce {

class nccl_zero1 {
 public:
  /// Reduces over `comm`, which must outlive the reducer (and is the optimizer's too).
  /// `premultiply` scales every rank's gradients inside the sum (comm/nccl_sum_op.hpp): 1 in
  /// training; the one-GPU tests pass 2 so that a world of one launches a real reduction.
  explicit nccl_zero1(const comm::nccl_communicator& comm, float premultiply = 1.0f)
      : comm_(&comm), op_(premultiply, "nccl_zero1") {}

  nccl_zero1(nccl_zero1&&) noexcept = default;  // only before attach (the trainer's move)
  nccl_zero1& operator=(nccl_zero1&&) = delete;
  nccl_zero1(const nccl_zero1&) = delete;
  nccl_zero1& operator=(const nccl_zero1&) = delete;

  int rank() const noexcept { return comm_->rank(); }
  int world_size() const noexcept { return comm_->world_size(); }
  /// After finish() only this rank's shard holds sums: the ZeRO-1 optimizers' layout.
  static constexpr gradient_layout delivered_gradients = gradient_layout::reduce_scattered;

  /// The rank-aware hooks (comm/nccl_scalars.hpp): collective, each waits on the host.
  void sum(std::span<double> values) { scalars_.sum(comm_->get(), streams_.stream(), values); }
  double average(double x) {
    return scalars_.average(comm_->get(), streams_.stream(), world_size(), x);
  }
  bool any(bool flag) { return scalars_.any(comm_->get(), streams_.stream(), flag); }

  /// Keeps where the model's bf16 gradients are and the compute stream, and plans every bucket's
  /// per-owner reductions.
  template <class M>
  requires std::same_as<typename M::memory_space, device_memory> &&
      std::same_as<typename M::parameter_type, trainkit::bf16>
  void attach(M& model, cuda::execution_context& ctx) {
    const auto grads = model.gradients();
    base_ = grads.data();
    n_ = grads.size();
    compute_ = ctx.stream();
    op_.create(comm_->get());
    const std::vector<model::gradient_range> shards = comm::zero1_shards(n_, world_size());
    shard_ = shards[std::size_t(rank())];
    const auto buckets = model.gradient_buckets();
    std::vector<std::string> names;
    plans_.assign(buckets.size(), {});
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      names.push_back(buckets[b].name);
      for (const model::gradient_range& r : buckets[b].ranges) {
        if (r.offset + r.count > n_)
          throw config_error("nccl_zero1: bucket '" + buckets[b].name + "' reaches past the " +
                             std::to_string(n_) + " gradients");
        for (const comm::zero1_piece& p : comm::zero1_pieces(r, shards))
          for (std::size_t done = 0; done < p.count;) {  // size_t counts, kept in int pieces
            const std::size_t k = std::min<std::size_t>(p.count - done, INT_MAX);
            plans_[b].push_back({p.offset + done, k, p.owner});
            done += k;
          }
      }
    }
    streams_.attach(std::move(names), compute_);
    partials_written_.emplace(false);
    partials_summed_.emplace(false);
  }

  /// Bucket i's last writer is enqueued on the compute stream: reduce each piece of it onto its
  /// shard's owner, on the communication stream, after it.
  void bucket_ready(std::size_t i) {
    const cudaStream_t s = streams_.begin_bucket(i);
    // One group per bucket: NCCL launches its pieces as one operation. Every rank has the same
    // plan, so every rank issues the same reductions in the same order.
    comm::nccl_group group(comm_->get());
    for (const piece& p : plans_[i]) {
      trainkit::bf16* at = base_ + p.offset;  // in place: the owner's sum replaces its own part
      comm::nccl_check(
          ncclReduce(at, at, p.count, ncclBfloat16, op_.get(), p.owner, comm_->get(), s),
          "ncclReduce", comm_->get());
    }
    group.end();
  }

  /// Orders the compute stream after every bucket's reduction (no host wait). Throws
  /// config_error if a bucket was not published this step.
  void finish() { streams_.finish(comm_->get()); }

  /// This rank's shard (after attach): the only gradients it holds summed.
  std::span<const model::gradient_range> owned_gradients() const noexcept { return {&shard_, 1}; }

  /// The element-wise sum over ranks of the clipping step's partial sums of squares (device
  /// memory), in place: on the communication stream after the context's work so far, and the
  /// context's stream waits for it. Each rank's are non-zero only in its own shard's chunks, so
  /// every slot has one non-zero addend and the sum is exact.
  void combine_norm_partials(std::span<double> partials, cuda::execution_context& ctx) {
    const cudaStream_t compute = ctx.stream(), comm_stream = streams_.stream();
    partials_written_->record(compute);
    TRAINKIT_CUDA_CHECK(cudaStreamWaitEvent(comm_stream, partials_written_->get(), 0));
    if (!partials.empty())
      comm::nccl_check(ncclAllReduce(partials.data(), partials.data(), partials.size(), ncclFloat64,
                                     ncclSum, comm_->get(), comm_stream),
                       "ncclAllReduce (norm partials)", comm_->get());
    partials_summed_->record(comm_stream);
    TRAINKIT_CUDA_CHECK(cudaStreamWaitEvent(compute, partials_summed_->get(), 0));
  }

  /// This rank's shard of the gradient buffer (after attach).
  model::gradient_range shard() const noexcept { return shard_; }

  /// Device bytes this reducer allocated beside the model: none (the reductions are in place;
  /// the norm's partial sums are the clipping step's, optim::device_grad_clip::buffer_bytes).
  std::size_t buffer_bytes() const noexcept { return 0; }

 private:
  /// One ncclReduce: gradients [offset, offset + count), all inside rank `owner`'s shard.
  struct piece {
    std::size_t offset = 0;
    std::size_t count = 0;
    int owner = 0;
  };

  const comm::nccl_communicator* comm_;
  trainkit::bf16* base_ = nullptr;  // gradients() of the attached model, device memory
  std::size_t n_ = 0;
  cudaStream_t compute_ = nullptr;
  model::gradient_range shard_{};          // this rank's
  std::vector<std::vector<piece>> plans_;  // per bucket, in publication order
  comm::nccl_bucket_stream streams_{"nccl_zero1"};
  std::optional<cuda::event> partials_written_, partials_summed_;  // the norm's hand-overs
  comm::nccl_scalars scalars_;                                     // the rank-aware hooks
  comm::nccl_sum_op op_;  // the buckets' reduction: ncclSum unless pre-multiplied
};

static_assert(rank_aware<nccl_zero1>);
// Its collectives are what a sharded checkpoint of zero1_adamw_cuda's state agrees over.
static_assert(checkpoint::save_communicator<nccl_zero1>);

}  // namespace trainkit::reduce
