// trainkit/comm/nccl_check.hpp — NCCL return codes turned into trainkit exceptions.
//
// Every NCCL call of the reducers and the ZeRO-1 optimizer goes through `nccl_check`, which throws
// a trainkit::io_error naming the call, NCCL's description of the code and, when the
// communicator has one, its last error message (which says which peer or transport failed).
// `nccl_check_async` asks a communicator for an error of work already enqueued: the host never
// waits on NCCL inside a step, so a failed peer shows there.
#pragma once

#include <nccl.h>

#include <string>

#include "trainkit/core/error.hpp"

namespace trainkit::comm {

/// Throws io_error("<call> failed: <NCCL's message>") unless `code` is ncclSuccess.
inline void nccl_check(ncclResult_t code, const char* call, ncclComm_t comm = nullptr) {
  if (code == ncclSuccess) return;
  std::string text = std::string(call) + " failed: " + ncclGetErrorString(code);
  if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0')
    text += std::string(" (") + last + ")";
  throw io_error(text);
}

/// Throws io_error if `comm` reports an asynchronous error (ncclCommGetAsyncError).
inline void nccl_check_async(ncclComm_t comm) {
  ncclResult_t async = ncclSuccess;
  nccl_check(ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError", comm);
  nccl_check(async, "NCCL (asynchronous error)", comm);
}

}  // namespace trainkit::comm
