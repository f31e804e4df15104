// trainkit/comm/nccl_mpi.hpp — an NCCL communicator over the ranks of an MPI communicator.
//
// mpirun starts one process per GPU; rank 0 asks NCCL for a unique id and MPI broadcasts it, then
// every rank joins the NCCL clique with its MPI rank (llm.c's launch). Each rank must have
// selected its GPU (cudaSetDevice, e.g. its node-local rank) before calling.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include "trainkit/comm/mpi_check.hpp"
#include "trainkit/comm/nccl_check.hpp"
#include "trainkit/comm/nccl_communicator.hpp"

namespace trainkit::comm {

/// Collective over `comm`: every rank calls it. MPI must be initialised (comm::mpi_session).
inline nccl_communicator nccl_communicator_from_mpi(MPI_Comm comm = MPI_COMM_WORLD) {
  int rank = 0, size = 0;
  mpi_check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  mpi_check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  ncclUniqueId id{};
  if (rank == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  mpi_check(MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, comm), "MPI_Bcast (NCCL unique id)");
  return nccl_communicator(size, rank, id);
}

}  // namespace trainkit::comm
