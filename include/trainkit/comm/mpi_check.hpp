// trainkit/comm/mpi_check.hpp — MPI return codes turned into trainkit exceptions.
//
// The communicators install MPI_ERRORS_RETURN (comm/mpi_communicator.hpp) so that a failed
// collective comes back as a code instead of aborting the job from inside the library; every call
// goes through `mpi_check`, which throws a trainkit::io_error naming the MPI call and MPI's own
// message.
#pragma once

#include <mpi.h>

#include <string>

#include "trainkit/core/error.hpp"

namespace trainkit::comm {

/// MPI's description of an error code.
inline std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, std::size_t(length));
}

/// Throws io_error("<call> failed: <MPI's message>") unless `code` is MPI_SUCCESS.
inline void mpi_check(int code, const char* call) {
  if (code != MPI_SUCCESS) throw io_error(std::string(call) + " failed: " + mpi_error_text(code));
}

}  // namespace trainkit::comm
