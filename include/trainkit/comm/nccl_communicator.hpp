// trainkit/comm/nccl_communicator.hpp — an owned NCCL communicator: this process's rank among the
// ranks of one NCCL clique, on the current CUDA device.
//
// The NCCL reducers (reduce/nccl_allreduce.hpp, reduce/nccl_zero1.hpp) and the ZeRO-1 optimizer
// (optim/zero1_adamw_cuda.hpp) work on one, made by the program after it selected its GPU:
// `single()` for one GPU (the seam a single-process run and the GPU tests use), or
// comm/nccl_mpi.hpp's `nccl_communicator_from_mpi`, which broadcasts NCCL's unique id over MPI as
// llm.c does.
#pragma once

#include <nccl.h>

#include <string>
#include <utility>

#include "trainkit/comm/nccl_check.hpp"
#include "trainkit/core/error.hpp"

namespace trainkit::comm {

class nccl_communicator {
 public:
  /// Joins the clique named by `id` (ncclGetUniqueId on one rank, given to all). Set the CUDA
  /// device first: one rank per GPU.
  nccl_communicator(int world_size, int rank, const ncclUniqueId& id)
      : rank_(rank), size_(world_size) {
    if (world_size < 1 || rank < 0 || rank >= world_size)
      throw config_error("nccl_communicator: rank " + std::to_string(rank) + " of " +
                         std::to_string(world_size));
    nccl_check(ncclCommInitRank(&comm_, world_size, id, rank), "ncclCommInitRank");
  }

  /// A world of one rank: nothing to exchange, every reduction is the identity.
  static nccl_communicator single() {
    ncclUniqueId id;
    nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
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

}  // namespace trainkit::comm
