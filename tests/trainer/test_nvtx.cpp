// Tests for trainer/nvtx.hpp. Built with TRAINKIT_NVTX=1 when the nvtx3 headers are found (real
// pushes and pops into NVTX, harmless without a profiler attached) and with the no-op otherwise;
// either way the ranges must nest and close exactly once.
#include <gtest/gtest.h>

#include <trainkit/trainer/nvtx.hpp>

namespace tk = trainkit;

TEST(Nvtx, MatchesTheBuildSetting) {
#if defined(TRAINKIT_TEST_EXPECT_NVTX)
  EXPECT_EQ(tk::nvtx_enabled, TRAINKIT_TEST_EXPECT_NVTX != 0);
#else
  GTEST_SKIP() << "no expectation set by the build";
#endif
}

TEST(Nvtx, RangesNestAndEndOnce) {
  tk::nvtx_range outer("outer", tk::nvtx_colors::step);
  EXPECT_EQ(outer.open(), tk::nvtx_enabled);
  {
    tk::nvtx_range inner("inner");
    EXPECT_EQ(inner.open(), tk::nvtx_enabled);
    inner.end();
    EXPECT_FALSE(inner.open());
    inner.end();  // a second end() must not pop the outer range
  }
  EXPECT_EQ(outer.open(), tk::nvtx_enabled);
  outer.end();
  EXPECT_FALSE(outer.open());
}
