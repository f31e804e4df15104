// trainkit/comm/nccl_group.hpp — ncclGroupStart/ncclGroupEnd as a guard (comm/group_guard.hpp).
//
// Every grouped launch of the NCCL reducers and the ZeRO-1 optimizer goes through it:
//   comm::nccl_group group(comm);   // ncclGroupStart
//   ... ncclAllReduce / ncclReduce / ncclBroadcast, each checked ...
//   group.end();                    // ncclGroupEnd, checked
// so that a check throwing in between cannot leave the group open.
#pragma once

#include <nccl.h>

#include "trainkit/comm/group_guard.hpp"
#include "trainkit/comm/nccl_check.hpp"

namespace trainkit::comm {

/// NCCL's group calls; `comm` only names the communicator in error messages.
struct nccl_group_calls {
  ncclComm_t comm = nullptr;

  void start() const { nccl_check(ncclGroupStart(), "ncclGroupStart", comm); }
  void end() const { nccl_check(ncclGroupEnd(), "ncclGroupEnd", comm); }
  void close() const noexcept { (void)ncclGroupEnd(); }  // already unwinding: keep that error
};

/// One NCCL group, open from construction to end() or destruction.
static_assert(group_calls<nccl_group_calls>);

class nccl_group : public group_guard<nccl_group_calls> {
 public:
  explicit nccl_group(ncclComm_t comm = nullptr) : group_guard(nccl_group_calls{comm}) {}
};

}  // namespace trainkit::comm
