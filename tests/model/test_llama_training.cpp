// tests/model/test_llama_training.cpp — llama_cpu through the unchanged trainer: it learns the
// synthetic stream, and a run stopped after N steps and resumed from its checkpoint (sync and
// asynchronous checkpointers) continues bit for bit as an uninterrupted run, weights included.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "llama_training.hpp"
#include "trainkit/checkpoint/asio_checkpointer.hpp"
#include "trainkit/checkpoint/no_checkpoint.hpp"
#include "trainkit/checkpoint/sync_checkpointer.hpp"
#include "trainkit/reduce/single.hpp"

namespace {

namespace fs = std::filesystem;
using namespace llama_test;

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("trainkit_llama_training_" + name);
  fs::remove_all(d);
  return d;
}

TEST(LlamaTraining, LearnsTheSyntheticStream) {
  const run_record r = train(0, 1, 2, 30, tk::checkpoint::no_checkpoint{}, tk::reduce::single{});
  ASSERT_EQ(r.loss.size(), 30u);
  EXPECT_LT(r.loss.back(), 0.8 * r.loss.front()) << r.loss.front() << " → " << r.loss.back();
}

template <class MakeCheckpointer>
void expect_resume_bit_identical(MakeCheckpointer make, const std::string& name) {
  constexpr int n = 4;
  const run_record straight =
      train(0, 1, 2, 2 * n, make(scratch(name + "_straight")), tk::reduce::single{});
  const fs::path split = scratch(name + "_split");
  const run_record first = train(0, 1, 2, 2 * n, make(split), tk::reduce::single{}, false, n);
  ASSERT_TRUE(first.result.stopped);
  const run_record second = train(0, 1, 2, 2 * n, make(split), tk::reduce::single{}, true);
  ASSERT_TRUE(second.result.resumed);
  ASSERT_EQ(first.loss.size() + second.loss.size(), straight.loss.size());
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(same_bits(first.loss[i], straight.loss[i])) << "step " << i + 1;
    EXPECT_TRUE(same_bits(second.loss[i], straight.loss[n + i])) << "step " << n + i + 1;
    EXPECT_TRUE(same_bits(second.grad_norm[i], straight.grad_norm[n + i])) << "step " << n + i + 1;
  }
  ASSERT_EQ(second.parameters.size(), straight.parameters.size());
  EXPECT_EQ(std::memcmp(second.parameters.data(), straight.parameters.data(),
                        straight.parameters.size() * sizeof(float)),
            0);
}

TEST(LlamaTraining, SyncCheckpointResumesBitForBit) {
  expect_resume_bit_identical(
      [](const fs::path& d) {
        return tk::checkpoint::sync_checkpointer({d, 2});
      },
      "sync");
}

TEST(LlamaTraining, AsyncCheckpointResumesBitForBit) {
  expect_resume_bit_identical(
      [](const fs::path& d) {
        tk::checkpoint::asio_checkpointer_config c;
        c.dir = d;
        c.keep_last = 2;
        c.fail_on_error = true;
        return tk::checkpoint::asio_checkpointer(c);
      },
      "async");
}

}  // namespace
