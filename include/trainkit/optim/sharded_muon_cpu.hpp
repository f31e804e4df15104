// trainkit/optim/sharded_muon_cpu.hpp — the Muon family over MPI ranks on the CPU: each rank
// orthogonalises its share of the matrices, then every rank gathers the others'.
//
// Newton–Schulz is the costly part of Muon (optim/muon_cpu.hpp), and it is per matrix, so ranks
// split the matrices rather than the elements: rank r updates matrices [first_r, last_r) of the
// layout-ordered list (optim::muon_shards: contiguous, balanced by Newton–Schulz FLOPs) and keeps
// the momentum of those only, one contiguous range of the packed momentum buffer — the shape a
// sharded checkpoint stores (checkpoint::sharded_optimizer; its range is contiguous). Every rank
// then receives the updated matrices of every other rank (MPI_Allgatherv of the packed matrices,
// in matrix order) and writes them into its parameters. AdamW's half (embeddings, head, norms,
// biases) is small and updated whole on every rank, from the same gradients, so its moments are
// the common part of the checkpoint.
//
// NorMuon (muon_config::normuon) adds a second moment per line of each matrix, local to the
// matrix's owner like the momentum. A sharded checkpoint cuts every sharded tensor by one range,
// the momentum's, so the owned lines travel as "optim.muon.normuon.second_moment", a tensor of
// the momentum's shape: matrix i's lines at its momentum offset (state_offset), zeros after them
// (docs/formats_checkpoint.md). That layout does not depend on the world size, so any number of
// ranks reslices it; it costs one more momentum-sized tensor on disk. The common part then holds
// "optim.muon.normuon" (u64 {1}: 1 with NorMuon, 0 without), so a checkpoint written with the
// other setting is refused naming muon_config.normuon.
//
// It reads full summed gradients, so it pairs with an all-reduce (reduce::mpi_allreduce), not with
// a reducer that leaves each rank a shard of the gradients (ZeRO-1): its state is sharded, its
// gradients are not (expected_gradients is gradient_layout::replicated, which the trainer checks
// against the reducer at compile time). Each matrix is computed by one rank with muon_cpu's own
// code on one thread, and AdamW is elementwise, so every rank ends each step with the parameters
// one process computes, bit for bit, whatever the number of ranks.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "trainkit/checkpoint/concepts.hpp"
#include "trainkit/comm/gradient_layout.hpp"
#include "trainkit/comm/mpi_check.hpp"
#include "trainkit/comm/mpi_communicator.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/execution_context.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/model/concepts.hpp"
#include "trainkit/optim/clip_scale.hpp"
#include "trainkit/optim/muon_config.hpp"
#include "trainkit/optim/muon_cpu.hpp"

namespace trainkit::optim {

/// Muon's settings and the ranks the matrices are shared between. Converts from a muon_config
/// (the world communicator), so a program switches between the two without translating settings.
struct sharded_muon_config {
  muon_config muon{};
  MPI_Comm comm = MPI_COMM_WORLD;

  sharded_muon_config() = default;
  sharded_muon_config(muon_config m, MPI_Comm c = MPI_COMM_WORLD) : muon(m), comm(c) {}
};

template <class Scalar>
class basic_sharded_muon_cpu {
 public:
  using memory_space = host_memory;
  using parameter_type = Scalar;
  using config_type = sharded_muon_config;
  /// Its state is sharded, its gradients are not: every rank reads all of them (an all-reduce).
  static constexpr gradient_layout expected_gradients = gradient_layout::replicated;

  /// This rank's share of the matrices and its momentum, AdamW's moments whole. Throws
  /// config_error for a bad config or layout, or matrices too many for MPI's int counts.
  template <model::parameter_holder M>
  requires std::same_as<typename M::memory_space, host_memory> basic_sharded_muon_cpu(
      const M& model, sharded_muon_config config)
      : comm_(config.comm),
        inner_(model, config.muon, own_share(model, config.muon, comm_.size(), comm_.rank())),
        descriptor_{std::uint64_t(comm_.size()), std::uint64_t(comm_.rank()),
                    inner_.momentum_range().offset, inner_.momentum_range().count} {
    if (inner_.momentum_elements() > std::size_t(INT_MAX))
      throw config_error("sharded_muon_cpu: " + std::to_string(inner_.momentum_elements()) +
                         " matrix elements exceed MPI's int counts (2^31-1) for the all-gather");
    for (const muon_share& r :
         muon_share_layout(inner_.matrices(), comm_.size(), config.muon.ns_steps)) {
      counts_.push_back(int(r.packed.count));
      displs_.push_back(int(r.packed.offset));
    }
    gathered_.resize(inner_.momentum_elements());
    if (config.muon.normuon) {
      line_places_ =
          normuon_line_places(inner_.matrices(), inner_.owned(), inner_.momentum_range().offset);
      second_moment_by_matrix_.assign(inner_.momentum_range().count, Scalar(0));
    }
  }

  /// muon_cpu's update of AdamW's half and of this rank's matrices, then every rank's matrices
  /// gathered into every rank's parameters. Collective.
  template <model::parameter_holder M>
  requires std::same_as<typename M::memory_space, host_memory> &&
      std::same_as<typename M::parameter_type, Scalar>
  void update(M& model, float lr, const clip_scale<host_memory>& clip, host_context& ctx) {
    check_descriptor();
    if (unpack_pending_) unpack_second_moment();
    inner_.update(model, lr, clip, ctx);
    const std::span<Scalar> params = model.parameters();
    const auto matrices = inner_.matrices();
    const muon_matrix_range own = inner_.owned();
    muon_pack(matrices, own, params.data(), gathered_.data());
    comm::mpi_check(
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gathered_.data(), counts_.data(),
                       displs_.data(), comm::mpi_datatype_of<Scalar>(), comm_.get()),
        "MPI_Allgatherv");
    muon_unpack(matrices, gathered_.data(), params.data());
  }

  /// muon_cpu's state with this rank's momentum as "optim.muon.shard.momentum" (its own name, so
  /// neither optimizer takes the other's for its own) and "optim.muon.shard" (u64 {4}: world
  /// size, rank, offset, count): for a checkpointer that saves one process's state.
  std::vector<state_tensor> state() {
    std::vector<state_tensor> out = inner_.state();
    for (state_tensor& t : out)
      if (t.name == "optim.muon.momentum") t.name = "optim.muon.shard.momentum";
    out.push_back(make_state_tensor("optim.muon.shard", std::span<std::uint64_t>(descriptor_),
                                    {std::int64_t(descriptor_.size())}));
    return out;
  }

  /// The state as a sharded checkpoint holds it: AdamW's moments and the step in the common part
  /// (every rank's are the same), this rank's momentum under the whole tensor's name
  /// "optim.muon.momentum" with the range it covers. Any world size resumes it, and so does
  /// muon_cpu in one process, which reads "optim.muon.momentum" reassembled. With NorMuon also
  /// "optim.muon.normuon.second_moment" (the momentum's shape, see the file's opening): a copy,
  /// filled now from the second moment and read back into it at the next update, so a resume
  /// that writes it restores the second moment. Also "optim.muon.normuon" in the common part.
  checkpoint::optimizer_shard sharded_state() {
    checkpoint::optimizer_shard out;
    for (state_tensor& t : inner_.state()) {
      if (t.name == "optim.muon.momentum")
        out.shard.push_back(std::move(t));
      else if (t.name != "optim.muon.second_moment")
        out.common.push_back(std::move(t));
    }
    normuon_flag_[0] = inner_.config().normuon ? 1 : 0;
    out.common.push_back(
        make_state_tensor("optim.muon.normuon", std::span<std::uint64_t>(normuon_flag_), {1}));
    if (inner_.config().normuon) {
      pack_second_moment();
      out.shard.push_back(make_state_tensor("optim.muon.normuon.second_moment",
                                            std::span<Scalar>(second_moment_by_matrix_),
                                            {std::int64_t(second_moment_by_matrix_.size())}));
    }
    unpack_pending_ = true;
    out.range = {comm_.rank(), comm_.size(), inner_.momentum_range().offset,
                 inner_.momentum_range().count, inner_.momentum_elements()};
    return out;
  }

  std::uint64_t steps_taken() const noexcept { return inner_.steps_taken(); }
  const muon_config& config() const noexcept { return inner_.config(); }
  int rank() const noexcept { return comm_.rank(); }
  int world_size() const noexcept { return comm_.size(); }
  /// Every matrix, and the ones this rank updates.
  std::span<const muon_matrix> matrices() const noexcept { return inner_.matrices(); }
  muon_matrix_range owned() const noexcept { return inner_.owned(); }
  /// Bytes of optimizer state this rank holds: its momentum and AdamW's moments.
  std::size_t state_bytes() const noexcept { return inner_.state_bytes(); }

 private:
  template <class M>
  static muon_matrix_range own_share(const M& model, const muon_config& config, int world,
                                     int rank) {
    config.validate();
    const auto matrices = muon_matrices(model.parameter_layout(), config.muon_roles, "muon_cpu");
    return muon_shards(matrices, world, config.ns_steps)[std::size_t(rank)];
  }

  Scalar* second_moment() {
    for (state_tensor& t : inner_.state())
      if (t.name == "optim.muon.second_moment") return reinterpret_cast<Scalar*>(t.data);
    return nullptr;
  }

  void pack_second_moment() {
    const Scalar* v = second_moment();
    std::fill(second_moment_by_matrix_.begin(), second_moment_by_matrix_.end(), Scalar(0));
    for (const normuon_line_place& p : line_places_)
      std::copy_n(v + p.line, p.count, second_moment_by_matrix_.data() + p.place);
  }

  // After sharded_state(): what a resume wrote (or the packed copy itself) goes back, and the
  // checkpoint's NorMuon setting must be this run's.
  void unpack_second_moment() {
    unpack_pending_ = false;
    check_normuon_setting(normuon_flag_[0], inner_.config().normuon);
    if (!inner_.config().normuon) return;
    Scalar* v = second_moment();
    for (const normuon_line_place& p : line_places_)
      std::copy_n(second_moment_by_matrix_.data() + p.place, p.count, v + p.line);
  }

  void check_descriptor() const {
    const std::uint64_t mine[4] = {std::uint64_t(comm_.size()), std::uint64_t(comm_.rank()),
                                   inner_.momentum_range().offset, inner_.momentum_range().count};
    for (std::size_t k = 0; k < 4; ++k)
      if (descriptor_[k] != mine[k])
        throw config_error("sharded_muon_cpu: the restored optimizer state is rank " +
                           std::to_string(descriptor_[1]) + " of " +
                           std::to_string(descriptor_[0]) + "'s share, not this rank's (rank " +
                           std::to_string(comm_.rank()) + " of " + std::to_string(comm_.size()) +
                           ")");
  }

  comm::mpi_communicator comm_;
  basic_muon_cpu<Scalar> inner_;
  std::vector<std::uint64_t> descriptor_;
  std::vector<int> counts_, displs_;             // every rank's matrices in the packed buffer
  std::vector<Scalar> gathered_;                 // (matrix elements,) every rank's updated matrices
  std::vector<normuon_line_place> line_places_;  // NorMuon: each owned matrix's lines
  std::vector<Scalar>
      second_moment_by_matrix_;  // (owned matrix elements,) NorMuon's checkpoint copy
  std::vector<std::uint64_t> normuon_flag_ = {0};  // "optim.muon.normuon"
  bool unpack_pending_ = false;                    // sharded_state() handed out the copies
};

using sharded_muon_cpu = basic_sharded_muon_cpu<float>;

static_assert(checkpoint::sharded_optimizer<sharded_muon_cpu>);

}  // namespace trainkit::optim
