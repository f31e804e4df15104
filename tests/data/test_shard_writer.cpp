// Tests for include/trainkit/data/shard_writer.hpp and data/worker_pool.hpp: the token stream
// comes back from the shards in order, cut at the requested sizes under llm.c's names (val shard
// 000000, training shards from 000001); bad sizes are refused; the pool runs every task, hands
// results back through their futures in submission order and carries a task's exception.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <future>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/data/shard_format.hpp"
#include "trainkit/data/shard_writer.hpp"
#include "trainkit/data/worker_pool.hpp"

namespace fs = std::filesystem;
namespace td = trainkit::data;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("trainkit_shard_writer_" + std::to_string(::getpid()) + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<std::uint16_t> iota_tokens(std::size_t n, std::uint16_t first) {
  std::vector<std::uint16_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

}  // namespace

TEST(ShardWriter, CutsTheStreamIntoValThenTrainingShardsInOrder) {
  const fs::path d = fresh_dir("order");
  td::shard_writer w(d, "fw", 7, 10);
  const auto all = iota_tokens(35, 100);
  // Appended in uneven pieces: shard boundaries depend only on the stream.
  w.append(std::span(all).subspan(0, 3));
  w.append(std::span(all).subspan(3, 20));
  w.append(std::span(all).subspan(23, 12));
  w.finish();
  const std::vector<std::string> names{"fw_val_000000.bin", "fw_train_000001.bin",
                                       "fw_train_000002.bin", "fw_train_000003.bin"};
  EXPECT_EQ(w.written(), names);
  EXPECT_EQ(w.val_written(), 7u);
  EXPECT_EQ(w.train_written(), 28u);
  std::vector<std::uint16_t> back;
  const std::vector<std::size_t> sizes{7, 10, 10, 8};
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto tokens = td::read_shard((d / names[i]).string());
    EXPECT_EQ(tokens.size(), sizes[i]) << names[i];
    back.insert(back.end(), tokens.begin(), tokens.end());
  }
  EXPECT_EQ(back, all);
  fs::remove_all(d);
}

TEST(ShardWriter, NoValShardWhenValTokensIsZeroAndNothingPendingWritesNothing) {
  const fs::path d = fresh_dir("noval");
  td::shard_writer w(d, "x", 0, 4);
  const auto all = iota_tokens(8, 1);
  w.append(all);
  w.finish();
  w.finish();  // nothing pending: no empty shard
  EXPECT_EQ(w.written(), (std::vector<std::string>{"x_train_000001.bin", "x_train_000002.bin"}));
  EXPECT_EQ(w.val_written(), 0u);
  fs::remove_all(d);
}

TEST(ShardWriter, RefusesBadSizes) {
  EXPECT_THROW(td::shard_writer(".", "p", 0, 0), trainkit::config_error);
  EXPECT_THROW(td::shard_writer(".", "p", -1, 10), trainkit::config_error);
}

TEST(WorkerPool, ResultsComeBackInSubmissionOrderAndErrorsThroughTheirFuture) {
  td::worker_pool<int> pool(3);
  EXPECT_EQ(pool.threads(), 3);
  std::atomic<int> ran{0};
  std::vector<std::future<int>> futures;
  for (int i = 0; i < 50; ++i)
    futures.push_back(pool.submit([i, &ran] {
      ++ran;
      if (i == 17) throw std::runtime_error("task 17");
      return i * i;
    }));
  for (int i = 0; i < 50; ++i) {
    if (i == 17) {
      EXPECT_THROW(futures[std::size_t(i)].get(), std::runtime_error);
    } else {
      EXPECT_EQ(futures[std::size_t(i)].get(), i * i);
    }
  }
  EXPECT_EQ(ran.load(), 50);
  EXPECT_THROW(td::worker_pool<int>(0), trainkit::config_error);
}
