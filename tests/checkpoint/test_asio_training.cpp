// The asynchronous checkpointer inside a real training run (gpt2_cpu, AdamW, mmap'd shards): saving
// every few steps changes no loss; a run stopped and resumed from its async checkpoint continues
// bit-identically, and its final checkpoint is byte-identical to the synchronous checkpointer's; a
// failing write is printed as a warning by the trainer while training goes on to the end, and with
// fail_on_error it ends the run with io_error. With a copy slower than a step, each checkpoint
// still holds the state of its own step (the next update waits for the copy, and that wait is
// counted as ckpt_stall_ms), also the one saved when the run stops or ends.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <trainkit/checkpoint/asio_checkpointer.hpp>
#include <trainkit/trainkit.hpp>

namespace tk = trainkit;
namespace ck = trainkit::checkpoint;
namespace fs = std::filesystem;

namespace {

tk::model::gpt2_config tiny_model() {
  return {.max_seq_len = 32,
          .vocab_size = 200,
          .padded_vocab_size = 256,
          .num_layers = 2,
          .num_heads = 2,
          .channels = 32};
}

class AsioTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "trainkit_asio_train_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    std::mt19937 rng(1);
    std::vector<std::uint16_t> tokens(6000);
    for (std::size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = std::uint16_t(rng() % 8 == 0 ? rng() % 200 : (i * 7) % 50 + 1);
    tk::data::write_shard((root_ / "train_000.bin").string(), tokens);
  }
  void TearDown() override { fs::remove_all(root_); }

  template <class Checkpointer>
  using trainer_with = tk::trainer<tk::data::mmap_token_source, tk::prefetch::threaded<2>,
                                   tk::model::gpt2_cpu, tk::optim::adamw_cpu, Checkpointer>;

  template <class Checkpointer>
  std::unique_ptr<trainer_with<Checkpointer>> make(Checkpointer c, int steps, int ckpt_every,
                                                   bool resume, std::ostream& out = std::cout) {
    tk::trainer_config cfg;
    cfg.steps = steps;
    cfg.schedule.kind = tk::optim::schedule_kind::cosine;
    cfg.schedule.max_lr = 2e-3f;
    cfg.schedule.warmup_steps = 2;
    cfg.total_batch_tokens = 128;  // two micro-batches per step
    cfg.ckpt_every = ckpt_every;
    cfg.resume = resume;
    cfg.output.console.quiet = false;
    cfg.output.console.log_every = 1000;  // only warnings and the last step print
    cfg.meta["model"] = tiny_model().to_string();
    const tk::data::mmap_source_config data{(root_ / "train_*.bin").string(), 4, 16, 200,
                                            tk::data::order_kind::random,     7};
    return std::make_unique<trainer_with<Checkpointer>>(
        cfg, tk::data::mmap_token_source(data), std::nullopt, tk::model::gpt2_cpu(tiny_model(), 3),
        tk::optim::adamw_config{}, std::move(c), out);
  }

  fs::path root_;
};

std::string read_all(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// host_stager whose copy (on the writer thread) starts 200 ms late: slower than a step of the
// tiny model, so the next optimizer update reaches before_update while the copy has not run.
class late_stager {
 public:
  static constexpr bool reads_device_memory = false;
  static constexpr bool queues_copies = false;
  static constexpr auto delay = std::chrono::milliseconds(200);

  std::byte* reserve(std::size_t bytes) { return host_.reserve(bytes); }
  void stage(std::span<const ck::stage_copy> copies) {
    std::this_thread::sleep_for(delay);
    host_.stage(copies);
  }
  void order_after_stage() noexcept {}
  void wait_staged() noexcept {}
  void unstage(std::span<const ck::stage_copy> copies) { host_.unstage(copies); }

 private:
  ck::host_stager host_;
};
static_assert(ck::stager<late_stager>);

// The asynchronous checkpointer over late_stager, whose before_update also holds the loop for
// 100 ms on its own thread: a known wait, to check how the trainer books it.
class slow_update_checkpointer {
 public:
  static constexpr bool reads_device_memory = false;
  static constexpr auto hold = std::chrono::milliseconds(100);

  explicit slow_update_checkpointer(ck::asio_checkpointer_config c) : inner_(std::move(c)) {}
  void save(const ck::checkpoint_state& s) { inner_.save(s); }
  bool load_latest(ck::checkpoint_state& s) { return inner_.load_latest(s); }
  void wait() { inner_.wait(); }
  void before_update() {
    std::this_thread::sleep_for(hold);
    inner_.before_update();
  }

 private:
  ck::basic_asio_checkpointer<late_stager> inner_;
};
static_assert(ck::checkpointer<slow_update_checkpointer> &&
              ck::defers_snapshot<slow_update_checkpointer>);

}  // namespace

TEST_F(AsioTraining, ACheckpointHoldsTheStateOfItsStepNotOfTheNextUpdate) {
  std::ostringstream quiet;
  using late_checkpointer = ck::basic_asio_checkpointer<late_stager>;
  // The reference: the synchronous checkpointer writes every step's state before returning.
  make(ck::sync_checkpointer({root_ / "sync"}), 5, 1, false, quiet)->run();
  // Saves at 2 and 4, the last at 5 with the run's end right after it.
  make(late_checkpointer({root_ / "late"}), 5, 2, false, quiet)->run();
  // Stopped after step 3: its save is the last thing before the run returns.
  auto stopping = make(late_checkpointer({root_ / "stopped"}), 5, 2, false, quiet);
  stopping->on_step([](const tk::step_metrics& m) { return m.step < 3; });
  ASSERT_TRUE(stopping->run().stopped);
  stopping.reset();

  const auto same_as_sync = [&](const fs::path& dir, std::uint64_t step) {
    const std::string name = ck::step_dir_name(step);
    const std::string expected = read_all(root_ / "sync" / name / "tensors.bin");
    ASSERT_FALSE(expected.empty()) << name;
    EXPECT_EQ(read_all(dir / name / "tensors.bin"), expected) << dir << " " << name;
  };
  for (std::uint64_t step : {2, 4, 5}) same_as_sync(root_ / "late", step);
  for (std::uint64_t step : {2, 3}) same_as_sync(root_ / "stopped", step);

  // Every update waits in before_update first, and the trainer books that wait as
  // ckpt_stall_ms, not as optimizer time (the steps still tile: the phases sum to dt_ms).
  const auto held = make(slow_update_checkpointer({root_ / "held"}), 5, 2, false, quiet)->run();
  ASSERT_EQ(held.steps.size(), 5u);
  for (const tk::step_metrics& m : held.steps) {
    EXPECT_GE(m.ckpt_stall_ms, 100.0) << "step " << m.step;
    EXPECT_NEAR(m.phases_ms() + m.other_ms, m.dt_ms, 0.02 * m.dt_ms) << "step " << m.step;
  }
  for (std::uint64_t step : {2, 4, 5}) same_as_sync(root_ / "held", step);
}

TEST_F(AsioTraining, SavingEveryFewStepsChangesNoLoss) {
  std::ostringstream quiet;
  const auto plain = make(ck::no_checkpoint{}, 8, 0, false, quiet)->run();
  const auto saved = make(ck::asio_checkpointer({root_ / "ckpt"}), 8, 2, false, quiet)->run();
  ASSERT_EQ(plain.steps.size(), saved.steps.size());
  for (std::size_t i = 0; i < plain.steps.size(); ++i) {
    EXPECT_EQ(plain.steps[i].loss, saved.steps[i].loss) << "step " << i + 1;
    EXPECT_EQ(plain.steps[i].grad_norm, saved.steps[i].grad_norm) << "step " << i + 1;
  }
  std::vector<std::uint64_t> steps;
  for (const auto& c : ck::list_checkpoints(root_ / "ckpt")) steps.push_back(c.step);
  EXPECT_EQ(steps, (std::vector<std::uint64_t>{2, 4, 6, 8}));
}

// The first save's stall must not include mapping and faulting in the staging memory: the trainer
// reserves it (prepares_saves) before step 1, and no save allocates again.
TEST_F(AsioTraining, TheStagingMemoryIsReservedBeforeStepOneAndNeverInASave) {
  std::ostringstream quiet;
  auto t = make(ck::asio_checkpointer({root_ / "ckpt"}), 6, 2, false, quiet);
  EXPECT_EQ(t->checkpointer().stager().allocations(), 0u);  // the constructor reserves nothing
  std::vector<std::size_t> seen;                            // allocations so far, after each step
  t->on_step([&](const tk::step_metrics&) {
    seen.push_back(t->checkpointer().stager().allocations());
    return true;
  });
  t->run();
  EXPECT_EQ(seen, (std::vector<std::size_t>(6, 1)));
  EXPECT_EQ(t->checkpointer().stager().allocations(), 1u);
  EXPECT_EQ(t->checkpointer().completed_saves(), 3u);
}

TEST_F(AsioTraining, ResumedRunContinuesBitIdentically) {
  std::ostringstream quiet;
  constexpr int n = 5;
  const auto straight =
      make(ck::asio_checkpointer({root_ / "straight"}), 2 * n, 3, false, quiet)->run();
  auto first_trainer = make(ck::asio_checkpointer({root_ / "split", 2}), 2 * n, 3, false, quiet);
  first_trainer->on_step([](const tk::step_metrics& m) { return m.step < std::uint64_t(n); });
  const auto first = first_trainer->run();  // stops after step n with a final (async) save
  ASSERT_TRUE(first.stopped);
  first_trainer.reset();
  const auto second =
      make(ck::asio_checkpointer({root_ / "split", 2}), 2 * n, 3, true, quiet)->run();
  ASSERT_TRUE(second.resumed);
  ASSERT_EQ(second.first_step, std::uint64_t(n + 1));
  ASSERT_EQ(first.steps.size() + second.steps.size(), straight.steps.size());
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(first.steps[i].loss, straight.steps[i].loss) << "step " << i + 1;
    EXPECT_EQ(second.steps[i].loss, straight.steps[n + i].loss) << "step " << n + i + 1;
    EXPECT_EQ(second.steps[i].grad_norm, straight.steps[n + i].grad_norm) << "step " << n + i + 1;
  }
  // The final states match byte for byte, and the async files equal the sync checkpointer's.
  const auto sync_run =
      make(ck::sync_checkpointer({root_ / "sync"}), 2 * n, 0, false, quiet)->run();
  const std::string last = ck::step_dir_name(2 * n);
  const std::string reference = read_all(root_ / "sync" / last / "tensors.bin");
  ASSERT_FALSE(reference.empty());
  EXPECT_EQ(read_all(root_ / "straight" / last / "tensors.bin"), reference);
  EXPECT_EQ(read_all(root_ / "split" / last / "tensors.bin"), reference);
}

TEST_F(AsioTraining, AFailedWriteIsAWarningAndTrainingGoesOn) {
  std::ostringstream out;
  ck::asio_checkpointer_config cfg{.dir = root_ / "ckpt", .before_write = [](const fs::path& p) {
                                     if (p.filename() == ck::step_dir_name(4))
                                       throw tk::io_error("cannot write '" + p.string() +
                                                          "/tensors.bin': No space left on device");
                                   }};
  const auto r = make(ck::asio_checkpointer(cfg), 8, 2, false, out)->run();
  EXPECT_EQ(r.last_step, 8u);
  EXPECT_FALSE(r.stopped);
  const std::string text = out.str();
  // Reported by the trainer at the next save (step 6), with path and errno text.
  EXPECT_NE(text.find("warning: checkpoint: checkpoint of step 4 was not saved: cannot write '" +
                      (root_ / "ckpt" / ck::step_dir_name(4)).string() +
                      "/tensors.bin': No space left on device (the newest complete checkpoint, "
                      "step 2, is intact)"),
            std::string::npos)
      << text;
  std::vector<std::uint64_t> steps;
  for (const auto& c : ck::list_checkpoints(root_ / "ckpt")) steps.push_back(c.step);
  EXPECT_EQ(steps, (std::vector<std::uint64_t>{2, 6, 8}));
}

TEST_F(AsioTraining, FailOnErrorEndsTheRunWithAnIoError) {
  std::ostringstream out;
  ck::asio_checkpointer_config cfg{
      .dir = root_ / "ckpt", .fail_on_error = true, .before_write = [](const fs::path& p) {
        if (p.filename() == ck::step_dir_name(4))
          throw tk::io_error("cannot write '" + p.string() + "': Input/output error");
      }};
  auto t = make(ck::asio_checkpointer(cfg), 8, 2, false, out);
  EXPECT_THROW(t->run(), tk::io_error);
  EXPECT_LE(t->step(), 6u);  // stopped no later than the save after the failed one
}
