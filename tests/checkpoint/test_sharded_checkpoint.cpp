// Tests for trainkit/checkpoint/sharded.hpp without MPI: the ranks are threads of this process
// joined by a communicator built on std::barrier, so the commit protocol runs as it does between
// processes. Saves of 3 shards list every shard in a version 3 manifest and verify; any world size
// (and a whole-tensor load) reads exactly its slice; a rank whose shard cannot be saved leaves no
// checkpoint and no temporary and every rank throws; a corrupt shard read by one rank only makes
// every rank fall back to the older checkpoint; an interrupted save (shards but no top manifest)
// is never loaded; a run of another size is a mismatch on every rank; malformed shard lists are
// refused naming the field.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <barrier>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <numeric>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "trainkit/checkpoint/concepts.hpp"
#include "trainkit/checkpoint/format.hpp"
#include "trainkit/checkpoint/read.hpp"
#include "trainkit/checkpoint/sharded.hpp"
#include "trainkit/checkpoint/sync_checkpointer.hpp"
#include "trainkit/core/crc32c.hpp"

namespace tk = trainkit;
namespace ck = trainkit::checkpoint;
namespace fs = std::filesystem;

namespace {

// What the threads of one world share: a barrier and the sum being formed.
struct thread_world_state {
  explicit thread_world_state(int n) : size(n), sync(n) {}
  int size;
  std::barrier<> sync;
  std::mutex mutex;
  std::vector<double> total;
};

// A save_communicator over threads: every call is collective, as between ranks.
class thread_rank {
 public:
  thread_rank(thread_world_state& w, int rank) : w_(&w), rank_(rank) {}
  int rank() const noexcept { return rank_; }
  int world_size() const noexcept { return w_->size; }
  void sum(std::span<double> values) {
    if (rank_ == 0) w_->total.assign(values.size(), 0.0);
    w_->sync.arrive_and_wait();
    {
      std::lock_guard lock(w_->mutex);
      for (std::size_t i = 0; i < values.size(); ++i) w_->total[i] += values[i];
    }
    w_->sync.arrive_and_wait();
    std::copy(w_->total.begin(), w_->total.end(), values.begin());
    w_->sync.arrive_and_wait();  // nobody starts the next sum before all have read this one
  }
  bool any(bool flag) {
    double v = flag ? 1.0 : 0.0;
    sum(std::span<double>(&v, 1));
    return v != 0.0;
  }

 private:
  thread_world_state* w_;
  int rank_;
};

static_assert(ck::save_communicator<thread_rank>);
static_assert(ck::sharded_checkpointer<ck::sync_checkpointer, thread_rank>);

// Runs body(rank, comm) on `n` threads; the first exception of each rank is kept.
std::vector<std::exception_ptr> on_ranks(int n, const std::function<void(thread_rank&)>& body) {
  thread_world_state world(n);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      thread_rank comm(world, r);
      try {
        body(comm);
      } catch (...) {
        errors[std::size_t(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

std::string message_of(const std::exception_ptr& e) {
  try {
    if (e) std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
  return {};
}

// The cut of `total` elements over `n` ranks, deliberately uneven (not zero1's).
ck::shard_range cut(int rank, int n, std::uint64_t total) {
  auto edge = [&](int r) {
    return total * std::uint64_t(r) * std::uint64_t(r + 1) /
           (std::uint64_t(n) * std::uint64_t(n + 1));
  };
  return {rank, n, edge(rank), edge(rank + 1) - edge(rank), total};
}

constexpr std::uint64_t total = 10007;  // elements of each sharded tensor

// Element i of the whole "optim.m" / "optim.v" of step `step`.
float m_at(std::uint64_t i, std::uint64_t step) {
  return float(i) * 0.5f + float(step);
}
double v_at(std::uint64_t i, std::uint64_t step) {
  return double(i) * -0.25 - double(step);
}

// One rank's buffers: the common part (weights, a step counter) and its slices of m and v.
struct rank_state {
  std::vector<float> weights = std::vector<float>(37);
  std::vector<std::uint64_t> counter = std::vector<std::uint64_t>(1);
  std::vector<float> m;
  std::vector<double> v;
  ck::shard_range range;

  explicit rank_state(ck::shard_range r) : m(r.count), v(r.count), range(r) {}

  void fill(std::uint64_t step) {
    for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = float(i) + float(step) * 100;
    counter[0] = step;
    for (std::uint64_t i = 0; i < range.count; ++i) {
      m[i] = m_at(range.offset + i, step);
      v[i] = v_at(range.offset + i, step);
    }
  }

  bool holds(std::uint64_t step) const {
    rank_state expect(range);
    expect.fill(step);
    return weights == expect.weights && counter == expect.counter && m == expect.m && v == expect.v;
  }

  ck::sharded_checkpoint_state view(std::uint64_t step) {
    ck::sharded_checkpoint_state s;
    s.common.step = step;
    s.common.tensors = {tk::make_state_tensor("model.weights", std::span(weights), {37}),
                        tk::make_state_tensor("optim.step", std::span(counter), {1})};
    s.common.meta = {{"data_position", "somewhere"}};
    const auto n = std::int64_t(range.count);
    s.shard = {tk::make_state_tensor("optim.m", std::span(m), {n}),
               tk::make_state_tensor("optim.v", std::span(v), {n})};
    s.range = range;
    return s;
  }
};

class ShardedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "trainkit_sharded_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Every rank of an `n`-rank world saves step `step`; returns each rank's error.
  std::vector<std::exception_ptr> save(
      int n, std::uint64_t step,
      std::function<void(int, ck::sharded_checkpoint_state&)> spoil = {}) {
    return on_ranks(n, [&](thread_rank& comm) {
      rank_state s(cut(comm.rank(), n, total));
      s.fill(step);
      ck::sharded_checkpoint_state view = s.view(step);
      if (spoil) spoil(comm.rank(), view);
      ck::write_sharded_checkpoint(dir_, view, 0, comm);
    });
  }

  // Every rank of an `n`-rank world resumes; each rank checks it holds step `expect` exactly.
  std::vector<std::exception_ptr> resume(int n, std::uint64_t expect,
                                         std::vector<std::string>* warnings0 = nullptr,
                                         std::uint64_t elements = total) {
    return on_ranks(n, [&](thread_rank& comm) {
      rank_state s(cut(comm.rank(), n, elements));
      ck::sharded_checkpoint_state view = s.view(0);
      std::vector<std::string> warnings;
      if (!ck::load_latest_sharded_checkpoint(dir_, view, comm, warnings))
        throw std::runtime_error("nothing loaded");
      if (view.common.step != expect || view.common.meta.at("data_position") != "somewhere")
        throw std::runtime_error("loaded step " + std::to_string(view.common.step));
      if (!s.holds(expect))
        throw std::runtime_error("rank " + std::to_string(comm.rank()) + " of " +
                                 std::to_string(n) + " holds other values than step " +
                                 std::to_string(expect));
      if (comm.rank() == 0 && warnings0) *warnings0 = warnings;
    });
  }

  fs::path dir_;
};

void expect_no_errors(const std::vector<std::exception_ptr>& errors) {
  for (std::size_t r = 0; r < errors.size(); ++r)
    EXPECT_FALSE(errors[r]) << "rank " << r << ": " << message_of(errors[r]);
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(ShardedCheckpoint, ThreeRanksWriteEveryShardAndTheManifestListsThem) {
  expect_no_errors(save(3, 4));
  EXPECT_EQ(names_in(dir_), std::vector<std::string>{"step_00000004"});
  const fs::path ckpt = dir_ / "step_00000004";
  EXPECT_EQ(names_in(ckpt), (std::vector<std::string>{"manifest.json", "shard_00000", "shard_00001",
                                                      "shard_00002", "tensors.bin"}));
  const ck::manifest m = ck::verify_checkpoint(ckpt);  // every CRC of every file
  EXPECT_EQ(m.version, 3);
  ASSERT_EQ(m.tensors.size(), 2u);
  EXPECT_EQ(m.tensors[0].name, "model.weights");
  ASSERT_EQ(m.shards.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    const ck::shard_entry& sh = m.shards[std::size_t(r)];
    const ck::shard_range expect = cut(r, 3, total);
    EXPECT_EQ(sh.dir, "shard_0000" + std::to_string(r));
    EXPECT_EQ(sh.offset, expect.offset) << "shard " << r;
    EXPECT_EQ(sh.count, expect.count) << "shard " << r;
    ASSERT_EQ(sh.tensors.size(), 2u);
    EXPECT_EQ(sh.tensors[1].name, "optim.v");
    EXPECT_EQ(sh.tensors[1].type, tk::dtype::f64);
    // The CRC listed is that of the slice's bytes as the rank held them.
    rank_state s(expect);
    s.fill(4);
    EXPECT_EQ(sh.tensors[1].crc32c, tk::crc32c(s.v.data(), s.v.size() * sizeof(double)));
  }
  // Round trip of the version 3 manifest text.
  EXPECT_EQ(ck::parse_manifest(ck::manifest_to_json(m), "again"), m);
}

TEST_F(ShardedCheckpoint, EveryWorldSizeLoadsExactlyItsSliceAndAWholeLoadReassemblesIt) {
  expect_no_errors(save(3, 4));
  for (int n : {3, 1, 2, 5}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    expect_no_errors(resume(n, 4));
  }
  // One process of whole-state AdamW: "optim.m" and "optim.v" of shape {total}.
  std::vector<float> weights(37), m(total);
  std::vector<std::uint64_t> counter(1);
  std::vector<double> v(total);
  ck::checkpoint_state whole;
  whole.tensors = {tk::make_state_tensor("model.weights", std::span(weights), {37}),
                   tk::make_state_tensor("optim.m", std::span(m), {std::int64_t(total)}),
                   tk::make_state_tensor("optim.v", std::span(v), {std::int64_t(total)}),
                   tk::make_state_tensor("optim.step", std::span(counter), {1})};
  ck::load_checkpoint(dir_ / "step_00000004", whole);
  for (std::uint64_t i = 0; i < total; ++i) {
    ASSERT_EQ(m[i], m_at(i, 4)) << i;
    ASSERT_EQ(v[i], v_at(i, 4)) << i;
  }
  EXPECT_EQ(counter[0], 4u);
}

// A checkpoint of whole tensors (DDP, one process) resumed by sharded ranks: each takes its slice.
TEST_F(ShardedCheckpoint, ACheckpointOfWholeTensorsIsSlicedForEveryRank) {
  rank_state one(cut(0, 1, total));
  one.fill(6);
  ck::checkpoint_state whole = one.view(6).common;
  whole.tensors.push_back(
      tk::make_state_tensor("optim.m", std::span(one.m), {std::int64_t(total)}));
  whole.tensors.push_back(
      tk::make_state_tensor("optim.v", std::span(one.v), {std::int64_t(total)}));
  ck::write_checkpoint(dir_, whole, 0);
  expect_no_errors(resume(3, 6));
}

TEST_F(ShardedCheckpoint, AShardThatCannotBeSavedCommitsNothingAndEveryRankThrows) {
  expect_no_errors(save(3, 2));
  // Rank 1's state cannot be written (a tensor without data): found by rank 1 alone.
  const auto errors = save(3, 4, [](int rank, ck::sharded_checkpoint_state& s) {
    if (rank == 1) s.shard[0].data = nullptr;
  });
  ASSERT_TRUE(errors[1]);
  EXPECT_NE(message_of(errors[1]).find("has no data"), std::string::npos) << message_of(errors[1]);
  for (int r : {0, 2}) {
    ASSERT_TRUE(errors[std::size_t(r)]) << "rank " << r << " returned as if saved";
    const std::string what = message_of(errors[std::size_t(r)]);
    EXPECT_NE(what.find("step 4 was not saved"), std::string::npos) << what;
    EXPECT_NE(what.find("rank 1 failed"), std::string::npos) << what;
  }
  EXPECT_EQ(names_in(dir_), std::vector<std::string>{"step_00000002"}) << "no temporary left";
  expect_no_errors(resume(3, 2));
}

TEST_F(ShardedCheckpoint, ACorruptShardReadByOneRankMakesEveryRankFallBack) {
  expect_no_errors(save(3, 2));
  expect_no_errors(save(3, 4));
  // Shard 2's moments: under the same cut only rank 2 reads them.
  const fs::path file = dir_ / "step_00000004" / "shard_00002" / "tensors.bin";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  std::vector<std::string> warnings;
  expect_no_errors(resume(3, 2, &warnings));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("step_00000004"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("rank 2"), std::string::npos) << warnings[0];
}

TEST_F(ShardedCheckpoint, AnInterruptedSaveIsNeverLoadedAndIsRemovedByTheNextCheckpointer) {
  expect_no_errors(save(2, 2));
  expect_no_errors(save(2, 4));
  // A save killed before its commit: every shard written, no top manifest, still hidden.
  fs::rename(dir_ / "step_00000004", dir_ / ".tmp.step_00000004");
  fs::remove(dir_ / ".tmp.step_00000004" / "manifest.json");
  expect_no_errors(resume(2, 2));
  const ck::sync_checkpointer fresh({dir_, 0});
  EXPECT_EQ(names_in(dir_), std::vector<std::string>{"step_00000002"});
  ASSERT_EQ(fresh.warnings().size(), 1u);
  EXPECT_NE(fresh.warnings()[0].find(".tmp.step_00000004"), std::string::npos);
}

TEST_F(ShardedCheckpoint, ARunOfAnotherSizeIsAMismatchOnEveryRank) {
  expect_no_errors(save(2, 2));
  const auto errors = resume(2, 2, nullptr, total + 1);
  for (std::size_t r = 0; r < errors.size(); ++r) {
    ASSERT_TRUE(errors[r]) << "rank " << r;
    try {
      std::rethrow_exception(errors[r]);
    } catch (const ck::checkpoint_mismatch& e) {
      EXPECT_NE(std::string(e.what()).find("[10007] (sharded)"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << r << ": not a checkpoint_mismatch: " << e.what();
    }
  }
}

TEST_F(ShardedCheckpoint, MalformedShardListsAreRefusedNamingTheField) {
  expect_no_errors(save(2, 2));
  const fs::path manifest_path = dir_ / "step_00000002" / "manifest.json";
  const std::string good = ck::manifest_to_json(ck::read_manifest(manifest_path));
  const ck::manifest m = ck::read_manifest(manifest_path);
  const std::string second = std::to_string(m.shards[1].offset);
  // Edits `good` and gives it a matching checksum, so the field checks behind it are reached.
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    const std::string marker = ",\n  \"manifest_crc32c\": ";
    text.resize(text.rfind(marker));
    return text + marker + std::to_string(tk::crc32c(text.data(), text.size())) + "\n}\n";
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {replaced("\"dir\": \"shard_00001\"", "\"dir\": \"../../etc\""), "is not 'shard_00001'"},
      {replaced("{\"rank\": 1", "{\"rank\": 2"), "out of order"},
      {replaced("\"offset\": " + second + ", \"count\"", "\"offset\": 1, \"count\""),
       "leaves a gap or overlap"},
      {replaced("\"name\": \"optim.v\"", "\"name\": \"optim.w\""), "is not in shards[0]"},
      {replaced("\"name\": \"optim.m\"", "\"name\": \"model.weights\""), "rank 0's part"},
      {replaced(",\n  \"shards\": [", ",\n  \"shardz\": ["), "missing \"shards\""},
  };
  for (const auto& [text, needle] : cases) {
    SCOPED_TRACE(needle);
    std::ofstream(manifest_path, std::ios::binary | std::ios::trunc) << text;
    try {
      ck::read_manifest(manifest_path);
      ADD_FAILURE() << "accepted";
    } catch (const tk::format_error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
}

}  // namespace
