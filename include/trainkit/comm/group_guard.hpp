// trainkit/comm/group_guard.hpp — a group of collectives that is always closed, also when a call
// inside it throws.
//
// NCCL fuses the collectives issued between ncclGroupStart and ncclGroupEnd into one launch. A
// check that throws in between (a bad argument, a failed enqueue) would otherwise leave the group
// open on this thread: the next collective joins it and never launches, and ncclCommDestroy may
// hang. `group_guard` opens the group in its constructor; `end()` closes it and reports a failure;
// a guard destroyed while still open (stack unwinding) closes it quietly, since the exception
// already on its way says what went wrong. The calls are a policy so that the guard's order of
// start and end can be tested without NCCL (tests/comm/test_group_guard.cpp);
// comm/nccl_group.hpp gives NCCL's.
#pragma once

#include <concepts>
#include <utility>

namespace trainkit::comm {

/// Requires:
///  - `start()`: opens a group; throws on failure (then nothing is open);
///  - `end()`: closes it; throws on failure (the group is closed either way);
///  - `close()`: closes it without throwing, for a group abandoned by an exception.
template <class C>
concept group_calls = requires(C c) {
  c.start();
  c.end();
  { c.close() }
  noexcept;
};

template <group_calls Calls>
class group_guard {
 public:
  explicit group_guard(Calls calls = {}) : calls_(std::move(calls)) { calls_.start(); }

  group_guard(const group_guard&) = delete;
  group_guard& operator=(const group_guard&) = delete;

  ~group_guard() {
    if (open_) calls_.close();
  }

  /// Closes the group, launching its collectives; throws what `Calls::end` throws. Marked closed
  /// first: a failed end is not retried by the destructor.
  void end() {
    open_ = false;
    calls_.end();
  }

  bool open() const noexcept { return open_; }

 private:
  Calls calls_;
  bool open_ = true;
};

}  // namespace trainkit::comm
