// trainkit/optim/sharded_muon_cuda.hpp — the Muon family over NCCL ranks (one GPU each): each rank
// orthogonalises its share of the matrices, then every rank gathers the others'.
//
// The CUDA twin of optim/sharded_muon_cpu.hpp, and muon_cuda constructed for a share. Ranks split
// the matrices, not the elements, because Newton–Schulz is per matrix: rank r updates matrices
// [first_r, last_r) of the layout-ordered list (optim::muon_shards, balanced by Newton–Schulz
// FLOPs; optim::muon_share_layout adds where each share lies in the packed buffer of every
// matrix) and keeps the momentum and fp32 master weights of those only, one contiguous range of
// the packed buffers, the shape a sharded checkpoint stores. AdamW's half (embeddings, head,
// norms, biases) is small and updated whole on every rank from the same gradients, so its master
// weights and moments are the common part of the checkpoint. NorMuon's second moment (fp32, per
// line of each owned matrix) is local to its owner too; it travels in the sharded checkpoint as
// sharded_muon_cpu's does: "optim.muon.normuon.second_moment" in the momentum's range (matrix i's
// lines at its momentum offset, zeros after), and "optim.muon.normuon" (u64 {1}) in the common
// part, so a checkpoint of the other NorMuon setting is refused naming muon_config.normuon.
// After the update, on the compute
// stream and with no host synchronisation:
//   1. muon_pack copies this rank's updated bf16 matrices into their places in a packed bf16
//      buffer of every matrix (muon_matrices' state order);
//   2. one in-place ncclBroadcast per rank with a non-empty share, from its owner, grouped
//      (comm::nccl_group): an all-gather of unequal pieces, as zero1_adamw_cuda's (ncclAllGather
//      wants equal ones, and whole matrices balanced by cost are not);
//   3. muon_unpack writes every matrix from the packed buffer into the model's parameters.
// The gather moves bf16, 2 bytes per matrix element; it is in the optimizer phase and does not
// overlap the next forward.
//
// It reads the whole summed gradients, so it pairs with reduce::nccl_allreduce (expected_gradients
// is gradient_layout::replicated, which the trainer checks against the reducer at compile time:
// under reduce::nccl_zero1 it does not compile). The host arithmetic of the shares and the gather
// (muon_share_layout, muon_pack, muon_unpack) is tested on the CPU (tests/optim/
// test_muon_shares.cpp); the device path by tests/optim/test_sharded_muon_cuda.cu. Needs nvcc;
// link trainkit::nccl. Never run on a GPU.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
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
#include "trainkit/core/tensor.hpp"
#include "trainkit/optim/adamw_cuda.hpp"
#include "trainkit/optim/clip_scale.hpp"
#include "trainkit/optim/cuda/muon_kernels.cuh"
#include "trainkit/optim/muon_config.hpp"
#include "trainkit/optim/muon_cuda.hpp"
#include "trainkit/optim/muon_matrices.hpp"

namespace trainkit::optim {

/// Muon's settings and the communicator the matrices are shared over (no default: a NCCL
/// communicator is made by the program after it selected its GPU; the reducer's).
struct sharded_muon_cuda_config {
  muon_config muon{};
  const comm::nccl_communicator* comm = nullptr;  // must outlive the optimizer

  sharded_muon_cuda_config() = default;
  sharded_muon_cuda_config(muon_config m, const comm::nccl_communicator& c) : muon(m), comm(&c) {}
};

class sharded_muon_cuda {
  using bf16_t = __nv_bfloat16;

 public:
  using memory_space = device_memory;
  using parameter_type = trainkit::bf16;
  using config_type = sharded_muon_cuda_config;
  /// Its state is sharded, its gradients are not: every rank reads all of them (an all-reduce).
  static constexpr gradient_layout expected_gradients = gradient_layout::replicated;

  /// This rank's share of the matrices (momentum and master weights of those only), AdamW's half
  /// whole, the packed gather buffer and its table. Synchronises (muon_cuda's set-up). Throws
  /// config_error (no communicator, a bad config or layout) or cuda_error.
  template <bf16_device_model M>
  sharded_muon_cuda(const M& model, sharded_muon_cuda_config config)
      : comm_(checked(config.comm)),
        shares_(
            muon_share_layout(muon_matrices(model.parameter_layout(),
                                            checked(config.muon).muon_roles, "sharded_muon_cuda"),
                              comm_->world_size(), config.muon.ns_steps)),
        share_(shares_[std::size_t(comm_->rank())]),
        inner_(model, config.muon, share_.matrices),
        descriptor_{std::uint64_t(comm_->world_size()), std::uint64_t(comm_->rank()),
                    share_.packed.offset, share_.packed.count} {
    const std::vector<kernels::matrix_entry> table = gather_table(inner_.matrices());
    table_ = cuda::device_buffer<kernels::matrix_entry>(table.size());
    gathered_ = cuda::device_buffer<bf16_t>(inner_.momentum_elements());
    if (!table.empty()) {
      cuda::copy_to_device(table_.data(), std::span<const kernels::matrix_entry>(table),
                           stream_.get());
      gathered_.fill_bytes_async(0, stream_.get());
    }
    if (config.muon.normuon) {
      line_places_ = normuon_line_places(inner_.matrices(), share_.matrices, share_.packed.offset);
      second_moment_by_matrix_ = cuda::device_buffer<float>(share_.packed.count);
      if (share_.packed.count > 0) second_moment_by_matrix_.fill_bytes_async(0, stream_.get());
    }
    stream_.synchronize();
  }

  sharded_muon_cuda(sharded_muon_cuda&&) noexcept = default;
  sharded_muon_cuda& operator=(sharded_muon_cuda&&) noexcept = default;
  sharded_muon_cuda(const sharded_muon_cuda&) = delete;
  sharded_muon_cuda& operator=(const sharded_muon_cuda&) = delete;

  /// muon_cuda's update of AdamW's half and of this rank's matrices, then every rank's matrices
  /// gathered into every rank's parameters. Enqueued on the context's stream; collective (every
  /// rank calls it). Throws config_error when the restored state is another rank's share.
  template <bf16_device_model M>
  void update(M& model, float lr, const clip_scale<device_memory>& clip,
              cuda::execution_context& ctx) {
    check_descriptor();
    if (unpack_pending_) unpack_second_moment(ctx.stream());
    inner_.update(model, lr, clip, ctx);
    const std::size_t total = inner_.momentum_elements();
    if (total == 0) return;
    const cudaStream_t s = ctx.stream();
    bf16_t* params = reinterpret_cast<bf16_t*>(model.parameters().data());
    const int count = int(inner_.matrices().size());
    kernels::muon_pack(params, gathered_.data(), table_.data(), count, share_.packed.offset,
                       share_.packed.offset + share_.packed.count, s);
    // Every rank skips the same empty shares, so all issue the same broadcasts.
    const ncclComm_t comm = comm_->get();
    comm::nccl_group group(comm);
    for (std::size_t r = 0; r < shares_.size(); ++r) {
      const muon_state_range piece = shares_[r].packed;
      if (piece.count == 0) continue;
      bf16_t* at = gathered_.data() + piece.offset;
      comm::nccl_check(ncclBroadcast(at, at, piece.count, ncclBfloat16, int(r), comm, s),
                       "ncclBroadcast (Muon matrices)", comm);
    }
    group.end();
    kernels::muon_unpack(params, gathered_.data(), table_.data(), count, total, s);
  }

  /// muon_cuda's state with this rank's momentum and master weights as
  /// "optim.muon.shard.momentum" and "optim.muon.shard.master" (their own names, so neither
  /// optimizer takes the other's for its own) and "optim.muon.shard" (u64 {4}: world size, rank,
  /// offset, count): for a checkpointer that saves one process's state.
  std::vector<state_tensor> state() {
    std::vector<state_tensor> out = inner_.state();
    for (state_tensor& t : out) {
      if (t.name == "optim.muon.momentum") t.name = "optim.muon.shard.momentum";
      if (t.name == "optim.muon.master") t.name = "optim.muon.shard.master";
    }
    out.push_back(make_state_tensor("optim.muon.shard", std::span<std::uint64_t>(descriptor_),
                                    {std::int64_t(descriptor_.size())}));
    return out;
  }

  /// The state as a sharded checkpoint holds it (checkpoint::sharded_optimizer): AdamW's master
  /// weights, moments and the step in the common part (every rank's are the same), this rank's
  /// momentum and master weights under the whole tensors' names "optim.muon.momentum" and
  /// "optim.muon.master" with the range of the packed buffer they cover. So any world size
  /// resumes it, and muon_cuda on one GPU reads it reassembled. Device tensors: save and load
  /// through host_staged_checkpointer. With NorMuon also "optim.muon.normuon.second_moment"
  /// (the momentum's range, see the file's opening): a device copy filled now (synchronises the
  /// device) and read back into the second moment at the next update, so a resume that writes it
  /// restores the second moment. Also "optim.muon.normuon" (u64 {1}, host) in the common part.
  checkpoint::optimizer_shard sharded_state() {
    checkpoint::optimizer_shard out;
    for (state_tensor& t : inner_.state()) {
      if (t.name == "optim.muon.momentum" || t.name == "optim.muon.master")
        out.shard.push_back(std::move(t));
      else if (t.name != "optim.muon.second_moment")
        out.common.push_back(std::move(t));
    }
    normuon_flag_[0] = inner_.config().normuon ? 1 : 0;
    out.common.push_back(
        make_state_tensor("optim.muon.normuon", std::span<std::uint64_t>(normuon_flag_), {1}));
    if (inner_.config().normuon) {
      pack_second_moment();
      state_tensor t = make_state_tensor("optim.muon.normuon.second_moment",
                                         second_moment_by_matrix_.device_span(),
                                         {std::int64_t(share_.packed.count)});
      t.on_device = true;
      out.shard.push_back(t);
    }
    unpack_pending_ = true;
    out.range = {comm_->rank(), comm_->world_size(), share_.packed.offset, share_.packed.count,
                 inner_.momentum_elements()};
    return out;
  }

  /// Re-reads the master weights from the model's bf16 parameters (after replacing them).
  template <bf16_device_model M>
  void reload_master(M& model) {
    inner_.reload_master(model);
  }

  /// AdamW's master weights and this rank's matrices' (the other matrices read 0), on the host.
  std::vector<float> master_to_host() const { return inner_.master_to_host(); }

  std::uint64_t steps_taken() const noexcept { return inner_.steps_taken(); }
  const muon_config& config() const noexcept { return inner_.config(); }
  int rank() const noexcept { return comm_->rank(); }
  int world_size() const noexcept { return comm_->world_size(); }
  /// Every matrix, and the ones this rank updates.
  std::span<const muon_matrix> matrices() const noexcept { return inner_.matrices(); }
  muon_matrix_range owned() const noexcept { return share_.matrices; }
  /// Every rank's share, in rank order (the pieces of the gather).
  std::span<const muon_share> shares() const noexcept { return shares_; }
  /// The pack and unpack kernels' table: every matrix with its offset in the model's flat buffer
  /// and in the packed buffer of every matrix (work offset and shape scale unused).
  static std::vector<kernels::matrix_entry> gather_table(std::span<const muon_matrix> matrices) {
    std::vector<kernels::matrix_entry> table;
    table.reserve(matrices.size());
    for (const muon_matrix& m : matrices) table.push_back({m.offset, m.state_offset, 0, 1.0f});
    return table;
  }

  /// Bytes of optimizer state this rank holds on the device (its matrices' momentum and master
  /// weights, AdamW's whole half); the packed gather buffer (2 bytes per matrix element) apart.
  std::size_t state_bytes() const noexcept { return inner_.state_bytes(); }

 private:
  static const comm::nccl_communicator* checked(const comm::nccl_communicator* comm) {
    if (comm == nullptr)
      throw config_error(
          "sharded_muon_cuda: sharded_muon_cuda_config.comm is not set (the NCCL communicator "
          "its reducer uses)");
    return comm;
  }

  static const muon_config& checked(const muon_config& muon) {
    muon.validate();
    return muon;
  }

  float* second_moment() {
    for (state_tensor& t : inner_.state())
      if (t.name == "optim.muon.second_moment") return reinterpret_cast<float*>(t.data);
    return nullptr;
  }

  // Checkpoint path (rare): after every queued update, on the set-up stream, waited for.
  void pack_second_moment() {
    TRAINKIT_CUDA_CHECK(cudaDeviceSynchronize());
    if (share_.packed.count == 0) return;
    const cudaStream_t s = stream_.get();
    const float* v = second_moment();
    second_moment_by_matrix_.fill_bytes_async(0, s);
    for (const normuon_line_place& p : line_places_)
      TRAINKIT_CUDA_CHECK(cudaMemcpyAsync(second_moment_by_matrix_.data() + p.place, v + p.line,
                                          p.count * sizeof(float), cudaMemcpyDeviceToDevice, s));
    stream_.synchronize();
  }

  // After sharded_state(): what a resume wrote (or the packed copy itself) goes back, ordered
  // before the update on `s`; the checkpoint's NorMuon setting must be this run's.
  void unpack_second_moment(cudaStream_t s) {
    unpack_pending_ = false;
    check_normuon_setting(normuon_flag_[0], inner_.config().normuon);
    if (!inner_.config().normuon) return;
    float* v = second_moment();
    for (const normuon_line_place& p : line_places_)
      TRAINKIT_CUDA_CHECK(cudaMemcpyAsync(v + p.line, second_moment_by_matrix_.data() + p.place,
                                          p.count * sizeof(float), cudaMemcpyDeviceToDevice, s));
  }

  void check_descriptor() const {
    const std::uint64_t mine[4] = {std::uint64_t(comm_->world_size()), std::uint64_t(comm_->rank()),
                                   share_.packed.offset, share_.packed.count};
    for (std::size_t k = 0; k < 4; ++k)
      if (descriptor_[k] != mine[k])
        throw config_error("sharded_muon_cuda: the restored optimizer state is rank " +
                           std::to_string(descriptor_[1]) + " of " +
                           std::to_string(descriptor_[0]) + "'s share, not this rank's (rank " +
                           std::to_string(comm_->rank()) + " of " +
                           std::to_string(comm_->world_size()) + ")");
  }

  const comm::nccl_communicator* comm_;
  std::vector<muon_share> shares_;         // every rank's, in rank order
  muon_share share_;                       // this rank's
  muon_cuda inner_;                        // AdamW's half and this rank's matrices
  std::vector<std::uint64_t> descriptor_;  // world size, rank, offset, count (restorable)
  cuda::stream stream_{true};              // set-up copies only
  cuda::device_buffer<kernels::matrix_entry> table_;    // (matrices,) absolute state offsets
  cuda::device_buffer<bf16_t> gathered_;                // (matrix elements,) the packed gather
  std::vector<normuon_line_place> line_places_;         // NorMuon: each owned matrix's lines
  cuda::device_buffer<float> second_moment_by_matrix_;  // (owned matrix elements,) its ckpt copy
  std::vector<std::uint64_t> normuon_flag_ = {0};       // "optim.muon.normuon"
  bool unpack_pending_ = false;                         // sharded_state() handed out the copies
};

static_assert(checkpoint::sharded_optimizer<sharded_muon_cuda>);

}  // namespace trainkit::optim
