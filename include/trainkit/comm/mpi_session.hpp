// trainkit/comm/mpi_session.hpp — MPI's lifetime as an object: initialised once, finalised once.
//
// A program that trains on several ranks creates one `mpi_session` before any reducer and lets it
// go out of scope after the last one (reducers free their communicators in their destructors,
// which MPI requires before MPI_Finalize). The trainer calls MPI only from the thread that runs
// the step (backward publishes buckets there; prefetch threads never touch MPI), so
// MPI_THREAD_FUNNELED is what is asked for. If the program initialised MPI itself the session
// neither initialises nor finalises it.
#pragma once

#include <mpi.h>

#include <string>

#include "trainkit/comm/mpi_check.hpp"
#include "trainkit/core/error.hpp"

namespace trainkit::comm {

class mpi_session {
 public:
  /// Throws io_error if MPI fails to start, config_error if it was already finalised (MPI cannot
  /// be started twice in one process) or gives less than MPI_THREAD_FUNNELED.
  mpi_session() {
    int finalized = 0;
    mpi_check(MPI_Finalized(&finalized), "MPI_Finalized");
    if (finalized)
      throw config_error(
          "mpi_session: MPI was already finalised in this process; it can be "
          "initialised only once");
    int initialized = 0;
    mpi_check(MPI_Initialized(&initialized), "MPI_Initialized");
    int provided = 0;
    if (!initialized) {
      mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided),
                "MPI_Init_thread");
      owns_ = true;
    } else {
      mpi_check(MPI_Query_thread(&provided), "MPI_Query_thread");
    }
    if (provided < MPI_THREAD_FUNNELED) {
      if (owns_) MPI_Finalize();
      throw config_error("mpi_session: MPI provides thread level " + std::to_string(provided) +
                         ", the trainer needs MPI_THREAD_FUNNELED");
    }
  }

  mpi_session(const mpi_session&) = delete;
  mpi_session& operator=(const mpi_session&) = delete;

  ~mpi_session() {
    if (owns_) MPI_Finalize();  // nothing useful to do with a failure while shutting down
  }

  /// Rank and size in MPI_COMM_WORLD (a reducer may work on a sub-communicator).
  int world_rank() const {
    int r = 0;
    mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &r), "MPI_Comm_rank");
    return r;
  }
  int world_size() const {
    int n = 0;
    mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &n), "MPI_Comm_size");
    return n;
  }

 private:
  bool owns_ = false;
};

}  // namespace trainkit::comm
