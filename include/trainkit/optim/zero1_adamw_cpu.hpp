// trainkit/optim/zero1_adamw_cpu.hpp — the optimizer half of ZeRO-1 on the CPU: AdamW over this
// rank's shard, then an all-gather of the parameters.
//
// Each rank keeps AdamW's moments for its shard of the flat buffer only (optim/zero1_shards.hpp),
// so the optimizer state per rank is 1/N of one process's. `update` runs adamw_cpu's own update
// over a view of the shard (the layout clipped to it, so weight decay falls on the same elements)
// with the summed shard gradients reduce::mpi_zero1 left there, then gathers every rank's updated
// shard into every rank's parameters (MPI_Allgatherv, in place). AdamW is elementwise and
// IEEE-exact in adamw_cpu (no reassociation, -ffp-contract=off), so updating a shard gives the
// bits one process computes for those elements, and after the gather every rank holds exactly
// one process's parameters.
//
// Pair it with reduce::mpi_zero1 on the same communicator: both cut the buffer with zero1_shard,
// and the trainer refuses any reducer that does not deliver reduce-scattered gradients
// (expected_gradients; comm/gradient_layout.hpp).
// The gather is blocking and counted in the optimizer phase; it does not overlap the next
// forward.
#pragma once

#include <mpi.h>

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
#include "trainkit/optim/adamw_config.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/clip_scale.hpp"
#include "trainkit/optim/concepts.hpp"
#include "trainkit/optim/zero1_shards.hpp"

namespace trainkit::optim {

/// AdamW's settings and the ranks the state is sharded over. Converts from an adamw_config (the
/// world communicator), so a program switches optimizers without translating settings.
struct zero1_adamw_config {
  adamw_config adamw{};
  MPI_Comm comm = MPI_COMM_WORLD;

  zero1_adamw_config() = default;
  zero1_adamw_config(adamw_config a, MPI_Comm c = MPI_COMM_WORLD) : adamw(a), comm(c) {}
};

template <class Scalar>
class basic_zero1_adamw_cpu {
  static_assert(std::floating_point<Scalar>, "basic_zero1_adamw_cpu computes in float or double");

  /// This rank's shard as a model adamw_cpu can update: spans into the real buffers, the layout
  /// clipped to the shard with offsets from its start.
  struct shard_view {
    using memory_space = host_memory;
    using parameter_type = Scalar;
    std::span<Scalar> params, grads;
    std::span<const tensor_info> layout;
    std::size_t count = 0;
    std::span<const tensor_info> parameter_layout() const { return layout; }
    std::span<Scalar> parameters() { return params; }
    std::span<Scalar> gradients() { return grads; }
    std::size_t num_parameters() const { return count; }
  };

 public:
  using memory_space = host_memory;
  using parameter_type = Scalar;
  using config_type = zero1_adamw_config;
  /// It updates its shard from the sums reduce::mpi_zero1 leaves there; nothing else is summed.
  static constexpr gradient_layout expected_gradients = gradient_layout::reduce_scattered;

  /// Zeroed moments for this rank's shard of `model.num_parameters()` elements. Throws
  /// config_error for a bad config or a buffer too large for MPI's int counts.
  template <model::parameter_holder M>
  requires std::same_as<typename M::memory_space, host_memory> basic_zero1_adamw_cpu(
      const M& model, zero1_adamw_config config)
      : comm_(config.comm),
        n_(static_cast<std::size_t>(model.num_parameters())),
        shard_(zero1_shard(n_, comm_.size(), comm_.rank())),
        layout_(zero1_clip_layout(model.parameter_layout(), shard_)),
        inner_(shard_view{{}, {}, layout_, shard_.count}, config.adamw),
        descriptor_{std::uint64_t(comm_.size()), std::uint64_t(comm_.rank()), shard_.offset,
                    shard_.count} {
    if (n_ > std::size_t(INT_MAX))
      throw config_error("zero1_adamw_cpu: " + std::to_string(n_) +
                         " parameters exceed MPI's int counts (2^31-1) for the all-gather");
    for (const model::gradient_range& s : zero1_shards(n_, comm_.size())) {
      counts_.push_back(int(s.count));
      displs_.push_back(int(s.offset));
    }
  }

  /// AdamW over this rank's shard from its summed gradients times `clip.factor`, then every
  /// rank's shard gathered into the parameters. Collective.
  template <model::parameter_holder M>
  requires std::same_as<typename M::memory_space, host_memory> &&
      std::same_as<typename M::parameter_type, Scalar>
  void update(M& model, float lr, const clip_scale<host_memory>& clip, host_context& ctx) {
    const std::span<Scalar> params = model.parameters(), grads = model.gradients();
    if (params.size() != n_ || grads.size() != n_)
      throw config_error("zero1_adamw_cpu: model has " + std::to_string(params.size()) +
                         " parameters and " + std::to_string(grads.size()) +
                         " gradients but the optimizer was built for " + std::to_string(n_));
    check_descriptor();
    shard_view view{params.subspan(shard_.offset, shard_.count),
                    grads.subspan(shard_.offset, shard_.count), layout_, shard_.count};
    inner_.update(view, lr, clip, ctx);
    comm::mpi_check(
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, params.data(), counts_.data(),
                       displs_.data(), comm::mpi_datatype_of<Scalar>(), comm_.get()),
        "MPI_Allgatherv");
  }

  /// "optim.zero1.m", "optim.zero1.v" (this rank's shard, {count}), "optim.step" (u64 {1}) and
  /// "optim.zero1.shard" (u64 {4}: world size, rank, offset, count), viewing this optimizer's own
  /// storage. The names differ from adamw_cpu's "optim.m"/"optim.v" so that neither optimizer
  /// takes the other's moments for its own; a restored shard of another rank or world size is
  /// refused at the next update.
  std::vector<state_tensor> state() {
    std::vector<state_tensor> out = inner_.state();
    for (state_tensor& t : out) {
      if (t.name == "optim.m") t.name = "optim.zero1.m";
      if (t.name == "optim.v") t.name = "optim.zero1.v";
    }
    out.push_back(make_state_tensor("optim.zero1.shard", std::span<std::uint64_t>(descriptor_),
                                    {std::int64_t(descriptor_.size())}));
    return out;
  }

  /// The state as a sharded checkpoint holds it (checkpoint::sharded_optimizer): "optim.step" in
  /// the common part (every rank's is the same), this rank's slices of the moments under the whole
  /// tensors' names "optim.m" and "optim.v" (shape {count}), and the range they cover. A sharded
  /// checkpoint can so be resumed by any world size, and by adamw_cpu (one process or DDP), which
  /// reads the whole "optim.m" reassembled; this optimizer resumes a DDP checkpoint's whole
  /// moments sliced. The descriptor "optim.zero1.shard" is not part of it: the range is the
  /// manifest's, and after a load the optimizer's own descriptor still names this rank.
  checkpoint::optimizer_shard sharded_state() {
    checkpoint::optimizer_shard out;
    for (state_tensor& t : inner_.state()) {
      if (t.name == "optim.step")
        out.common.push_back(std::move(t));
      else  // "optim.m", "optim.v": this rank's shard
        out.shard.push_back(std::move(t));
    }
    out.range = {comm_.rank(), comm_.size(), shard_.offset, shard_.count, n_};
    return out;
  }

  std::uint64_t steps_taken() const noexcept { return inner_.steps_taken(); }
  const adamw_config& config() const noexcept { return inner_.config(); }
  int rank() const noexcept { return comm_.rank(); }
  int world_size() const noexcept { return comm_.size(); }
  /// This rank's shard of the flat buffer.
  model::gradient_range shard() const noexcept { return shard_; }
  /// Bytes of optimizer state this rank holds (both moments of its shard); one process's
  /// adamw_cpu holds `2 · num_parameters · sizeof(Scalar)`, the sum of every rank's figure.
  std::size_t state_bytes() const noexcept { return inner_.state_bytes(); }

 private:
  void check_descriptor() const {
    const std::uint64_t mine[4] = {std::uint64_t(comm_.size()), std::uint64_t(comm_.rank()),
                                   shard_.offset, shard_.count};
    for (std::size_t k = 0; k < 4; ++k)
      if (descriptor_[k] != mine[k])
        throw config_error("zero1_adamw_cpu: the restored optimizer state is rank " +
                           std::to_string(descriptor_[1]) + " of " +
                           std::to_string(descriptor_[0]) + "'s shard, not this rank's (rank " +
                           std::to_string(comm_.rank()) + " of " + std::to_string(comm_.size()) +
                           ")");
  }

  comm::mpi_communicator comm_;
  std::size_t n_ = 0;
  model::gradient_range shard_{};
  std::vector<tensor_info> layout_;  // the model's layout clipped to the shard
  basic_adamw_cpu<Scalar> inner_;    // moments of the shard only
  std::vector<std::uint64_t> descriptor_;
  std::vector<int> counts_, displs_;  // every rank's shard, for the gather
};

using zero1_adamw_cpu = basic_zero1_adamw_cpu<float>;

static_assert(checkpoint::sharded_optimizer<zero1_adamw_cpu>);

}  // namespace trainkit::optim
