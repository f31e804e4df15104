// The Muon family inside the trainer with gpt2_cpu (a d2-shaped model at test width): it learns,
// its state goes into checkpoints, and a run stopped and resumed is bit-identical to one that ran
// straight through, as the trainer's own resume tests require of AdamW.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <trainkit/trainkit.hpp>

#include "trainkit/optim/muon_cpu.hpp"

namespace tk = trainkit;
namespace fs = std::filesystem;

namespace {

tk::model::gpt2_config tiny_model() {  // d2's depth and heads at width 32
  return {.max_seq_len = 32,
          .vocab_size = 200,
          .padded_vocab_size = 256,
          .num_layers = 2,
          .num_heads = 2,
          .channels = 32};
}

struct temp_dir {
  fs::path path;
  temp_dir() {
    static int counter = 0;
    path = fs::temp_directory_path() /
           ("trainkit-muon-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
};

std::string write_pattern_shard(const fs::path& dir, const std::string& name, std::size_t n,
                                unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint16_t> tokens(n);
  for (std::size_t i = 0; i < n; ++i)
    tokens[i] = std::uint16_t(rng() % 8 == 0 ? rng() % 200 : (i * 7) % 50 + 1);
  const auto path = (dir / name).string();
  tk::data::write_shard(path, tokens);
  return path;
}

tk::trainer_config quiet_config(int steps) {
  tk::trainer_config c;
  c.steps = steps;
  c.schedule.kind = tk::optim::schedule_kind::constant;
  c.schedule.max_lr = 2e-3f;
  c.output.console.quiet = true;
  return c;
}

tk::optim::muon_config muon_settings(float schedule_max_lr) {
  tk::optim::muon_config m;
  m.lr_ratio = double(0.02f) / double(schedule_max_lr);  // Muon's 0.02 at the schedule's peak
  m.weight_decay = 0.01f;
  return m;
}

template <class Checkpointer>
using muon_trainer = tk::trainer<tk::data::mmap_token_source, tk::prefetch::threaded<3>,
                                 tk::model::gpt2_cpu, tk::optim::muon_cpu, Checkpointer>;

}  // namespace

TEST(MuonTraining, LossFalls) {
  temp_dir dir;
  write_pattern_shard(dir.path, "train_000.bin", 6000, 1);
  const tk::data::mmap_source_config data{(dir.path / "train_*.bin").string(), 4, 16, 200,
                                          tk::data::order_kind::sequential,    1};
  muon_trainer<tk::checkpoint::no_checkpoint> t(
      quiet_config(30), tk::data::mmap_token_source(data), std::nullopt,
      tk::model::gpt2_cpu(tiny_model(), 1), muon_settings(2e-3f), tk::checkpoint::no_checkpoint{});
  const auto r = t.run();
  ASSERT_EQ(r.steps.size(), 30u);
  double tail = 0;
  for (std::size_t i = 25; i < 30; ++i) tail += r.steps[i].loss / 5;
  EXPECT_LT(tail, r.steps.front().loss - 1.0);
}

TEST(MuonTraining, StopAndResumeIsBitIdentical) {
  temp_dir dir;
  write_pattern_shard(dir.path, "train_000.bin", 3000, 1);
  write_pattern_shard(dir.path, "train_001.bin", 2500, 2);
  const tk::data::mmap_source_config data{(dir.path / "train_*.bin").string(), 4, 16, 200,
                                          tk::data::order_kind::random,        99};
  constexpr int n = 4;
  auto make = [&](const fs::path& ckpt, bool resume) {
    auto cfg = quiet_config(2 * n);
    cfg.schedule.kind = tk::optim::schedule_kind::cosine;
    cfg.schedule.warmup_steps = 2;
    cfg.total_batch_tokens = 128;  // two micro-batches per step
    cfg.resume = resume;
    cfg.meta["model"] = tiny_model().to_string();
    return std::make_unique<muon_trainer<tk::checkpoint::sync_checkpointer>>(
        cfg, tk::data::mmap_token_source(data), std::nullopt, tk::model::gpt2_cpu(tiny_model(), 11),
        muon_settings(cfg.schedule.max_lr), tk::checkpoint::sync_checkpointer({ckpt, 2}));
  };
  auto straight = make(dir.path / "ckpt_straight", false)->run();
  auto first_trainer = make(dir.path / "ckpt_split", false);
  first_trainer->on_step([](const tk::step_metrics& m) { return m.step < std::uint64_t(n); });
  auto first = first_trainer->run();
  ASSERT_TRUE(first.stopped);
  ASSERT_EQ(first.last_step, std::uint64_t(n));
  // The checkpoint holds Muon's momentum and AdamW's moments under their own names.
  const auto listed = tk::checkpoint::list_checkpoints(dir.path / "ckpt_split");
  ASSERT_FALSE(listed.empty());
  const auto m = tk::checkpoint::read_manifest(listed.back().path / "manifest.json");
  std::vector<std::string> names;
  for (const auto& t : m.tensors) names.push_back(t.name);
  for (const char* want : {"optim.muon.momentum", "optim.adamw.m", "optim.adamw.v", "optim.step"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  auto second = make(dir.path / "ckpt_split", true)->run();
  ASSERT_TRUE(second.resumed);
  EXPECT_EQ(second.first_step, std::uint64_t(n + 1));
  ASSERT_EQ(first.steps.size() + second.steps.size(), straight.steps.size());
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(first.steps[i].loss, straight.steps[i].loss) << "step " << i + 1;
    EXPECT_EQ(second.steps[i].loss, straight.steps[n + i].loss) << "step " << n + i + 1;
    EXPECT_EQ(second.steps[i].grad_norm, straight.steps[n + i].grad_norm) << "step " << n + i + 1;
  }
}

TEST(MuonTraining, AdamwCheckpointIsNotTakenForMuons) {
  // A checkpoint of an AdamW run has no momentum: resuming it with Muon is refused, not guessed.
  temp_dir dir;
  write_pattern_shard(dir.path, "train_000.bin", 3000, 1);
  const tk::data::mmap_source_config data{(dir.path / "train_*.bin").string(), 4, 16, 200,
                                          tk::data::order_kind::sequential,    1};
  auto cfg = quiet_config(2);
  cfg.meta["model"] = tiny_model().to_string();
  tk::trainer<tk::data::mmap_token_source, tk::prefetch::threaded<3>, tk::model::gpt2_cpu,
              tk::optim::adamw_cpu, tk::checkpoint::sync_checkpointer>
      adamw(cfg, tk::data::mmap_token_source(data), std::nullopt,
            tk::model::gpt2_cpu(tiny_model(), 1), tk::optim::adamw_config{},
            tk::checkpoint::sync_checkpointer({dir.path / "ckpt", 2}));
  adamw.run();
  cfg.resume = true;
  cfg.steps = 4;
  muon_trainer<tk::checkpoint::sync_checkpointer> muon(
      cfg, tk::data::mmap_token_source(data), std::nullopt, tk::model::gpt2_cpu(tiny_model(), 1),
      muon_settings(cfg.schedule.max_lr),
      tk::checkpoint::sync_checkpointer({dir.path / "ckpt", 2}));
  try {
    muon.run();
    ADD_FAILURE() << "resumed an AdamW checkpoint with Muon";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("optim.adamw.m"), std::string::npos) << e.what();
  }
}
