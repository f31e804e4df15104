// trainkit/optim/zero1_adamw_cuda.hpp — the optimizer half of ZeRO-1 on GPUs: AdamW over this
// rank's shard with fp32 master weights and moments of the shard only, then an all-gather of the
// updated bf16 parameters over NCCL.
//
// The CUDA twin of optim/zero1_adamw_cpu.hpp, and adamw_cuda restricted to a shard: the same
// kernel (optim/cuda/adamw.cuh) runs over the shard's elements, its pointers offset to the shard's
// start, with the segment table of the model's layout clipped to the shard (zero1_clip_layout +
// decay_segments), so weight decay falls on the same elements, and the stochastic rounding hash
// fed the elements' whole-buffer indices. So for the same summed gradients and clip factor every
// element is updated exactly as adamw_cuda updates it, on whichever rank. Per rank it keeps
// 12 bytes × the shard (master, m, v) instead of 12 × the model.
//
// `update` is enqueued on the execution context's stream after the clipping step
// (reduce/nccl_zero1.hpp), which left {norm, factor} in device memory: no host synchronisation.
// Then every rank's updated shard is broadcast from its owner into every rank's parameters, one
// in-place ncclBroadcast per rank, grouped (comm::nccl_group; an all-gather of unequal pieces:
// ncclAllGather wants equal ones, and the chunk-grid shards are not), on the same stream. It is in
// the optimizer phase and does not overlap the next forward yet. Pair it with reduce::nccl_zero1 on
// the same nccl_communicator: both cut the buffer with zero1_shard.
//
// Needs nvcc; link trainkit::nccl. Never run on a GPU.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "trainkit/checkpoint/concepts.hpp"
#include "trainkit/comm/gradient_layout.hpp"
#include "trainkit/comm/nccl_check.hpp"
#include "trainkit/comm/nccl_communicator.hpp"
#include "trainkit/comm/nccl_group.hpp"
#include "trainkit/core/bf16.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/execution_context.hpp"
#include "trainkit/core/cuda/stream.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/optim/adamw_config.hpp"
#include "trainkit/optim/adamw_cuda.hpp"
#include "trainkit/optim/clip_scale.hpp"
#include "trainkit/optim/cuda/adamw.cuh"
#include "trainkit/optim/zero1_shards.hpp"

namespace trainkit::optim {

/// adamw_cuda's settings and the communicator the state is sharded over (no default: a NCCL
/// communicator is made by the program, after it selected its GPU). Built from an
/// adamw_cuda_config (or a plain adamw_config) and the communicator.
struct zero1_adamw_cuda_config {
  adamw_config adamw{};
  adamw_cuda_options options{};
  const comm::nccl_communicator* comm = nullptr;  // must outlive the optimizer

  zero1_adamw_cuda_config() = default;
  zero1_adamw_cuda_config(adamw_cuda_config a, const comm::nccl_communicator& c)
      : adamw(a.adamw), options(a.options), comm(&c) {}
};

class zero1_adamw_cuda {
  using bf16_t = kernels::bf16_t;

 public:
  using memory_space = device_memory;
  using parameter_type = trainkit::bf16;
  using config_type = zero1_adamw_cuda_config;
  /// It updates its shard from the sums reduce::nccl_zero1 leaves there; nothing else is summed.
  static constexpr gradient_layout expected_gradients = gradient_layout::reduce_scattered;

  /// fp32 master weights of this rank's shard from the model's bf16 parameters, zeroed moments of
  /// the shard, the segment table of the layout clipped to it. Throws config_error (no
  /// communicator, a bad config, a layout the kernel cannot take) or cuda_error.
  template <bf16_device_model M>
  zero1_adamw_cuda(const M& model, zero1_adamw_cuda_config config)
      : config_(config.adamw),
        options_(config.options),
        comm_(checked(config.comm)),
        n_(static_cast<std::size_t>(model.num_parameters())),
        shards_(zero1_shards(n_, comm_->world_size())),
        shard_(shards_[std::size_t(comm_->rank())]),
        layout_(zero1_clip_layout(model.parameter_layout(), shard_)),
        descriptor_{std::uint64_t(comm_->world_size()), std::uint64_t(comm_->rank()), shard_.offset,
                    shard_.count} {
    config_.validate();
    table_ = detail::adamw_segment_table(layout_, shard_.count, config_, "zero1_adamw_cuda");
    master_ = cuda::device_buffer<float>(shard_.count);
    m_ = cuda::device_buffer<float>(shard_.count);
    v_ = cuda::device_buffer<float>(shard_.count);
    m_.fill_bytes_async(0, stream_.get());
    v_.fill_bytes_async(0, stream_.get());
    // parameters() is not const in the Model concept; it is only read here.
    load_master(const_cast<M&>(model).parameters());
  }

  zero1_adamw_cuda(zero1_adamw_cuda&&) noexcept = default;
  zero1_adamw_cuda& operator=(zero1_adamw_cuda&&) noexcept = default;
  zero1_adamw_cuda(const zero1_adamw_cuda&) = delete;
  zero1_adamw_cuda& operator=(const zero1_adamw_cuda&) = delete;

  /// AdamW over this rank's shard from its summed gradients times the device factor
  /// `clip.norm_and_factor[1]`, then every rank's shard broadcast into every rank's parameters.
  /// Enqueued on the context's stream; collective (every rank calls it). Throws config_error
  /// when the restored state is another rank's or world size's shard.
  template <bf16_device_model M>
  void update(M& model, float lr, const clip_scale<device_memory>& clip,
              cuda::execution_context& ctx) {
    check_sizes(model);
    check_descriptor();
    if (!clip.norm_and_factor)
      throw config_error("zero1_adamw_cuda::update: no clipping factor given");
    const cudaStream_t s = ctx.stream();
    ++step_;
    kernels::update_constants k = detail::adamw_step_constants(config_, options_, step_);
    k.lr = lr;
    k.index_offset = shard_.offset;  // stochastic rounding hashes the whole-buffer index
    bf16_t* params = as_device(model.parameters().data());
    const bf16_t* grads = as_device(model.gradients().data());
    kernels::adamw_update(params + shard_.offset, master_.data(), m_.data(), v_.data(),
                          grads + shard_.offset, clip.norm_and_factor, table_, k, s);
    // The all-gather: each owner's shard to every rank, in place. Every rank skips the same
    // empty shards, so all issue the same broadcasts.
    const ncclComm_t comm = comm_->get();
    comm::nccl_group group(comm);
    for (std::size_t r = 0; r < shards_.size(); ++r) {
      if (shards_[r].count == 0) continue;
      bf16_t* at = params + shards_[r].offset;
      comm::nccl_check(ncclBroadcast(at, at, shards_[r].count, ncclBfloat16, int(r), comm, s),
                       "ncclBroadcast (parameters)", comm);
    }
    group.end();
  }

  /// "optim.zero1.master", "optim.zero1.m", "optim.zero1.v" (this rank's shard, f32 {count},
  /// device memory), "optim.step" (u64 {1}, host) and "optim.zero1.shard" (u64 {4}: world size,
  /// rank, offset, count), viewing this optimizer's own storage. The names differ from
  /// adamw_cuda's so that neither takes the other's state for its own through a plain checkpoint;
  /// a restored shard of another rank or world size is refused at the next update.
  std::vector<state_tensor> state() {
    std::vector<state_tensor> out = shard_tensors("optim.zero1.");
    out.push_back(make_state_tensor("optim.step", std::span<std::uint64_t>(&step_, 1), {1}));
    out.push_back(make_state_tensor("optim.zero1.shard", std::span<std::uint64_t>(descriptor_),
                                    {std::int64_t(descriptor_.size())}));
    return out;
  }

  /// The state as a sharded checkpoint holds it (checkpoint::sharded_optimizer): "optim.step" in
  /// the common part, this rank's slices of "optim.master", "optim.m", "optim.v" (adamw_cuda's
  /// names, shape {count}, device memory) and the range they cover. So any world size resumes
  /// it, adamw_cuda (one GPU or DDP) resumes it reassembled, and this optimizer resumes an
  /// adamw_cuda checkpoint's whole tensors sliced. Device tensors: save and load through
  /// host_staged_checkpointer.
  checkpoint::optimizer_shard sharded_state() {
    checkpoint::optimizer_shard out;
    out.common.push_back(make_state_tensor("optim.step", std::span<std::uint64_t>(&step_, 1), {1}));
    out.shard = shard_tensors("optim.");
    out.range = {comm_->rank(), comm_->world_size(), shard_.offset, shard_.count, n_};
    return out;
  }

  /// Re-reads this shard's master weights from the model's bf16 parameters (after replacing
  /// them). Moments and step count are kept.
  template <bf16_device_model M>
  void reload_master(M& model) {
    load_master(model.parameters());
  }

  /// This rank's fp32 master weights, copied to the host (tests).
  std::vector<float> master_to_host() const {
    std::vector<float> out(shard_.count);
    if (!out.empty()) cuda::copy_to_host(std::span<float>(out), master_.data(), stream_.get());
    return out;
  }

  std::uint64_t steps_taken() const noexcept { return step_; }
  const adamw_config& config() const noexcept { return config_; }
  const adamw_cuda_options& options() const noexcept { return options_; }
  int rank() const noexcept { return comm_->rank(); }
  int world_size() const noexcept { return comm_->world_size(); }
  /// This rank's shard of the flat buffer.
  model::gradient_range shard() const noexcept { return shard_; }
  /// Bytes of optimizer state this rank holds on the device (master weights and both moments of
  /// its shard, fp32); one GPU's adamw_cuda holds 12 × num_parameters, the sum of every rank's.
  std::size_t state_bytes() const noexcept { return master_.bytes() + m_.bytes() + v_.bytes(); }

 private:
  static const comm::nccl_communicator* checked(const comm::nccl_communicator* comm) {
    if (comm == nullptr)
      throw config_error(
          "zero1_adamw_cuda: zero1_adamw_cuda_config.comm is not set (the NCCL "
          "communicator its reducer uses)");
    return comm;
  }

  std::vector<state_tensor> shard_tensors(const std::string& prefix) {
    const auto n = static_cast<std::int64_t>(shard_.count);
    auto device_tensor = [&](const char* name, cuda::device_buffer<float>& buf) {
      state_tensor t = make_state_tensor(prefix + name, buf.device_span(), {n});
      t.on_device = true;
      return t;
    };
    return {device_tensor("master", master_), device_tensor("m", m_), device_tensor("v", v_)};
  }

  template <class M>
  void check_sizes(M& model) const {
    if (model.parameters().size() != n_ || model.gradients().size() != n_)
      throw config_error("zero1_adamw_cuda: model has " +
                         std::to_string(model.parameters().size()) + " parameters and " +
                         std::to_string(model.gradients().size()) +
                         " gradients but the optimizer was built for " + std::to_string(n_));
  }

  void check_descriptor() const {
    const std::uint64_t mine[4] = {std::uint64_t(comm_->world_size()), std::uint64_t(comm_->rank()),
                                   shard_.offset, shard_.count};
    for (std::size_t k = 0; k < 4; ++k)
      if (descriptor_[k] != mine[k])
        throw config_error("zero1_adamw_cuda: the restored optimizer state is rank " +
                           std::to_string(descriptor_[1]) + " of " +
                           std::to_string(descriptor_[0]) + "'s shard, not this rank's (rank " +
                           std::to_string(comm_->rank()) + " of " +
                           std::to_string(comm_->world_size()) + ")");
  }

  void load_master(std::span<trainkit::bf16> params) {
    if (params.size() != n_)
      throw config_error("zero1_adamw_cuda: model has " + std::to_string(params.size()) +
                         " parameters, the optimizer was built for " + std::to_string(n_));
    kernels::bf16_to_float(master_.data(), as_device(params.data()) + shard_.offset, shard_.count,
                           stream_.get());
    stream_.synchronize();
  }

  static const bf16_t* as_device(const trainkit::bf16* p) noexcept {
    return reinterpret_cast<const bf16_t*>(p);
  }
  static bf16_t* as_device(trainkit::bf16* p) noexcept { return reinterpret_cast<bf16_t*>(p); }

  adamw_config config_;
  adamw_cuda_options options_;
  const comm::nccl_communicator* comm_;
  std::size_t n_ = 0;
  std::vector<model::gradient_range> shards_;  // every rank's, in rank order
  model::gradient_range shard_{};              // this rank's
  std::vector<tensor_info> layout_;            // the model's layout clipped to the shard
  std::vector<std::uint64_t> descriptor_;      // world size, rank, offset, count (restorable)
  kernels::segment_table table_{};
  cuda::stream stream_{true};          // construction and copies outside the trainer's step
  cuda::device_buffer<float> master_;  // (count,) fp32 master weights of the shard
  cuda::device_buffer<float> m_;       // (count,) first moment
  cuda::device_buffer<float> v_;       // (count,) second moment
  std::uint64_t step_ = 0;
};

static_assert(checkpoint::sharded_optimizer<zero1_adamw_cuda>);

}  // namespace trainkit::optim
