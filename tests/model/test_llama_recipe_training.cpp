// tests/model/test_llama_recipe_training.cpp — the speedrun recipe's Llama (llama_config::recipe;
// issue 38) through the trainer: the trainer tells the model the step (the windows of step k are
// the windows step k used), and a run with the whole recipe (Muon with its variants, per-role
// rates, a batch ramp and every model part) stopped and resumed through a checkpoint is
// bit-identical to an unbroken one. A whole-trainer suite (TRAINKIT_TRAINER_TESTS); the model
// against PyTorch is test_llama_recipe.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "llama_recipe_config.hpp"  // small_config
#include "llama_training.hpp"       // run_record, record_run, same_bits
#include "trainkit/checkpoint/no_checkpoint.hpp"
#include "trainkit/checkpoint/sync_checkpointer.hpp"
#include "trainkit/data/synthetic_source.hpp"
#include "trainkit/model/llama/cpu.hpp"
#include "trainkit/optim/muon_cpu.hpp"
#include "trainkit/prefetch/threaded_prefetcher.hpp"
#include "trainkit/reduce/single.hpp"
#include "trainkit/trainer/trainer.hpp"

namespace {

namespace tk = trainkit;
namespace tmod = trainkit::model;
namespace fs = std::filesystem;
using llama_recipe_test::small_config;

// ---- through the trainer ------------------------------------------------------------------------

constexpr int run_batch = 2, run_seq = 8;

tmod::llama_config recipe_config() {
  tmod::llama_config c = small_config();
  c.recipe.value_embeddings = 1;
  c.recipe.unet_skips = true;
  c.recipe.logit_cap = 15.0f;
  c.recipe.zero_init_projections = true;
  c.recipe.windows = {.short_window = 2,
                      .long_window = 8,
                      .start = 2,
                      .grow_steps = 8,
                      .block = 1,
                      .pattern = "SL"};
  return c;
}

tk::data::synthetic_source synthetic() {
  return tk::data::synthetic_source({.batch_size = run_batch,
                                     .seq_len = run_seq,
                                     .vocab_size = 100,
                                     .alphabet = 20,
                                     .branching = 2,
                                     .seed = 5});
}

using llama_test::record_run;
using llama_test::run_record;
using llama_test::same_bits;

// The speedrun recipe's optimizer half: Muon with Polar Express, NorMuon, cautious weight decay
// and its momentum warm-up; AdamW rates per role.
tk::optim::muon_config recipe_muon() {
  tk::optim::muon_config m;
  m.orthogonalizer = tk::optim::muon_orthogonalizer::polar_express;
  m.normuon = true;
  m.cautious_weight_decay = true;
  m.weight_decay = 0.05f;
  m.momentum_warmup_steps = 4;
  m.adamw.lr_scales.embedding = 2.0f;
  m.adamw.lr_scales.head = 0.5f;
  m.adamw.lr_scales.norm = 0.25f;
  return m;
}

template <class Checkpointer>
run_record train(int steps, Checkpointer checkpointer, int micro_max, bool ramp,
                 bool resume = false, int stop_after = 0) {
  tk::trainer_config cfg;
  cfg.steps = steps;
  cfg.resume = resume;
  cfg.output.console.quiet = true;
  cfg.total_batch_tokens = std::size_t(micro_max) * run_batch * run_seq;
  if (ramp) cfg.batch_ramp = {.start_tokens = std::size_t(run_batch * run_seq), .steps = 4};
  cfg.schedule.kind = tk::optim::schedule_kind::cosine;
  cfg.schedule.warmup_steps = 2;
  cfg.schedule.max_lr = 3e-3f;
  cfg.grad_clip = 0.5f;
  std::ostringstream quiet;
  tk::trainer<tk::data::synthetic_source, tk::prefetch::threaded<2>, tmod::llama_cpu,
              tk::optim::muon_cpu, Checkpointer, tk::reduce::single>
      t(cfg, synthetic(), std::nullopt, tmod::llama_cpu(recipe_config(), 11), recipe_muon(),
        std::move(checkpointer), tk::reduce::single{}, quiet);
  return record_run(t, stop_after);
}

// The loss the trainer logs for step k + 1 is the model at the weights after k steps, with the
// windows of step k: the trainer tells the model the step (not 0, not k + 1, not "the end"). The
// weights after k steps come from the same (k + 1)-step run stopped after k (the schedule depends
// on the run's length). Not k < 2: with the zero-initialised head, only the head moves in the first
// step, so the first two steps' losses are blind to the windows.
TEST(LlamaRecipe, TheTrainerTellsTheModelTheStep) {
  const tmod::llama_config c = recipe_config();
  for (int k : {2, 4}) {
    const run_record before = train(k + 1, tk::checkpoint::no_checkpoint{}, 1, false, false, k);
    const run_record after = train(k + 1, tk::checkpoint::no_checkpoint{}, 1, false);
    ASSERT_EQ(after.loss.size(), std::size_t(k + 1));
    tk::data::synthetic_source source = synthetic();
    tk::host_batch b;
    for (int i = 0; i <= k; ++i) source.next(b);
    const tk::batch_view<tk::host_memory> view{b.inputs.data(), b.targets.data(), run_batch,
                                               run_seq};
    tmod::llama_cpu m(recipe_config(), 11);
    std::copy(before.parameters.begin(), before.parameters.end(), m.parameters().begin());
    m.set_step(k);
    EXPECT_TRUE(same_bits(double(m.forward(view)), after.loss.back())) << "step " << k;
    for (std::int64_t other : {std::int64_t(0), std::int64_t(k) + 1, std::int64_t(8)}) {
      ASSERT_NE(c.attention_window(1, other), c.attention_window(1, k)) << k << " vs " << other;
      m.set_step(other);
      EXPECT_FALSE(same_bits(double(m.forward(view)), after.loss.back())) << k << " vs " << other;
    }
  }
}

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("trainkit_llama_recipe_" + name);
  fs::remove_all(d);
  return d;
}

// The whole recipe, stopped mid-ramp and mid-window-growth and resumed from its checkpoint, is
// an unbroken run bit for bit: losses, gradient norms and every weight.
TEST(LlamaRecipe, ResumeWithTheRecipeIsBitIdentical) {
  constexpr int n = 3, steps = 7;
  auto make = [](const fs::path& d) { return tk::checkpoint::sync_checkpointer({d, 2}); };
  const run_record straight = train(steps, make(scratch("straight")), 2, true);
  const fs::path split = scratch("split");
  const run_record first = train(steps, make(split), 2, true, false, n);
  ASSERT_TRUE(first.result.stopped);
  const run_record second = train(steps, make(split), 2, true, true);
  ASSERT_TRUE(second.result.resumed);
  ASSERT_EQ(first.loss.size() + second.loss.size(), straight.loss.size());
  for (std::size_t i = 0; i < first.loss.size(); ++i)
    EXPECT_TRUE(same_bits(first.loss[i], straight.loss[i])) << "step " << i + 1;
  for (std::size_t i = 0; i < second.loss.size(); ++i) {
    EXPECT_TRUE(same_bits(second.loss[i], straight.loss[n + i])) << "step " << n + i + 1;
    EXPECT_TRUE(same_bits(second.grad_norm[i], straight.grad_norm[n + i])) << "step " << n + i + 1;
  }
  ASSERT_EQ(second.parameters.size(), straight.parameters.size());
  EXPECT_EQ(std::memcmp(second.parameters.data(), straight.parameters.data(),
                        straight.parameters.size() * sizeof(float)),
            0);
  // And it learns: the recipe's parameters moved (the zero projections too).
  EXPECT_LT(straight.loss.back(), straight.loss.front());
  fs::remove_all(split);
}

}  // namespace
