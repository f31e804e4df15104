// Tests of the batch-size ramp (trainer/batch_ramp.hpp, trainer_config::batch_ramp; issue 38):
// the stages it climbs, the micro-batches and tokens each step of a real run takes, that off is
// today's loop, and that a run stopped in the middle of the ramp and resumed from its checkpoint
// continues bit for bit as the unbroken run.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <trainkit/trainkit.hpp>

namespace tk = trainkit;
namespace fs = std::filesystem;

namespace {

struct temp_dir {
  fs::path path;
  temp_dir() {
    static int counter = 0;
    path = fs::temp_directory_path() /
           ("trainkit-ramp-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
};

std::string write_shard(const fs::path& dir, std::size_t n) {
  std::mt19937 rng(3);
  std::vector<std::uint16_t> tokens(n);
  for (std::size_t i = 0; i < n; ++i)
    tokens[i] = std::uint16_t(rng() % 8 == 0 ? rng() % 200 : (i * 7) % 50 + 1);
  const auto path = (dir / "train_000.bin").string();
  tk::data::write_shard(path, tokens);
  return path;
}

tk::model::gpt2_config tiny_model() {
  return {.max_seq_len = 32,
          .vocab_size = 200,
          .padded_vocab_size = 256,
          .num_layers = 2,
          .num_heads = 2,
          .channels = 32};
}

using ramp_trainer =
    tk::trainer<tk::data::mmap_token_source, tk::prefetch::threaded<2>, tk::model::gpt2_cpu,
                tk::optim::adamw_cpu, tk::checkpoint::sync_checkpointer>;

// B = 2, T = 16 (32 tokens a micro-batch), 128 tokens a full step, ramp from 32 over 6 steps.
std::unique_ptr<ramp_trainer> make(const std::string& shard, const fs::path& ckpt, int steps,
                                   bool resume, tk::batch_ramp_config ramp) {
  tk::trainer_config c;
  c.steps = steps;
  c.total_batch_tokens = 128;
  c.batch_ramp = ramp;
  c.schedule.kind = tk::optim::schedule_kind::cosine;
  c.schedule.max_lr = 2e-3f;
  c.schedule.warmup_steps = 2;
  c.resume = resume;
  c.output.console.quiet = true;
  return std::make_unique<ramp_trainer>(c, tk::data::mmap_token_source({shard, 2, 16, 200}),
                                        std::nullopt, tk::model::gpt2_cpu(tiny_model(), 7),
                                        tk::optim::adamw_config{},
                                        tk::checkpoint::sync_checkpointer({ckpt, 0}));
}

}  // namespace

TEST(BatchRamp, ClimbsInWholeRoundsFromStartToFull) {
  const tk::batch_ramp_config ramp{.start_tokens = 32, .steps = 6};
  std::vector<int> rounds;
  for (std::uint64_t s = 0; s < 9; ++s) rounds.push_back(tk::ramp_rounds(ramp, 128, 32, s));
  // tokens 32 + 96·s/6 = 32, 48, 64, 80, 96, 112, then 128: rounds of 32 tokens, floored.
  EXPECT_EQ(rounds, (std::vector<int>{1, 1, 2, 2, 3, 3, 4, 4, 4}));
  // Off: always the full batch. A start below one round still takes one.
  EXPECT_EQ(tk::ramp_rounds({}, 128, 32, 0), 4);
  EXPECT_EQ(tk::ramp_rounds({.start_tokens = 32, .steps = 0}, 128, 32, 0), 4);
  EXPECT_EQ(tk::ramp_rounds({.start_tokens = 1, .steps = 100}, 128, 32, 0), 1);
}

TEST(BatchRamp, EachStepTakesTheRampsTokens) {
  temp_dir dir;
  const auto shard = write_shard(dir.path, 40000);
  const auto r = make(shard, dir.path / "a", 8, false, {.start_tokens = 32, .steps = 6})->run();
  std::vector<std::size_t> tokens;
  for (const auto& m : r.steps) tokens.push_back(m.tokens);
  EXPECT_EQ(tokens, (std::vector<std::size_t>{32, 32, 64, 64, 96, 96, 128, 128}));
}

TEST(BatchRamp, OffIsTodaysLoopBitForBit) {
  temp_dir dir;
  const auto shard = write_shard(dir.path, 40000);
  const auto off = make(shard, dir.path / "a", 4, false, {})->run();
  const auto zero_steps = make(shard, dir.path / "b", 4, false, {.start_tokens = 32})->run();
  ASSERT_EQ(off.steps.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(off.steps[i].tokens, 128u);
    EXPECT_EQ(off.steps[i].loss, zero_steps.steps[i].loss);
    EXPECT_EQ(off.steps[i].grad_norm, zero_steps.steps[i].grad_norm);
  }
}

// Stopped after step 3 (inside the ramp) and resumed: the same losses, norms and final weights as
// the unbroken run.
TEST(BatchRamp, ResumeMidRampIsBitIdentical) {
  temp_dir dir;
  const auto shard = write_shard(dir.path, 40000);
  const tk::batch_ramp_config ramp{.start_tokens = 32, .steps = 6};
  auto straight_t = make(shard, dir.path / "straight", 8, false, ramp);
  const auto straight = straight_t->run();
  auto first_t = make(shard, dir.path / "split", 8, false, ramp);
  first_t->on_step([](const tk::step_metrics& m) { return m.step < 3; });
  const auto first = first_t->run();
  ASSERT_TRUE(first.stopped);
  first_t.reset();
  auto second_t = make(shard, dir.path / "split", 8, true, ramp);
  const auto second = second_t->run();
  ASSERT_TRUE(second.resumed);
  ASSERT_EQ(first.steps.size() + second.steps.size(), straight.steps.size());
  for (std::size_t i = 0; i < second.steps.size(); ++i) {
    EXPECT_EQ(second.steps[i].tokens, straight.steps[3 + i].tokens) << i;
    EXPECT_EQ(second.steps[i].loss, straight.steps[3 + i].loss) << i;
    EXPECT_EQ(second.steps[i].grad_norm, straight.steps[3 + i].grad_norm) << i;
  }
  const auto a = straight_t->model().parameters(), b = second_t->model().parameters();
  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end()));
}

TEST(BatchRamp, ABadRampNamesItsField) {
  tk::trainer_config c;
  c.total_batch_tokens = 128;
  c.batch_ramp = {.start_tokens = 256, .steps = 4};
  const tk::run_shape shape{.batch_size = 2, .seq_len = 16};
  const auto problems = tk::check(c, shape);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].field, "trainer_config.batch_ramp.start_tokens");
  c.batch_ramp = {.start_tokens = 32, .steps = -1};
  ASSERT_EQ(tk::check(c, shape).size(), 1u);
  EXPECT_EQ(tk::check(c, shape)[0].field, "trainer_config.batch_ramp.steps");
}
