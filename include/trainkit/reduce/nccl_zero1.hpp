// trainkit/reduce/nccl_zero1.hpp — the gradient half of ZeRO-1 on GPUs with NCCL.
//
// The CUDA twin of reduce/mpi_zero1.hpp. Rank r owns one contiguous shard of the flat buffer
// (optim/zero1_shards.hpp, cut on the norm-chunk grid) and needs the sum over ranks of that
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
// The clipping step (`clip`, at the trainer's threshold; the plain norm over the buckets would read
// unreduced gradients): each rank writes the partial sums of squares of its shard's norm chunks
// (reduce/cuda/zero1_norm.cuh) into its slots of a zeroed array of one double per chunk of the
// whole buffer; one ncclAllReduce (sum, fp64) gives every rank every partial (each slot has one
// non-zero addend, so the sum is exact whatever NCCL's order); one block adds them in a fixed
// order; a one-thread kernel turns the sum into {norm, factor} (optim/cuda/adamw.cuh, grad_clip's
// rule) in device memory, where the optimizer's update reads it; the norm goes to pinned memory
// for `norm()` after the trainer's one synchronisation. No host wait inside the step.
//
// What is bit-identical, and what is not:
//  - every rank computes the same norm and factor bits (the same partials, added in the same
//    order), and the norm of given summed gradients does not depend on the world size (each
//    chunk's partial comes from the same elements through the same tree);
//  - the norm is not adamw_cuda's / device_grad_clip's bit for bit (CUB's tree differs), so one
//    rank of ZeRO-1 and the single-GPU composition can differ in the clip factor's last bit;
//  - the summed gradients are NCCL's: bf16 addition of the ranks' bf16 contributions, in NCCL's
//    order. Two ranks give c_0 + c_1 rounded once (commutative); with three or more the order is
//    NCCL's and not nccl_allreduce's. Unlike the CPU, 2 GPUs x 1 micro-batch do not reproduce
//    1 GPU x 2 micro-batches: gpt2_cuda adds its second micro-step onto the bf16 buffer with its
//    own rounding (docs/cuda.md, "Precision").
//
// Like nccl_allreduce it only sums (the trainer scales micro-steps by 1/(micro-batches x ranks)),
// and it is rank_aware and a checkpoint::save_communicator over the same communicator. Needs
// nvcc (its norm kernels); link trainkit::nccl. Never run on a GPU.
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
#include "trainkit/core/bf16.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/execution_context.hpp"
#include "trainkit/core/cuda/stream.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/optim/clip_scale.hpp"
#include "trainkit/optim/cuda/adamw.cuh"
#include "trainkit/optim/zero1_shards.hpp"
#include "trainkit/reduce/concepts.hpp"
#include "trainkit/reduce/cuda/zero1_norm.cuh"

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

  /// Keeps where the model's bf16 gradients are and the compute stream, plans every bucket's
  /// per-owner reductions, and allocates the norm's partial sums (zeroed on the compute stream).
  template <class M>
  requires std::same_as<typename M::memory_space, device_memory> &&
      std::same_as<typename M::parameter_type, trainkit::bf16>
  void attach(M& model, cuda::execution_context& ctx) {
    const auto grads = model.gradients();
    base_ = grads.data();
    n_ = grads.size();
    compute_ = ctx.stream();
    op_.create(comm_->get());
    const std::vector<model::gradient_range> shards = optim::zero1_shards(n_, world_size());
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
        for (const optim::zero1_piece& p : optim::zero1_pieces(r, shards))
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
    // The norm: one double per chunk of the whole buffer; this rank writes the slots of its
    // shard's chunks, the others stay 0 (the all-reduce's output is a second array).
    my_chunks_ = optim::zero1_norm_chunks(shard_);
    total_chunks_ = optim::zero1_norm_chunks({0, n_}).count;
    partials_ = cuda::device_buffer<double>(std::max<std::size_t>(total_chunks_, 1));
    all_partials_ = cuda::device_buffer<double>(std::max<std::size_t>(total_chunks_, 1));
    partials_.fill_bytes_async(0, compute_);
    sum_sq_ = cuda::device_buffer<double>(1);
    norm_and_factor_ = cuda::device_buffer<float>(2);
    host_norm_ = cuda::pinned_buffer<float>(2);
    host_norm_[0] = host_norm_[1] = 0.0f;
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

  /// The clipping step (gradient_reducer_for), enqueued on the context's stream after
  /// finish(): partial sums of this rank's chunks, their all-reduce on the communication stream,
  /// the fixed-order sum and {norm, factor} into device memory. `grads` is the attached model's
  /// buffer (the buckets tile it: the model's contract).
  optim::clip_scale<device_memory> clip(std::span<const trainkit::bf16> grads,
                                        std::span<const model::gradient_bucket>, double max_norm,
                                        cuda::execution_context& ctx) {
    if (grads.data() != base_ || grads.size() != n_)
      throw config_error("nccl_zero1: clip() of a gradient buffer it was not attached to");
    const cudaStream_t compute = ctx.stream(), comm_stream = streams_.stream();
    const auto* g = reinterpret_cast<const kernels::bf16_t*>(base_);
    kernels::chunk_sums_of_squares(partials_.data() + my_chunks_.offset, g, shard_.offset,
                                   shard_.offset + shard_.count, compute);
    partials_written_->record(compute);
    TRAINKIT_CUDA_CHECK(cudaStreamWaitEvent(comm_stream, partials_written_->get(), 0));
    if (total_chunks_ > 0)
      comm::nccl_check(ncclAllReduce(partials_.data(), all_partials_.data(), total_chunks_,
                                     ncclFloat64, ncclSum, comm_->get(), comm_stream),
                       "ncclAllReduce (norm partials)", comm_->get());
    partials_summed_->record(comm_stream);
    TRAINKIT_CUDA_CHECK(cudaStreamWaitEvent(compute, partials_summed_->get(), 0));
    if (total_chunks_ > 0)
      kernels::sum_partials(sum_sq_.data(), all_partials_.data(), total_chunks_, compute);
    else
      sum_sq_.fill_bytes_async(0, compute);
    optim::kernels::clip_factor(norm_and_factor_.data(), sum_sq_.data(), max_norm, compute);
    TRAINKIT_CUDA_CHECK(cudaMemcpyAsync(host_norm_.data(), norm_and_factor_.data(),
                                        2 * sizeof(float), cudaMemcpyDeviceToHost, compute));
    return {norm_and_factor_.data()};
  }

  /// The norm before clipping of the last clip(), the same on every rank: valid once its context
  /// has been synchronised.
  double norm() const noexcept { return host_norm_.size() ? double(host_norm_[0]) : 0.0; }

  /// This rank's shard of the gradient buffer (after attach).
  model::gradient_range shard() const noexcept { return shard_; }

  /// Device bytes this reducer allocated beside the model: the norm's two arrays of one double
  /// per chunk (no receive buffer: the reductions are in place).
  std::size_t buffer_bytes() const noexcept {
    return partials_.bytes() + all_partials_.bytes() + sum_sq_.bytes() + norm_and_factor_.bytes();
  }

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
  model::gradient_range my_chunks_{};         // chunk indices of this rank's shard
  std::size_t total_chunks_ = 0;              // chunks of the whole buffer
  cuda::device_buffer<double> partials_;      // (total_chunks,) this rank's slots, zeros elsewhere
  cuda::device_buffer<double> all_partials_;  // (total_chunks,) every rank's, after the all-reduce
  cuda::device_buffer<double> sum_sq_;        // (1,) Σ g²
  cuda::device_buffer<float> norm_and_factor_;  // (2,) ‖g‖, clipping factor
  cuda::pinned_buffer<float> host_norm_;        // (2,)
  comm::nccl_scalars scalars_;                  // the rank-aware hooks
  comm::nccl_sum_op op_;  // the buckets' reduction: ncclSum unless pre-multiplied
};

static_assert(rank_aware<nccl_zero1>);
// Its collectives are what a sharded checkpoint of zero1_adamw_cuda's state agrees over.
static_assert(checkpoint::save_communicator<nccl_zero1>);

}  // namespace trainkit::reduce
