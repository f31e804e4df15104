// Tests of comm/group_guard.hpp: a group opened by the guard is closed exactly once, by end() or,
// when something inside the group throws, by the destructor — driven by fake group calls that
// record what the guard asked for (NCCL's own calls, comm/nccl_group.hpp, need a GPU).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "trainkit/comm/group_guard.hpp"

namespace {

using trainkit::comm::group_guard;

/// Records "start", "end" and "close" in `log`; throws from start or end when told to.
struct recording_calls {
  std::vector<std::string>* log = nullptr;
  bool fail_start = false;
  bool fail_end = false;

  void start() {
    log->push_back("start");
    if (fail_start) throw std::runtime_error("start failed");
  }
  void end() {
    log->push_back("end");
    if (fail_end) throw std::runtime_error("end failed");
  }
  void close() noexcept { log->push_back("close"); }
};

static_assert(trainkit::comm::group_calls<recording_calls>);

using log_t = std::vector<std::string>;

TEST(GroupGuard, EndClosesTheGroupOnceAndTheDestructorAddsNothing) {
  log_t log;
  {
    group_guard<recording_calls> group(recording_calls{&log});
    EXPECT_TRUE(group.open());
    group.end();
    EXPECT_FALSE(group.open());
  }
  EXPECT_EQ(log, (log_t{"start", "end"}));
}

TEST(GroupGuard, AThrowInsideTheGroupClosesItOnTheWayOut) {
  log_t log;
  EXPECT_THROW(
      {
        group_guard<recording_calls> group(recording_calls{&log});
        log.push_back("collective");
        throw std::runtime_error("a collective's check failed");
      },
      std::runtime_error);
  EXPECT_EQ(log, (log_t{"start", "collective", "close"}));
}

TEST(GroupGuard, AFailedEndIsReportedAndNotRetried) {
  log_t log;
  try {
    group_guard<recording_calls> group(recording_calls{&log, false, true});
    group.end();
    FAIL() << "end() should have thrown";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "end failed");
  }
  EXPECT_EQ(log, (log_t{"start", "end"}));
}

TEST(GroupGuard, AFailedStartLeavesNothingToClose) {
  log_t log;
  EXPECT_THROW(group_guard<recording_calls>(recording_calls{&log, true, false}),
               std::runtime_error);
  EXPECT_EQ(log, (log_t{"start"}));
}

TEST(GroupGuard, NestedGroupsCloseInnerFirst) {
  log_t order;
  struct ordered_calls {
    log_t* order;
    const char* name;
    void start() { order->push_back(std::string(name) + " start"); }
    void end() { order->push_back(std::string(name) + " end"); }
    void close() noexcept { order->push_back(std::string(name) + " close"); }
  };
  EXPECT_THROW(
      {
        group_guard<ordered_calls> outer(ordered_calls{&order, "outer"});
        group_guard<ordered_calls> inner(ordered_calls{&order, "inner"});
        throw std::runtime_error("inside both");
      },
      std::runtime_error);
  EXPECT_EQ(order, (log_t{"outer start", "inner start", "inner close", "outer close"}));
}

}  // namespace
