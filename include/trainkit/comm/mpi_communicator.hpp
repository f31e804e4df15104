// trainkit/comm/mpi_communicator.hpp — an owned MPI communicator and the few scalar collectives
// every rank must agree on.
//
// The MPI reducers (reduce/mpi_allreduce.hpp, reduce/mpi_zero1.hpp) and the ZeRO-1 optimizer
// (optim/zero1_adamw_cpu.hpp) each own one. Each owner duplicates the caller's communicator (its
// messages never match the caller's, nor another owner's) and installs MPI_ERRORS_RETURN, so a
// failed call comes back as an io_error naming it instead of aborting the job from inside the
// library. `sum`, `average` and `any` are what the reducers' rank-aware hooks
// (reduce/concepts.hpp) compute.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "trainkit/comm/mpi_check.hpp"

namespace trainkit::comm {

class mpi_communicator {
 public:
  /// Duplicates `comm`. MPI must be initialised (comm::mpi_session).
  explicit mpi_communicator(MPI_Comm comm) {
    mpi_check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
    try {
      mpi_check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
      mpi_check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
      mpi_check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    } catch (...) {
      MPI_Comm_free(&comm_);
      throw;
    }
  }

  mpi_communicator(const mpi_communicator&) = delete;
  mpi_communicator& operator=(const mpi_communicator&) = delete;
  mpi_communicator(mpi_communicator&& other) noexcept
      : comm_(std::exchange(other.comm_, MPI_COMM_NULL)), rank_(other.rank_), size_(other.size_) {}
  mpi_communicator& operator=(mpi_communicator&&) = delete;

  ~mpi_communicator() {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  MPI_Comm get() const noexcept { return comm_; }
  bool valid() const noexcept { return comm_ != MPI_COMM_NULL; }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }

  /// Element-wise sum over ranks, in place (MPI_Allreduce).
  void sum(std::span<double> values) const {
    for (std::size_t done = 0; done < values.size();) {
      const std::size_t n = std::min<std::size_t>(values.size() - done, INT_MAX);
      mpi_check(
          MPI_Allreduce(MPI_IN_PLACE, values.data() + done, int(n), MPI_DOUBLE, MPI_SUM, comm_),
          "MPI_Allreduce");
      done += n;
    }
  }

  /// The mean of x over ranks: gathered, summed in rank order, divided by the number of ranks,
  /// so every rank computes the same bits (an MPI sum of 3 or more may differ between ranks).
  double average(double x) const {
    std::vector<double> all(std::size_t(size_), 0.0);
    mpi_check(MPI_Allgather(&x, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, comm_), "MPI_Allgather");
    double s = 0;
    for (double v : all) s += v;
    return s / double(size_);
  }

  /// True on every rank when it is true on one.
  bool any(bool flag) const {
    int mine = flag ? 1 : 0, result = 0;
    mpi_check(MPI_Allreduce(&mine, &result, 1, MPI_INT, MPI_LOR, comm_), "MPI_Allreduce");
    return result != 0;
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

/// MPI's element type for float and double buffers.
template <class T>
MPI_Datatype mpi_datatype_of() {
  static_assert(std::same_as<T, float> || std::same_as<T, double>,
                "the MPI communicators move float or double values");
  return std::same_as<T, float> ? MPI_FLOAT : MPI_DOUBLE;
}

}  // namespace trainkit::comm
