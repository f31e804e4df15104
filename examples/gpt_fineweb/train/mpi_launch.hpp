// train/mpi_launch.hpp — one rank of `mpirun -np N gpt_fineweb --reducer
// mpi|mpi-zero1|nccl|nccl-zero1`.
//
// Shared by the CPU reducers (train/cpu.hpp) and the NCCL one (train/cuda_entry.cuh): which rank
// this is, which GPU a rank takes (its rank among the ranks of its node), rank 0 going first where
// ranks must not race, and the rule that an exception on any rank is printed with the rank and ends
// the whole job with MPI_Abort (the other ranks would otherwise wait forever in their next
// collective). Built where CMake found MPI (TRAINKIT_HAS_MPI).
#pragma once

#include <mpi.h>

#include <unistd.h>

#include <csignal>
#include <cstddef>
#include <exception>
#include <iostream>
#include <string>

#include <trainkit/comm/mpi_check.hpp>
#include <trainkit/comm/mpi_session.hpp>
#include <trainkit/core/error.hpp>
#include <trainkit/trainer/stop_flag.hpp>

#include "../command.hpp"

namespace gpt_fineweb {

/// The ranks of MPI_COMM_WORLD, as the training driver sees them (driver.hpp's one_process
/// for one process).
struct mpi_ranks {
  int rank = 0;
  int ranks = 1;

  /// make() on rank 0 first, then on the others: a checkpointer's constructor removes crashed
  /// saves' temporaries, which two ranks must not do at once.
  template <class Make>
  auto rank_zero_first(Make make) const {
    if (rank != 0) trainkit::comm::mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    auto made = make();
    if (rank == 0) trainkit::comm::mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    return made;
  }
};

/// This rank's index among the ranks on its node (MPI_COMM_TYPE_SHARED): the GPU it takes.
inline int node_local_rank() {
  MPI_Comm node = MPI_COMM_NULL;
  trainkit::comm::mpi_check(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
      "MPI_Comm_split_type");
  int local = 0;
  const int rc = MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  trainkit::comm::mpi_check(rc, "MPI_Comm_rank");
  return local;
}

/// Runs `body(mpi_ranks)` as one rank of the job `mpi` started. With one rank an exception reaches
/// main() as in a run without mpirun; with more it is printed naming the rank, and MPI_Abort
/// ends every rank with exit code 2.
template <class Body>
int run_mpi_rank(const trainkit::comm::mpi_session& mpi, Body body) {
  const mpi_ranks ranks{mpi.world_rank(), mpi.world_size()};
  // mpirun passes SIGUSR1 on to every rank (a SIGTERM to mpirun ends the ranks before a final
  // checkpoint): here it is a stop request like SIGTERM to one rank.
  std::signal(SIGUSR1, [](int sig) { trainkit::request_stop(sig); });
  try {
    return body(ranks);
  } catch (const std::exception& e) {
    if (ranks.ranks == 1) throw;  // main() reports it, and MPI finalises normally
    // One write(2) of the whole line: mpirun forwards each rank's stderr in the chunks it
    // arrives in, and its MPI_ABORT banner landed between the pieces of a line written by parts.
    const std::string line = "gpt_fineweb: rank " + std::to_string(ranks.rank) + " of " +
                             std::to_string(ranks.ranks) + ": " + describe_failure(e).line + "\n";
    std::cerr.flush();
    for (std::size_t done = 0; done < line.size();) {
      const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
      if (n <= 0) break;  // nothing left to report it on
      done += std::size_t(n);
    }
    MPI_Abort(MPI_COMM_WORLD, 2);
    throw;  // not reached: MPI_Abort ends the process
  }
}

}  // namespace gpt_fineweb
