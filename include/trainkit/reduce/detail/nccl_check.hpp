// trainkit/reduce/detail/nccl_check.hpp — NCCL return codes turned into trainkit exceptions.
//
// Every NCCL call of the reducers goes through `check`, which throws a trainkit::io_error naming
// the call, NCCL's description of the code and, when the communicator has one, its last error
// message (which says which peer or transport failed).
#pragma once

#include <nccl.h>

#include <string>

#include "trainkit/core/error.hpp"

namespace trainkit::reduce::detail {

/// Throws io_error("<call> failed: <NCCL's message>") unless `code` is ncclSuccess.
inline void nccl_check(ncclResult_t code, const char* call, ncclComm_t comm = nullptr) {
  if (code == ncclSuccess) return;
  std::string text = std::string(call) + " failed: " + ncclGetErrorString(code);
  if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0')
    text += std::string(" (") + last + ")";
  throw io_error(text);
}

}  // namespace trainkit::reduce::detail
