// trainkit/checkpoint/detail/thread_priority.hpp — lowering the scheduling priority of the calling
// thread only, for the asynchronous checkpointer's writer.
//
// The writer (write(2) into the page cache, the CRC-32C pass, fsync) runs beside a training step
// that keeps every core busy with OpenMP threads. A statically scheduled parallel region waits at
// its barrier for the thread the writer displaced, so each millisecond the writer takes from a
// compute thread costs the whole step a millisecond. At a low priority the writer runs when a core
// would otherwise idle (barriers, I/O waits) and is preempted at once otherwise; the disk does the
// rest of the write without the CPU. On Linux nice values and scheduling policies belong to a
// thread, not the process, and threads the writer starts (the CRC thread) inherit them. Lowering
// is always permitted; raising it again is not (without CAP_SYS_NICE), which is why the snapshot
// copy, which must finish before the next optimizer update, runs on a thread of its own.
#pragma once

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace trainkit::checkpoint {

/// How the asynchronous checkpointer's background write is scheduled against training.
enum class background_priority {
  normal,  // as the training threads (the write competes with compute for the cores)
  low,     // nice 19: a small share when every core is busy (Linux; elsewhere as normal)
  idle,    // SCHED_IDLE: only cores nothing else wants (Linux; elsewhere as normal)
};

namespace detail {

/// Applies `p` to the calling thread. A hint: returns false where the system refused or has no
/// per-thread priorities, and the thread then runs as before.
inline bool set_this_thread_priority(background_priority p) noexcept {
#ifdef __linux__
  switch (p) {
    case background_priority::normal:
      return true;
    case background_priority::low:
      return ::setpriority(PRIO_PROCESS, id_t(::syscall(SYS_gettid)), 19) == 0;
    case background_priority::idle: {
      sched_param param{};
      param.sched_priority = 0;
      return ::sched_setscheduler(0, SCHED_IDLE, &param) == 0;  // 0: the calling thread
    }
  }
  return false;
#else
  return p == background_priority::normal;
#endif
}

}  // namespace detail

}  // namespace trainkit::checkpoint
