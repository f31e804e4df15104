// Tests for trainkit/data/synthetic_source.hpp: the stream follows its Markov chain, is
// deterministic per seed, resumes exactly, and rejects impossible configurations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "trainkit/data/synthetic_source.hpp"

namespace tk = trainkit;
namespace td = trainkit::data;

TEST(SyntheticSource, RowsAreChainWalksWithShiftedTargets) {
  td::synthetic_source src({.batch_size = 3, .seq_len = 50, .alphabet = 40, .branching = 3});
  tk::host_batch b;
  for (int n = 0; n < 20; ++n) {
    src.next(b);
    ASSERT_EQ(b.batch_size, 3);
    ASSERT_EQ(b.seq_len, 50);
    for (int r = 0; r < 3; ++r)
      for (int t = 0; t < 50; ++t) {
        const std::int32_t in = b.inputs[r * 50 + t], tg = b.targets[r * 50 + t];
        ASSERT_GE(in, 0);
        ASSERT_LT(in, 40);
        if (t + 1 < 50) {
          ASSERT_EQ(tg, b.inputs[r * 50 + t + 1]);
        }
        const auto succ = src.successors(in);
        ASSERT_NE(std::find(succ.begin(), succ.end(), tg), succ.end()) << in << "->" << tg;
      }
  }
}

TEST(SyntheticSource, SuccessorsAreDistinctAndInTheAlphabet) {
  td::synthetic_source src({.alphabet = 16, .branching = 16, .seed = 5});
  for (int a = 0; a < 16; ++a) {
    const auto s = src.successors(a);
    const std::set<std::int32_t> uniq(s.begin(), s.end());
    EXPECT_EQ(uniq.size(), 16u);
    EXPECT_GE(*uniq.begin(), 0);
    EXPECT_LT(*uniq.rbegin(), 16);
  }
  EXPECT_THROW(src.successors(16), tk::config_error);
}

TEST(SyntheticSource, TransitionsAreRoughlyUniformOverSuccessors) {
  td::synthetic_source src({.batch_size = 8, .seq_len = 256, .alphabet = 8, .branching = 4});
  std::map<std::pair<int, int>, int> counts;
  std::map<int, int> from;
  tk::host_batch b;
  for (int n = 0; n < 50; ++n) {
    src.next(b);
    for (std::size_t i = 0; i < b.inputs.size(); ++i) {
      ++counts[{b.inputs[i], b.targets[i]}];
      ++from[b.inputs[i]];
    }
  }
  for (const auto& [pair, c] : counts) {
    const double expected = from[pair.first] / 4.0;  // ~3200 each
    EXPECT_NEAR(c, expected, 6 * std::sqrt(expected)) << pair.first << "->" << pair.second;
  }
  EXPECT_EQ(counts.size(), 8u * 4u);
  EXPECT_NEAR(src.loss_floor(), std::log(4.0), 1e-12);
}

TEST(SyntheticSource, DeterministicPerSeed) {
  auto run = [](std::uint64_t seed) {
    td::synthetic_source s({.batch_size = 2, .seq_len = 32, .seed = seed});
    std::vector<std::int32_t> all;
    tk::host_batch b;
    for (int i = 0; i < 5; ++i) {
      s.next(b);
      all.insert(all.end(), b.inputs.begin(), b.inputs.end());
    }
    return all;
  };
  EXPECT_EQ(run(1), run(1));
  EXPECT_NE(run(1), run(2));
}

TEST(SyntheticSource, RowsAndBatchesDiffer) {
  td::synthetic_source src({.batch_size = 4, .seq_len = 64});
  tk::host_batch a, b;
  src.next(a);
  src.next(b);
  EXPECT_NE(a.inputs, b.inputs);
  for (int r = 1; r < 4; ++r)
    EXPECT_FALSE(std::equal(a.inputs.begin(), a.inputs.begin() + 64, a.inputs.begin() + r * 64));
}

TEST(SyntheticSource, SeekResumesExactly) {
  const td::synthetic_config cfg{.batch_size = 2, .seq_len = 16, .seed = 9};
  td::synthetic_source a(cfg);
  tk::host_batch b;
  for (int i = 0; i < 7; ++i) a.next(b);
  const tk::source_position p = a.position();
  EXPECT_EQ(p.offset, 7u);
  std::vector<std::vector<std::int32_t>> expected;
  for (int i = 0; i < 5; ++i) {
    a.next(b);
    expected.push_back(b.targets);
  }
  td::synthetic_source fresh(cfg);
  fresh.seek(p);
  for (int i = 0; i < 5; ++i) {
    fresh.next(b);
    EXPECT_EQ(b.targets, expected[std::size_t(i)]) << i;
  }
  td::synthetic_source other({.batch_size = 2, .seq_len = 16, .seed = 10});
  EXPECT_THROW(other.seek(p), tk::config_error);
}

// Rank r of n yields global batches r, r+n, ... and reports the one-process position after each
// round of n, so a checkpoint's position means the same for any number of ranks.
TEST(SyntheticSource, RankSlicesPartitionTheStream) {
  const td::synthetic_config cfg{.batch_size = 2, .seq_len = 16, .seed = 9};
  td::synthetic_source one(cfg);
  tk::host_batch b;
  std::vector<std::vector<std::int32_t>> reference;
  for (int i = 0; i < 12; ++i) {
    one.next(b);
    reference.push_back(b.inputs);
  }
  for (int n : {2, 3}) {
    for (int r = 0; r < n; ++r) {
      td::synthetic_config rc = cfg;
      rc.rank = r;
      rc.world_size = n;
      td::synthetic_source mine(rc);
      for (int k = 0; k < 12 / n; ++k) {
        mine.next(b);
        EXPECT_EQ(b.inputs, reference[std::size_t(k * n + r)]) << n << " ranks, rank " << r;
        EXPECT_EQ(mine.position().offset, std::uint64_t((k + 1) * n));
      }
      td::synthetic_source resumed(rc);
      resumed.seek({0, 0, std::uint64_t(n), cfg.seed});  // after round 1
      resumed.next(b);
      EXPECT_EQ(b.inputs, reference[std::size_t(n + r)]);
    }
  }
}

TEST(SyntheticSource, ImpossibleConfigIsConfigError) {
  EXPECT_THROW(td::synthetic_source({.rank = 1, .world_size = 1}), tk::config_error);
  EXPECT_THROW(td::synthetic_source({.rank = -1, .world_size = 2}), tk::config_error);
  EXPECT_THROW(td::synthetic_source({.world_size = 0}), tk::config_error);
  EXPECT_THROW(td::synthetic_source({.batch_size = 0}), tk::config_error);
  EXPECT_THROW(td::synthetic_source({.seq_len = 0}), tk::config_error);
  EXPECT_THROW(td::synthetic_source({.vocab_size = 10, .alphabet = 11}), tk::config_error);
  EXPECT_THROW(td::synthetic_source({.alphabet = 4, .branching = 5}), tk::config_error);
  EXPECT_THROW(td::synthetic_source({.branching = 0}), tk::config_error);
}
