// Tests for trainer/config.hpp: check() reports every problem of a trainer configuration by its
// field path and changes nothing, and the values a configuration implies (micro-batches per step,
// the schedule's length, a non-zero rank's output) are computed from it.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <trainkit/trainer/config.hpp>

namespace tk = trainkit;

namespace {

tk::run_shape shape(std::size_t B, std::size_t T, int ranks = 1) {
  return {.batch_size = B, .seq_len = T, .ranks = ranks};
}

std::vector<std::string> fields(const std::vector<tk::config_problem>& problems) {
  std::vector<std::string> f;
  for (const auto& p : problems) f.push_back(p.field);
  return f;
}

}  // namespace

TEST(TrainerConfigCheck, DefaultsPassForAnyBatchShape) {
  EXPECT_TRUE(tk::check(tk::trainer_config{}, shape(4, 64)).empty());
  EXPECT_TRUE(tk::check(tk::trainer_config{}, shape(1, 1, 8)).empty());
}

TEST(TrainerConfigCheck, ReportsEveryProblemByItsFieldPath) {
  tk::trainer_config cfg;
  cfg.steps = -1;
  cfg.total_batch_tokens = 100;  // B·T = 64
  cfg.eval_every = -2;
  cfg.eval_batches = 0;
  cfg.ckpt_every = -3;
  cfg.schedule.max_lr = -1;
  cfg.schedule.warmup_steps = -4;
  cfg.schedule.final_lr_frac = 2;
  cfg.schedule.decay_frac = -0.5f;
  tk::run_shape s = shape(4, 16);
  s.has_validation = true;
  s.val_batch_size = 2;
  s.val_seq_len = 16;
  const tk::trainer_config before = cfg;
  const auto problems = tk::check(cfg, s);
  EXPECT_EQ(cfg, before);  // check() changes nothing
  EXPECT_EQ(
      fields(problems),
      (std::vector<std::string>{
          "trainer_config.steps", "trainer_config.total_batch_tokens", "trainer_config.eval_every",
          "trainer_config.eval_batches", "run_shape.val_batch_size", "trainer_config.ckpt_every",
          "trainer_config.schedule.max_lr", "trainer_config.schedule.warmup_steps",
          "trainer_config.schedule.final_lr_frac", "trainer_config.schedule.decay_frac"}));
  // Each message is a sentence that starts with its field and quotes the value.
  for (const auto& p : problems) EXPECT_EQ(p.message.rfind(p.field + " ", 0), 0u) << p.message;
  EXPECT_EQ(problems[0].message, "trainer_config.steps must be >= 0: -1");
  EXPECT_EQ(problems[1].message,
            "trainer_config.total_batch_tokens 100 is not a multiple of the training source's "
            "batch_size x seq_len = 64");
  EXPECT_EQ(problems[8].message, "trainer_config.schedule.final_lr_frac must be in [0,1]: 2");

  // The trainer throws them together; what() lists them all.
  try {
    tk::require_valid(cfg, s);
    ADD_FAILURE() << "no config_error";
  } catch (const tk::config_error& e) {
    EXPECT_EQ(e.problems(), problems);
    const std::string what = e.what();
    for (const auto& p : problems) EXPECT_NE(what.find(p.message), std::string::npos) << what;
  }
}

TEST(TrainerConfigCheck, GradClipIsTheTrainersAndMustBeFiniteAndNonNegative) {
  tk::trainer_config cfg;
  EXPECT_EQ(cfg.grad_clip, 1.0f) << "GPT-2 / llm.c's threshold is the default";
  cfg.grad_clip = 0;  // off
  EXPECT_TRUE(tk::check(cfg, shape(4, 16)).empty());
  for (const float bad : {-1.0f, INFINITY, NAN}) {
    cfg.grad_clip = bad;
    const auto problems = tk::check(cfg, shape(4, 16));
    ASSERT_EQ(problems.size(), 1u) << bad;
    EXPECT_EQ(problems[0].field, "trainer_config.grad_clip");
    EXPECT_EQ(problems[0].message.rfind(
                  "trainer_config.grad_clip must be finite and >= 0 (0 = off): ", 0),
              0u)
        << problems[0].message;
  }
  cfg.grad_clip = -1;
  EXPECT_EQ(tk::check(cfg, shape(4, 16))[0].message,
            "trainer_config.grad_clip must be finite and >= 0 (0 = off): -1");
}

TEST(TrainerConfigCheck, APeakGivenByHandMustBeFiniteAndNonNegative) {
  tk::trainer_config cfg;
  cfg.mfu.peak_tflops = 989.5;  // H100 SXM dense bf16
  EXPECT_TRUE(tk::check(cfg, shape(4, 16)).empty());
  for (const double bad : {-1.0, double(INFINITY), double(NAN)}) {
    cfg.mfu.peak_tflops = bad;
    const auto problems = tk::check(cfg, shape(4, 16));
    ASSERT_EQ(problems.size(), 1u) << bad;
    EXPECT_EQ(problems[0].field, "trainer_config.mfu.peak_tflops");
  }
  cfg.mfu.peak_tflops = -2;
  EXPECT_EQ(tk::check(cfg, shape(4, 16))[0].message,
            "trainer_config.mfu.peak_tflops must be finite and >= 0 (0 = the device's row of the "
            "peak table): -2");
}

TEST(TrainerConfigCheck, BatchTokensAreCheckedAgainstEveryRank) {
  tk::trainer_config cfg;
  cfg.total_batch_tokens = 128;  // two micro-batches of 4 x 16 on one rank, but not on three
  EXPECT_TRUE(tk::check(cfg, shape(4, 16)).empty());
  EXPECT_EQ(tk::grad_accum_steps(cfg, shape(4, 16)), 2);
  EXPECT_EQ(tk::grad_accum_steps(cfg, shape(4, 16, 2)), 1);
  const auto problems = tk::check(cfg, shape(4, 16, 3));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].message,
            "trainer_config.total_batch_tokens 128 is not a multiple of the training source's "
            "batch_size x seq_len = 64 times 3 ranks");
  cfg.total_batch_tokens = 0;  // one micro-batch on every rank
  EXPECT_EQ(tk::grad_accum_steps(cfg, shape(4, 16, 3)), 1);
  EXPECT_EQ(tk::step_tokens(cfg, shape(4, 16, 3)), 192u);

  const auto empty = tk::check(tk::trainer_config{}, shape(0, 16));
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_EQ(empty[0].field, "run_shape.batch_size");
}

// A value's check does not depend on another setting: eval_batches = 0 is refused with a
// validation source and without one (it once passed without one, so a program accepted
// --eval-batches 0 with --data alone and refused it on the embedded corpus).
TEST(TrainerConfigCheck, EvalBatchesIsOneRuleWithOrWithoutAValidationSource) {
  tk::trainer_config cfg;
  cfg.eval_batches = 0;
  const std::vector<std::string> eval_batches{"trainer_config.eval_batches"};
  EXPECT_EQ(fields(tk::check(cfg, shape(4, 16))), eval_batches);
  tk::run_shape s = shape(4, 16);
  s.has_validation = true;
  s.val_batch_size = 4;
  s.val_seq_len = 16;
  EXPECT_EQ(fields(tk::check(cfg, s)), eval_batches);
  cfg.eval_batches = 1;
  EXPECT_TRUE(tk::check(cfg, shape(4, 16)).empty());
  EXPECT_TRUE(tk::check(cfg, s).empty());
}

TEST(TrainerConfigCheck, ImpliedValuesAreComputedNotStored) {
  tk::trainer_config cfg;
  cfg.steps = 0;
  cfg.schedule.total_steps = 7;  // ignored: the run's length is `steps`
  EXPECT_EQ(tk::run_schedule(cfg).total_steps, 1);
  cfg.steps = 300;
  EXPECT_EQ(tk::run_schedule(cfg).total_steps, 300);
  EXPECT_EQ(cfg.schedule.total_steps, 7);

  cfg.output.metrics_path = "m.jsonl";
  cfg.output.tensorboard_dir = "tb";
  cfg.output.console.log_every = 5;
  EXPECT_EQ(tk::rank_output(cfg, 0), cfg.output);
  const tk::output_settings other = tk::rank_output(cfg, 1);
  EXPECT_TRUE(other.metrics_path.empty());
  EXPECT_TRUE(other.tensorboard_dir.empty());
  EXPECT_TRUE(other.console.quiet);
  EXPECT_FALSE(cfg.output.console.quiet);
}

TEST(TrainerConfigCheck, ShapeOfReadsTheSources) {
  struct fake_source {
    int B, T;
    int batch_size() const { return B; }
    int seq_len() const { return T; }
  };
  const tk::run_shape s = tk::shape_of(fake_source{4, 16}, std::optional<fake_source>{{2, 8}}, 3);
  EXPECT_EQ(s.batch_size, 4u);
  EXPECT_EQ(s.seq_len, 16u);
  EXPECT_EQ(s.ranks, 3);
  EXPECT_TRUE(s.has_validation);
  EXPECT_EQ(s.val_batch_size, 2u);
  EXPECT_EQ(s.val_seq_len, 8u);
  EXPECT_FALSE(tk::shape_of(fake_source{4, 16}, std::optional<fake_source>{}, 1).has_validation);
}
