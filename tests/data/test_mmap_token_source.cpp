// Tests for trainkit/data/mmap_token_source.hpp: llm.c's sequential order checked against an
// independent computation on shards of known tokens, random order as an exact per-epoch
// permutation, bit-identical resume via position()/seek() across shard and epoch boundaries, and
// the open-time errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "shard_fixture.hpp"
#include "trainkit/data/mmap_token_source.hpp"
#include "trainkit/data/shard_format.hpp"

namespace tk = trainkit;
namespace td = trainkit::data;
using trainkit_test::temp_dir_test;

namespace {

// Shard s holds token[i] = (base(s) + i) % 50000: every expected value is computable.
std::uint16_t known_token(std::size_t shard, std::size_t i) {
  return static_cast<std::uint16_t>((shard * 10007 + i) % 50000);
}

std::vector<std::uint16_t> known_tokens(std::size_t shard, std::size_t n) {
  std::vector<std::uint16_t> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = known_token(shard, i);
  return t;
}

struct recorded_batch {
  std::vector<std::int32_t> inputs, targets;
  tk::source_position after;
  friend bool operator==(const recorded_batch&, const recorded_batch&) = default;
};

template <class Source>
std::vector<recorded_batch> take(Source& s, int n) {
  std::vector<recorded_batch> out;
  tk::host_batch b;
  for (int i = 0; i < n; ++i) {
    s.next(b);
    out.push_back({b.inputs, b.targets, s.position()});
  }
  return out;
}

class MmapSource : public temp_dir_test {
 protected:
  // Writes shards with the given token counts, all headerless when asked.
  std::string make_shards(const std::vector<std::size_t>& sizes, bool headerless = false,
                          const std::string& stem = "train_") {
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      const auto t = known_tokens(s, sizes[s]);
      const std::string name = stem + std::to_string(100 + s) + ".bin";
      if (headerless)
        write_bytes(name, t.data(), t.size() * 2);
      else
        td::write_shard(path(name), t);
    }
    return path(stem + "*.bin");
  }
};

}  // namespace

TEST_F(MmapSource, SequentialMatchesLlmcOrderAcrossShardsAndEpochs) {
  const std::vector<std::size_t> sizes = {1000, 777, 2050};
  const int B = 3, T = 16;
  td::mmap_token_source src({make_shards(sizes), B, T, 50257});
  EXPECT_EQ(src.num_shards(), 3u);
  EXPECT_EQ(src.total_tokens(), 1000u + 777u + 2050u);

  // llm.c: a shard yields (ntok - 1) / (B*T) batches ("shard_num_samples"); batch i starts at
  // i*B*T and row b of it at (i*B + b)*T.
  int checked = 0;
  tk::host_batch b;
  for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      const std::size_t batches = (sizes[s] - 1) / (B * T);
      for (std::size_t i = 0; i < batches; ++i) {
        src.next(b);
        ASSERT_EQ(b.batch_size, B);
        ASSERT_EQ(b.seq_len, T);
        for (int r = 0; r < B; ++r)
          for (int t = 0; t < T; ++t) {
            const std::size_t at = (i * B + r) * T + t;
            ASSERT_EQ(b.inputs[r * T + t], known_token(s, at)) << epoch << ' ' << s << ' ' << i;
            ASSERT_EQ(b.targets[r * T + t], known_token(s, at + 1));
          }
        ++checked;
      }
    }
    EXPECT_EQ(src.position().epoch, epoch + 1);
    EXPECT_EQ(src.position().shard, 0u);
    EXPECT_EQ(src.position().offset, 0u);
  }
  EXPECT_EQ(checked, 3 * (20 + 16 + 42));
}

TEST_F(MmapSource, ExactFitShardUsesItsLastToken) {
  // B*T+1 tokens exactly: one batch, whose last target is the shard's final token.
  const int B = 2, T = 8;
  td::mmap_token_source src({make_shards({B * T + 1, B * T + 6}), B, T, 50257});
  tk::host_batch b;
  src.next(b);
  EXPECT_EQ(b.targets.back(), known_token(0, B * T));
  EXPECT_EQ(src.position(), (tk::source_position{0, 1, 0, 0}));
  src.next(b);
  EXPECT_EQ(b.inputs.front(), known_token(1, 0));
  EXPECT_EQ(src.position(), (tk::source_position{1, 0, 0, 0}));
  src.next(b);
  EXPECT_EQ(b.inputs.front(), known_token(0, 0));
}

TEST_F(MmapSource, SingleExactFitShardRepeats) {
  const int B = 2, T = 8;
  td::mmap_token_source src({make_shards({B * T + 1}), B, T, 50257});
  tk::host_batch a, b;
  src.next(a);
  EXPECT_EQ(a.targets.back(), known_token(0, B * T));
  EXPECT_EQ(src.position(), (tk::source_position{1, 0, 0, 0}));
  src.next(b);
  EXPECT_EQ(a.inputs, b.inputs);
}

TEST_F(MmapSource, RandomOrderIsAPermutationPerEpoch) {
  const std::vector<std::size_t> sizes = {1000, 333, 1210};
  const int B = 5, T = 32;
  td::mmap_token_source src({make_shards(sizes), B, T, 50257, td::order_kind::random, 1234});
  // Windows start at k*T with k < (ntok-1)/T in each shard.
  std::set<std::pair<std::size_t, std::size_t>> all;  // (shard, start)
  for (std::size_t s = 0; s < sizes.size(); ++s)
    for (std::size_t k = 0; k < (sizes[s] - 1) / T; ++k) all.insert({s, k * T});
  ASSERT_EQ(src.windows_per_epoch(), all.size());
  ASSERT_NE(all.size() % B, 0u) << "test wants an epoch that ends mid-batch";

  // Total tokens < 50000, so a token value identifies (shard, index) uniquely.
  auto locate = [&](std::int32_t tok) -> std::pair<std::size_t, std::size_t> {
    for (std::size_t s = 0; s < sizes.size(); ++s)
      for (std::size_t i = 0; i < sizes[s]; ++i)
        if (known_token(s, i) == tok) return {s, i};
    return {999, 0};
  };
  std::vector<std::pair<std::size_t, std::size_t>> stream;
  tk::host_batch b;
  const std::size_t epochs = 3;
  while (stream.size() < epochs * all.size()) {
    src.next(b);
    for (int r = 0; r < B; ++r) {
      const auto w = locate(b.inputs[r * T]);
      for (int t = 0; t < T; ++t) {  // a contiguous T+1 window of one shard
        ASSERT_EQ(b.inputs[r * T + t], known_token(w.first, w.second + t));
        ASSERT_EQ(b.targets[r * T + t], known_token(w.first, w.second + t + 1));
      }
      stream.push_back(w);
    }
  }
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> per_epoch;
  for (std::size_t e = 0; e < epochs; ++e) {
    per_epoch.emplace_back(stream.begin() + e * all.size(), stream.begin() + (e + 1) * all.size());
    std::set<std::pair<std::size_t, std::size_t>> seen(per_epoch[e].begin(), per_epoch[e].end());
    EXPECT_EQ(seen.size(), all.size()) << "a window repeats in epoch " << e;
    EXPECT_EQ(seen, all) << "epoch " << e;
  }
  EXPECT_NE(per_epoch[0], per_epoch[1]);
  EXPECT_NE(per_epoch[1], per_epoch[2]);
  EXPECT_EQ(src.position().seed, 1234u);
}

TEST_F(MmapSource, RandomOrderIsReproducibleFromTheSeed) {
  const std::string pattern = make_shards({900, 1300});
  auto run = [&](std::uint64_t seed) {
    td::mmap_token_source s({pattern, 4, 16, 50257, td::order_kind::random, seed});
    return take(s, 40);
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST_F(MmapSource, EpochPermutationIsAPermutationAndSeedDependent) {
  const auto p = td::epoch_permutation(1000, 5, 0);
  std::vector<std::uint32_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (std::uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_EQ(p, td::epoch_permutation(1000, 5, 0));
  EXPECT_NE(p, td::epoch_permutation(1000, 5, 1));
  // Epoch e of seed s is seed s+e's epoch 0: documented so any epoch can be rebuilt directly.
  EXPECT_EQ(td::epoch_permutation(1000, 5, 1), td::epoch_permutation(1000, 6, 0));
}

TEST(UniformBelow, EveryResidueAppears) {
  std::mt19937_64 eng(3);
  std::vector<int> counts(7, 0);
  for (int i = 0; i < 70000; ++i) ++counts[td::uniform_below(eng, 7)];
  for (int c : counts) {  // expected 10000 each; 6 sigma ~ 560
    EXPECT_GT(c, 9400);
    EXPECT_LT(c, 10600);
  }
  EXPECT_EQ(td::uniform_below(eng, 1), 0u);
}

namespace {

// For every k, a fresh source seeked to the position after k batches yields exactly the
// batches the uninterrupted source yields after its k-th.
void expect_resume_exact(const td::mmap_source_config& cfg, int horizon, int tail) {
  td::mmap_token_source full(cfg);
  const auto reference = take(full, horizon + tail);
  for (int k = 0; k <= horizon; ++k) {
    td::mmap_token_source fresh(cfg);
    const tk::source_position at = k == 0 ? fresh.position() : reference[std::size_t(k) - 1].after;
    fresh.seek(tk::source_position::parse(at.to_string()));  // through the manifest text
    const auto resumed = take(fresh, tail);
    for (int i = 0; i < tail; ++i)
      ASSERT_EQ(resumed[std::size_t(i)], reference[std::size_t(k + i)]) << "k=" << k << " i=" << i;
  }
}

}  // namespace

TEST_F(MmapSource, SequentialResumeIsBitIdentical) {
  // 4 + 2 + 6 batches per epoch with B*T = 32: 20 batches cross both shard and epoch boundaries.
  const std::string pattern = make_shards({4 * 32 + 1, 2 * 32 + 20, 6 * 32 + 31});
  expect_resume_exact({pattern, 4, 8, 50257}, 30, 6);
}

TEST_F(MmapSource, RandomResumeIsBitIdentical) {
  const std::string pattern = make_shards({200, 150, 333});  // 24+18+41 = 83 windows of T=8
  td::mmap_source_config cfg{pattern, 5, 8, 50257, td::order_kind::random, 99};
  expect_resume_exact(cfg, 40, 6);  // 40 batches of 5 windows: more than two epochs
}

TEST_F(MmapSource, SeekOnTheSameSourceRewinds) {
  td::mmap_token_source src({make_shards({500, 700}), 2, 16, 50257, td::order_kind::random, 3});
  take(src, 5);
  const tk::source_position p = src.position();
  const auto first = take(src, 30);
  src.seek(p);
  EXPECT_EQ(take(src, 30), first);
}

TEST_F(MmapSource, RandomSeekAdoptsThePositionsSeed) {
  const std::string pattern = make_shards({500, 700});
  td::mmap_token_source a({pattern, 2, 16, 50257, td::order_kind::random, 11});
  take(a, 3);
  const tk::source_position p = a.position();
  const auto expected = take(a, 10);
  td::mmap_token_source b({pattern, 2, 16, 50257, td::order_kind::random, 12});
  b.seek(p);
  EXPECT_EQ(take(b, 10), expected);
}

TEST_F(MmapSource, ResetRestartsForEvaluation) {
  td::mmap_token_source val({make_shards({300, 300}), 2, 16, 50257});
  const auto first = take(val, 5);
  val.reset();
  EXPECT_EQ(take(val, 5), first);
}

TEST_F(MmapSource, MovedSourceContinues) {
  const std::string pattern = make_shards({400, 300});
  td::mmap_token_source a({pattern, 2, 16, 50257});
  td::mmap_token_source ref({pattern, 2, 16, 50257});
  take(a, 4);
  take(ref, 4);
  td::mmap_token_source moved(std::move(a));
  EXPECT_EQ(take(moved, 12), take(ref, 12));
}

TEST_F(MmapSource, BadSeekIsRejectedAndLeavesTheSourceAlone) {
  td::mmap_token_source src({make_shards({300, 300}), 2, 16, 50257});
  td::mmap_token_source ref({path("train_*.bin"), 2, 16, 50257});
  take(src, 2);
  take(ref, 2);
  EXPECT_THROW(src.seek({0, 2, 0, 0}), tk::config_error);    // no shard 2
  EXPECT_THROW(src.seek({0, 1, 301, 0}), tk::config_error);  // past the end of shard 1
  EXPECT_EQ(take(src, 10), take(ref, 10));

  td::mmap_token_source rnd({path("train_*.bin"), 2, 16, 50257, td::order_kind::random, 1});
  EXPECT_THROW(rnd.seek({0, 0, rnd.windows_per_epoch() + 1, 1}), tk::config_error);
}

TEST_F(MmapSource, BatchIsResizedToTheSourceShape) {
  td::mmap_token_source src({make_shards({300}), 3, 5, 50257});
  tk::host_batch b(7, 9);
  src.next(b);
  EXPECT_EQ(b.batch_size, 3);
  EXPECT_EQ(b.seq_len, 5);
  EXPECT_EQ(b.inputs.size(), 15u);
  EXPECT_EQ(b.targets.size(), 15u);
}

TEST_F(MmapSource, ShardsAreOrderedByName) {
  // Written in reverse; glob order must still be by name.
  td::write_shard(path("b_2.bin"), known_tokens(2, 100));
  td::write_shard(path("b_1.bin"), known_tokens(1, 100));
  td::write_shard(path("b_0.bin"), known_tokens(0, 100));
  td::mmap_token_source src({path("b_*.bin"), 1, 99, 50257});
  tk::host_batch b;
  for (std::size_t s = 0; s < 3; ++s) {
    EXPECT_EQ(src.shard_path(s), path("b_" + std::to_string(s) + ".bin"));
    src.next(b);
    EXPECT_EQ(b.inputs[0], known_token(s, 0));
  }
}

// ---- open-time errors -------------------------------------------------------------------------

TEST_F(MmapSource, NoMatchNamesThePattern) {
  const std::string pattern = path("nothing_*.bin");
  try {
    td::mmap_token_source src({pattern, 1, 8});
    FAIL();
  } catch (const tk::config_error& e) {
    EXPECT_NE(std::string(e.what()).find(pattern), std::string::npos) << e.what();
  }
}

TEST_F(MmapSource, ShardTooShortForOneBatchIsConfigError) {
  make_shards({1000, 32});  // second shard: 32 < 2*16+1
  try {
    td::mmap_token_source src({path("train_*.bin"), 2, 16});
    FAIL();
  } catch (const tk::config_error& e) {
    EXPECT_NE(std::string(e.what()).find(path("train_101.bin")), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("33"), std::string::npos) << e.what();
  }
}

TEST_F(MmapSource, OutOfVocabularyTokenIsFormatErrorNamingFileIndexValue) {
  auto t = known_tokens(0, 500);
  t[321] = 50257;
  td::write_shard(path("v_0.bin"), t);
  try {
    td::mmap_token_source src({path("v_*.bin"), 2, 16, 50257});
    FAIL();
  } catch (const tk::format_error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find(path("v_0.bin")), std::string::npos) << w;
    EXPECT_NE(w.find("321"), std::string::npos) << w;
    EXPECT_NE(w.find("50257"), std::string::npos) << w;
  }
  EXPECT_NO_THROW(td::mmap_token_source({path("v_*.bin"), 2, 16, 50304}));
}

TEST_F(MmapSource, CorruptShardIsFormatErrorNamingTheFile) {
  td::write_shard(path("c_0.bin"), known_tokens(0, 500));
  const std::string bad = write_raw_shard("c_1.bin", {20240520, 2, 1}, {7});
  try {
    td::mmap_token_source src({path("c_*.bin"), 2, 16});
    FAIL();
  } catch (const tk::format_error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}

TEST_F(MmapSource, ImpossibleConfigIsConfigErrorNamingTheField) {
  const std::string pattern = make_shards({300});
  auto message = [](const td::mmap_source_config& c) -> std::string {
    try {
      td::mmap_token_source src(c);
    } catch (const tk::config_error& e) {
      return e.what();
    }
    return "no config_error";
  };
  EXPECT_EQ(message({pattern, 0, 16}), "mmap_source_config.batch_size must be >= 1: 0");
  EXPECT_EQ(message({pattern, 2, 0}), "mmap_source_config.seq_len must be >= 1: 0");
  EXPECT_EQ(message({pattern, 2, 16, 70000}),
            "mmap_source_config.vocab_size must be in [1, 65536] for uint16 token shards: 70000");
  EXPECT_EQ(message({"", 2, 16}).rfind("mmap_source_config.pattern is empty", 0), 0u);
  td::mmap_source_config ranked{pattern, 2, 16};
  ranked.rank = 2;
  ranked.world_size = 2;
  EXPECT_EQ(message(ranked),
            "mmap_source_config.rank 2 is not in [0, mmap_source_config.world_size 2)");
}

TEST(Order, ParseNamesTheBadValue) {
  EXPECT_EQ(td::parse_order("sequential"), td::order_kind::sequential);
  EXPECT_EQ(td::parse_order("random"), td::order_kind::random);
  EXPECT_EQ(td::parse_order(td::to_string(td::order_kind::random)), td::order_kind::random);
  try {
    td::parse_order("shuffled");
    FAIL();
  } catch (const tk::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("shuffled"), std::string::npos);
  }
}

TEST_F(MmapSource, HeaderlessShardsOnlyWithTheirLayoutAndThenTheSameBatches) {
  const std::vector<std::size_t> sizes = {1000, 777};
  const std::string llmc = make_shards(sizes, false, "a_");
  const std::string raw = make_shards(sizes, true, "b_");
  td::mmap_source_config cfg{raw, 2, 16, 50257};
  try {
    td::mmap_token_source bad(cfg);
    ADD_FAILURE() << "headerless shards were read as llm.c shards";
  } catch (const td::shard_magic_error& e) {
    EXPECT_NE(std::string(e.what()).find(path("b_100.bin")), std::string::npos) << e.what();
  }
  cfg.layout = td::shard_layout::headerless_uint16;
  td::mmap_token_source headerless(cfg);
  td::mmap_token_source headered({llmc, 2, 16, 50257});
  EXPECT_EQ(headerless.total_tokens(), headered.total_tokens());
  const auto a = take(headerless, 50), b = take(headered, 50);
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].inputs, b[i].inputs) << i;
    ASSERT_EQ(a[i].targets, b[i].targets) << i;
  }
}

namespace {

// Rank r of n yields batches r, r+n, r+2n, ... of the one-process stream, and every rank reports
// the one-process position after the round; a rank resumed from that position continues its
// slice. `rounds` rounds of n batches.
void expect_rank_slices(td::mmap_source_config cfg, int n, int rounds) {
  td::mmap_token_source one(cfg);
  const auto reference = take(one, n * rounds);
  for (int r = 0; r < n; ++r) {
    td::mmap_source_config rc = cfg;
    rc.rank = r;
    rc.world_size = n;
    td::mmap_token_source mine(rc);
    const auto got = take(mine, rounds);
    for (int k = 0; k < rounds; ++k) {
      const recorded_batch& want = reference[std::size_t(k * n + r)];
      ASSERT_EQ(got[std::size_t(k)].inputs, want.inputs) << "rank " << r << " round " << k;
      ASSERT_EQ(got[std::size_t(k)].targets, want.targets) << "rank " << r << " round " << k;
      // The position after a round is one process's after the round's last batch.
      ASSERT_EQ(got[std::size_t(k)].after, reference[std::size_t(k * n + n - 1)].after)
          << "rank " << r << " round " << k;
    }
    // Resuming this rank from the position of round 3 continues with its round 4.
    td::mmap_token_source resumed(rc);
    resumed.seek(got[2].after);
    const auto tail = take(resumed, 1);
    ASSERT_EQ(tail[0].inputs, got[3].inputs) << "rank " << r;
  }
}

}  // namespace

TEST_F(MmapSource, RankSlicesPartitionTheSequentialStreamAcrossShardsAndEpochs) {
  const std::string pattern = make_shards({4 * 32 + 1, 3 * 32 + 20, 6 * 32 + 31});  // 13/epoch
  expect_rank_slices({pattern, 4, 8, 50257}, 2, 12);
  expect_rank_slices({pattern, 4, 8, 50257}, 3, 10);
}

TEST_F(MmapSource, RankSlicesPartitionTheRandomStreamAcrossEpochs) {
  const std::string pattern = make_shards({200, 150, 333});  // 83 windows of T=8
  expect_rank_slices({pattern, 5, 8, 50257, td::order_kind::random, 99}, 2, 20);
  expect_rank_slices({pattern, 5, 8, 50257, td::order_kind::random, 99}, 3, 12);
}

TEST_F(MmapSource, RankOutsideTheWorldIsConfigError) {
  const std::string pattern = make_shards({500});
  td::mmap_source_config c{pattern, 2, 8, 50257};
  c.rank = 2;
  c.world_size = 2;
  EXPECT_THROW(td::mmap_token_source{c}, tk::config_error);
  c.rank = 0;
  c.world_size = 0;
  EXPECT_THROW(td::mmap_token_source{c}, tk::config_error);
}
