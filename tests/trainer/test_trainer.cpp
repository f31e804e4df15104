// Tests for trainkit::trainer with the CPU policies: phase accounting, gradient accumulation,
// bit-identical resume, evaluation, stop requests, the metrics file, configuration errors and the
// MFU and console settings.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <trainkit/trainkit.hpp>

namespace tk = trainkit;
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

struct temp_dir {
  fs::path path;
  temp_dir() {
    static int counter = 0;
    path = fs::temp_directory_path() / ("trainkit-trainer-test-" + std::to_string(::getpid()) +
                                        "-" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
};

/// A shard of learnable tokens: a noisy repeating pattern below `vocab`.
std::string write_pattern_shard(const fs::path& dir, const std::string& name, std::size_t n,
                                int vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint16_t> tokens(n);
  for (std::size_t i = 0; i < n; ++i)
    tokens[i] = std::uint16_t(rng() % 8 == 0 ? rng() % vocab : (i * 7) % 50 + 1);
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

using synthetic_trainer =
    tk::trainer<tk::data::synthetic_source, tk::prefetch::threaded<2>, tk::model::gpt2_cpu,
                tk::optim::adamw_cpu, tk::checkpoint::no_checkpoint>;

template <class Checkpointer>
using shard_trainer = tk::trainer<tk::data::mmap_token_source, tk::prefetch::threaded<3>,
                                  tk::model::gpt2_cpu, tk::optim::adamw_cpu, Checkpointer>;

tk::data::synthetic_source synthetic(int B = 4, int T = 16,
                                     std::chrono::microseconds delay = std::chrono::microseconds{
                                         0}) {
  return tk::data::synthetic_source({.batch_size = B,
                                     .seq_len = T,
                                     .vocab_size = 200,
                                     .alphabet = 32,
                                     .branching = 2,
                                     .seed = 5,
                                     .produce_delay = delay});
}

}  // namespace

TEST(Trainer, LossFallsOnLearnableData) {
  synthetic_trainer t(quiet_config(40), synthetic(), std::nullopt,
                      tk::model::gpt2_cpu(tiny_model(), 1), tk::optim::adamw_config{},
                      tk::checkpoint::no_checkpoint{});
  const auto r = t.run();
  ASSERT_EQ(r.steps.size(), 40u);
  EXPECT_NEAR(r.steps.front().loss, std::log(200.0), 0.5);  // uniform prediction at init
  double tail = 0;
  for (std::size_t i = 35; i < 40; ++i) tail += r.steps[i].loss / 5;
  EXPECT_LT(tail, r.steps.front().loss - 1.0);
}

TEST(Trainer, PhasesAddUpToStepTime) {
  auto cfg = quiet_config(12);
  temp_dir dir;
  cfg.output.metrics_path = dir.path / "metrics.jsonl";
  synthetic_trainer t(cfg, synthetic(4, 16, std::chrono::microseconds{500}), std::nullopt,
                      tk::model::gpt2_cpu(tiny_model(), 1), tk::optim::adamw_config{},
                      tk::checkpoint::no_checkpoint{});
  const auto r = t.run();
  std::vector<double> other_fraction;
  for (const auto& m : r.steps) {
    EXPECT_GT(m.dt_ms, 0);
    EXPECT_GT(m.compute_ms, 0);
    EXPECT_GT(m.optimizer_ms, 0);
    // The measured phases never exceed the step and, with the rest, add up to it.
    EXPECT_LE(m.phases_ms(), m.dt_ms * 1.0001) << m.step;
    EXPECT_NEAR(m.phases_ms() + m.other_ms, m.dt_ms, 0.02 * m.dt_ms) << m.step;
    other_fraction.push_back(m.other_ms / m.dt_ms);
  }
  // The unmeasured rest is small in the typical step; one step may lose its core to another
  // process between two phases (ctest -j2 on 2 cores), so the median is what is checked.
  std::ranges::nth_element(other_fraction, other_fraction.begin() + other_fraction.size() / 2);
  EXPECT_LT(other_fraction[other_fraction.size() / 2], 0.05);
  // The metrics file opens with the run header (one rank, a step's tokens, the FLOP count), then
  // has one valid JSON object per step with the contract's fields.
  std::ifstream in(cfg.output.metrics_path);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const auto header = nlohmann::json::parse(line);
  ASSERT_TRUE(header.contains("run")) << line;
  EXPECT_EQ(header["run"]["world_size"].get<int>(), 1);
  EXPECT_EQ(header["run"]["tokens_per_step"].get<std::uint64_t>(), r.steps[0].tokens);
  EXPECT_NEAR(header["run"]["flops_per_token"].get<double>(), tiny_model().flops_per_token(16),
              1e-9 * tiny_model().flops_per_token(16));
  std::size_t n = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    for (const char* key : {"step", "loss", "lr", "grad_norm", "tokens", "dt_ms", "data_wait_ms",
                            "h2d_ms", "compute_ms", "comm_ms", "optimizer_ms", "ckpt_stall_ms",
                            "log_ms", "eval_ms", "other_ms", "tok_per_s", "tflops", "mfu"})
      EXPECT_TRUE(j.contains(key)) << key << " missing in " << line;
    EXPECT_EQ(j["step"].get<std::uint64_t>(), r.steps[n].step);
    double sum = 0;  // every row of the phase table, `other` included, tiles dt_ms
    for (const auto& p : tk::phase_table) sum += j[p.json_key].get<double>();
    EXPECT_NEAR(sum, j["dt_ms"].get<double>(), 0.02 * j["dt_ms"].get<double>());
    ++n;
  }
  EXPECT_EQ(n, r.steps.size());
}

TEST(Trainer, StepCallbackTimeIsTheNextStepsLogTime) {
  // The on_step callback blocks the loop after step k is complete; its time belongs to step k+1's
  // log phase (run_output.hpp), so the steps still tile the run and nothing lands in "other".
  auto cfg = quiet_config(4);
  synthetic_trainer t(cfg, synthetic(4, 16), std::nullopt, tk::model::gpt2_cpu(tiny_model(), 1),
                      tk::optim::adamw_config{}, tk::checkpoint::no_checkpoint{});
  constexpr double sleep_ms = 40;
  int calls = 0;
  t.on_step([&](const tk::step_metrics&) {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(int(sleep_ms)));
    return true;
  });
  const auto r = t.run();
  ASSERT_EQ(r.steps.size(), 4u);
  EXPECT_EQ(calls, 4);
  EXPECT_LT(r.steps[0].log_ms, sleep_ms / 2);  // no callback before step 1
  for (std::size_t i = 1; i < r.steps.size(); ++i) {
    EXPECT_GE(r.steps[i].log_ms, sleep_ms * 0.95) << "step " << i + 1;
    EXPECT_LT(r.steps[i].other_ms, sleep_ms / 2) << "step " << i + 1;
    EXPECT_NEAR(r.steps[i].phases_ms() + r.steps[i].other_ms, r.steps[i].dt_ms,
                0.02 * r.steps[i].dt_ms);
  }
}

TEST(Trainer, GradientAccumulationMatchesOneLargeBatch) {
  // llm.c order: micro-batches of B=2 taken twice cover the same rows as one batch of B=4, so one
  // optimizer step must see the same loss and (up to float summation order) the same update.
  temp_dir dir;
  const auto shard = write_pattern_shard(dir.path, "train_000.bin", 20000, 200, 3);
  auto run = [&](int B, std::size_t total_tokens) {
    auto cfg = quiet_config(3);
    cfg.total_batch_tokens = total_tokens;
    shard_trainer<tk::checkpoint::no_checkpoint> t(
        cfg, tk::data::mmap_token_source({shard, B, 16, 200}), std::nullopt,
        tk::model::gpt2_cpu(tiny_model(), 7), tk::optim::adamw_config{},
        tk::checkpoint::no_checkpoint{});
    EXPECT_EQ(t.tokens_per_step(), 64u);
    EXPECT_EQ(t.grad_accum_steps(), 64 / (B * 16));
    return t.run();
  };
  const auto accumulated = run(2, 64);
  const auto whole = run(4, 0);
  ASSERT_EQ(accumulated.steps.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(accumulated.steps[i].tokens, 64u);
    EXPECT_NEAR(accumulated.steps[i].loss, whole.steps[i].loss, 1e-4) << i;
    EXPECT_NEAR(accumulated.steps[i].grad_norm, whole.steps[i].grad_norm,
                1e-4 * whole.steps[i].grad_norm)
        << i;
  }
}

TEST(Trainer, ConfigErrorsNameTheConfigField) {
  // Library errors speak the library's language; programs map fields to their flags.
  auto message = [](const tk::trainer_config& cfg) -> std::string {
    try {
      synthetic_trainer(cfg, synthetic(), std::nullopt, tk::model::gpt2_cpu(tiny_model(), 1),
                        tk::optim::adamw_config{}, tk::checkpoint::no_checkpoint{});
    } catch (const tk::config_error& e) {
      return e.what();
    }
    return "no config_error";
  };
  auto cfg = quiet_config(1);
  cfg.total_batch_tokens = 100;  // B·T = 64
  EXPECT_EQ(message(cfg),
            "trainer_config.total_batch_tokens 100 is not a multiple of the "
            "training source's batch_size x seq_len = 64");
  EXPECT_EQ(message(quiet_config(-1)), "trainer_config.steps must be >= 0: -1");
  // Every problem at once, in one config_error.
  cfg.steps = -1;
  cfg.schedule.warmup_steps = -2;
  EXPECT_EQ(message(cfg),
            "trainer_config.steps must be >= 0: -1; trainer_config.total_batch_tokens 100 is not "
            "a multiple of the training source's batch_size x seq_len = 64; "
            "trainer_config.schedule.warmup_steps must be >= 0: -2");
}

TEST(Trainer, KeepsItsConfigurationAsGiven) {
  // What a configuration implies (the schedule's length, a console that logs every step) is
  // computed, not written back: config() is what the caller gave.
  auto cfg = quiet_config(3);
  cfg.schedule.total_steps = 1000;
  cfg.output.console.log_every = 0;
  synthetic_trainer t(cfg, synthetic(), std::nullopt, tk::model::gpt2_cpu(tiny_model(), 1),
                      tk::optim::adamw_config{}, tk::checkpoint::no_checkpoint{});
  EXPECT_EQ(t.config(), cfg);
  cfg.schedule.kind = tk::optim::schedule_kind::cosine;  // over the run's 3 steps, not 1000
  cfg.schedule.final_lr_frac = 0.0f;
  const auto r =
      synthetic_trainer(cfg, synthetic(), std::nullopt, tk::model::gpt2_cpu(tiny_model(), 1),
                        tk::optim::adamw_config{}, tk::checkpoint::no_checkpoint{})
          .run();
  ASSERT_EQ(r.steps.size(), 3u);
  EXPECT_FLOAT_EQ(r.steps[0].lr, 2e-3f);
  EXPECT_NEAR(r.steps[2].lr, 2e-3 * 0.5 * (1 + std::cos(M_PI * 2 / 3)), 1e-9);
}

TEST(Trainer, MeasuresAndShowsWhatItsNestedSettingsSay) {
  // cfg.mfu: the peak MFU is taken against, the dtype the report names, the device the table is
  // looked up for; cfg.output.console: which steps print, and whether anything does.
  auto run = [](const tk::trainer_config& cfg, std::ostream& out) {
    synthetic_trainer t(cfg, synthetic(), std::nullopt, tk::model::gpt2_cpu(tiny_model(), 1),
                        tk::optim::adamw_config{}, tk::checkpoint::no_checkpoint{}, out);
    return t.run();
  };
  auto cfg = quiet_config(5);
  cfg.mfu = {.dtype = tk::compute_dtype::bf16, .peak_tflops = 0.5};
  cfg.output.console = {.log_every = 2};
  std::ostringstream shown;
  const auto r = run(cfg, shown);
  for (const auto& m : r.steps) EXPECT_DOUBLE_EQ(m.mfu, m.tflops / 0.5) << m.step;
  EXPECT_DOUBLE_EQ(r.summary.peak_tflops, 0.5);
  EXPECT_EQ(r.summary.peak_label, "dense bf16 peak");
  const std::string lines = shown.str();
  for (const char* step : {"step      2/5 ", "step      4/5 ", "step      5/5 "})
    EXPECT_NE(lines.find(step), std::string::npos) << step << " missing from:\n" << lines;
  for (const char* step : {"step      1/5 ", "step      3/5 "})
    EXPECT_EQ(lines.find(step), std::string::npos) << step << " printed:\n" << lines;

  cfg.mfu = {.device_name = "no such device"};  // not in the peak table: no MFU
  cfg.output.console.quiet = true;
  std::ostringstream silent;
  const auto unknown = run(cfg, silent);
  for (const auto& m : unknown.steps) EXPECT_TRUE(std::isnan(m.mfu)) << m.step;
  EXPECT_EQ(silent.str(), "");
}

// Over N ranks a step's tflops is every rank's together and its mfu one device's share of it over
// one device's peak: N ranks never read N times too high.
TEST(Trainer, MfuIsPerDeviceOverRanks) {
  tk::step_metrics m;
  m.tokens = 1000;  // all ranks' tokens, as the trainer counts them
  const tk::step_rates one{1e9, 0.5, 0.25, 1}, two{1e9, 0.5, 0.25, 2};
  const auto a = tk::with_rates(m, 100.0, one), b = tk::with_rates(m, 100.0, two);
  EXPECT_DOUBLE_EQ(a.tflops, b.tflops);
  EXPECT_DOUBLE_EQ(b.mfu, b.tflops / 2 / 0.5);
  EXPECT_DOUBLE_EQ(b.mfu_calibrated, b.tflops / 2 / 0.25);
  EXPECT_DOUBLE_EQ(a.mfu, 2 * b.mfu);
}

namespace {
/// A reducer whose finish() blocks like an all-reduce that backward did not hide (one process:
/// single's clipping step).
struct slow_reducer : tk::reduce::single {
  void finish() { std::this_thread::sleep_for(std::chrono::milliseconds(40)); }
};
}  // namespace

TEST(Trainer, TimeBlockedInTheReducerIsCommunication) {
  temp_dir dir;
  auto cfg = quiet_config(5);
  cfg.output.metrics_path = dir.path / "metrics.jsonl";
  tk::trainer<tk::data::synthetic_source, tk::prefetch::threaded<2>, tk::model::gpt2_cpu,
              tk::optim::adamw_cpu, tk::checkpoint::no_checkpoint, slow_reducer>
      t(cfg, synthetic(), std::nullopt, tk::model::gpt2_cpu(tiny_model(), 1),
        tk::optim::adamw_config{}, tk::checkpoint::no_checkpoint{}, slow_reducer{});
  const auto r = t.run();
  for (const auto& m : r.steps) {
    EXPECT_GE(m.comm_ms, 39.0) << m.step;
    EXPECT_LT(m.optimizer_ms, 39.0) << "the reducer's wait is not the optimizer's";
  }
  EXPECT_EQ(r.summary.verdict, tk::bottleneck::communication) << r.summary.evidence;
  std::ifstream in(cfg.output.metrics_path);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("{\"run\"")) continue;  // the run header
    EXPECT_GE(nlohmann::json::parse(line)["comm_ms"].get<double>(), 39.0) << line;
    ++n;
  }
  EXPECT_EQ(n, 5u);
}

class TrainerResume : public ::testing::TestWithParam<tk::data::order_kind> {};

TEST_P(TrainerResume, StopAndResumeIsBitIdentical) {
  temp_dir dir;
  const auto shard_a = write_pattern_shard(dir.path, "train_000.bin", 3000, 200, 1);
  const auto shard_b = write_pattern_shard(dir.path, "train_001.bin", 2500, 200, 2);
  const std::string pattern = (dir.path / "train_*.bin").string();
  const tk::data::mmap_source_config data{pattern, 4, 16, 200, GetParam(), 99};
  constexpr int n = 6;
  auto make = [&](const fs::path& ckpt, bool resume) {
    auto cfg = quiet_config(2 * n);
    cfg.schedule.kind = tk::optim::schedule_kind::cosine;
    cfg.schedule.warmup_steps = 2;
    cfg.total_batch_tokens = 128;  // two micro-batches per step
    cfg.resume = resume;
    cfg.meta["model"] = tiny_model().to_string();
    return std::make_unique<shard_trainer<tk::checkpoint::sync_checkpointer>>(
        cfg, tk::data::mmap_token_source(data), std::nullopt, tk::model::gpt2_cpu(tiny_model(), 11),
        tk::optim::adamw_config{}, tk::checkpoint::sync_checkpointer({ckpt, 2}));
  };
  // 2N steps straight.
  auto straight = make(dir.path / "ckpt_straight", false)->run();
  // Stopped after N steps (as by a signal: final checkpoint), then a fresh trainer resumes.
  auto first_trainer = make(dir.path / "ckpt_split", false);
  first_trainer->on_step([](const tk::step_metrics& m) { return m.step < std::uint64_t(n); });
  auto first = first_trainer->run();
  ASSERT_TRUE(first.stopped);
  ASSERT_EQ(first.last_step, std::uint64_t(n));
  auto second = make(dir.path / "ckpt_split", true)->run();
  ASSERT_TRUE(second.resumed);
  EXPECT_EQ(second.first_step, std::uint64_t(n + 1));
  ASSERT_EQ(first.steps.size() + second.steps.size(), straight.steps.size());
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(first.steps[i].loss, straight.steps[i].loss) << "step " << i + 1;
    EXPECT_EQ(second.steps[i].loss, straight.steps[n + i].loss) << "step " << n + i + 1;
    EXPECT_EQ(second.steps[i].grad_norm, straight.steps[n + i].grad_norm) << "step " << n + i + 1;
    EXPECT_EQ(second.steps[i].lr, straight.steps[n + i].lr);
  }
}

INSTANTIATE_TEST_SUITE_P(Orders, TrainerResume,
                         ::testing::Values(tk::data::order_kind::sequential,
                                           tk::data::order_kind::random));

TEST(Trainer, ResumeRefusesAnotherModel) {
  temp_dir dir;
  const auto shard = write_pattern_shard(dir.path, "train_000.bin", 4000, 200, 1);
  auto make = [&](int layers, bool resume) {
    auto m = tiny_model();
    m.num_layers = layers;
    auto cfg = quiet_config(2);
    cfg.resume = resume;
    cfg.meta["model"] = m.to_string();
    return std::make_unique<shard_trainer<tk::checkpoint::sync_checkpointer>>(
        cfg, tk::data::mmap_token_source({shard, 4, 16, 200}), std::nullopt,
        tk::model::gpt2_cpu(m, 1), tk::optim::adamw_config{},
        tk::checkpoint::sync_checkpointer({dir.path / "ckpt", 0}));
  };
  make(2, false)->run();
  EXPECT_THROW(make(3, true)->run(), tk::error);
}

TEST(Trainer, EvaluatesOnSchedule) {
  temp_dir dir;
  const auto train = write_pattern_shard(dir.path, "train_000.bin", 6000, 200, 1);
  const auto val = write_pattern_shard(dir.path, "val_000.bin", 3000, 200, 2);
  auto cfg = quiet_config(7);
  cfg.eval_every = 3;
  cfg.eval_batches = 2;
  shard_trainer<tk::checkpoint::no_checkpoint> t(
      cfg, tk::data::mmap_token_source({train, 4, 16, 200}),
      tk::data::mmap_token_source({val, 4, 16, 200}), tk::model::gpt2_cpu(tiny_model(), 1),
      tk::optim::adamw_config{}, tk::checkpoint::no_checkpoint{});
  const auto r = t.run();
  for (const auto& m : r.steps) {
    const bool expect_eval = m.step % 3 == 0 || m.step == 7;
    EXPECT_EQ(!std::isnan(m.val_loss), expect_eval) << m.step;
    if (expect_eval) {
      EXPECT_GT(m.eval_ms, 0);
    }
  }
  // Evaluation starts from the beginning of the validation data every time: evaluating twice in
  // a row on unchanged weights gives the same number.
  EXPECT_EQ(t.evaluate(), t.evaluate());
  EXPECT_EQ(r.final_val_loss, r.steps.back().val_loss);
}

TEST(Trainer, StopRequestSavesAndReturns) {
  temp_dir dir;
  const auto shard = write_pattern_shard(dir.path, "train_000.bin", 4000, 200, 1);
  auto cfg = quiet_config(1000);
  shard_trainer<tk::checkpoint::sync_checkpointer> t(
      cfg, tk::data::mmap_token_source({shard, 4, 16, 200}), std::nullopt,
      tk::model::gpt2_cpu(tiny_model(), 1), tk::optim::adamw_config{},
      tk::checkpoint::sync_checkpointer({dir.path / "ckpt", 0}));
  // The request comes from another thread once the run is under way (as a signal would), not
  // after a fixed time: on a quiet machine 1000 tiny steps can finish in less than any sleep.
  std::atomic<int> steps_done{0};
  t.on_step([&](const tk::step_metrics&) {
    steps_done.fetch_add(1);
    return true;
  });
  std::thread stopper([&] {
    while (steps_done.load() < 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    tk::request_stop();
  });
  const auto r = t.run();
  stopper.join();
  tk::stop_signal().store(0);
  EXPECT_TRUE(r.stopped);
  EXPECT_LT(r.last_step, 1000u);
  const auto saved = tk::checkpoint::list_checkpoints(dir.path / "ckpt");
  ASSERT_FALSE(saved.empty());
  EXPECT_EQ(saved.back().step, r.last_step);
}

// The clipping threshold is trainer_config::grad_clip (the optimizer is not asked): one step on a
// batch whose gradient norm is above 1 gives other parameters with the default threshold (1) than
// with clipping off (0), and a threshold above the norm leaves the step exactly unscaled.
TEST(Trainer, ClippingThresholdIsTheTrainerConfigs) {
  auto one_step = [](float grad_clip) {
    auto cfg = quiet_config(1);
    cfg.grad_clip = grad_clip;
    synthetic_trainer t(cfg, synthetic(), std::nullopt, tk::model::gpt2_cpu(tiny_model(), 3),
                        tk::optim::adamw_config{}, tk::checkpoint::no_checkpoint{});
    const auto r = t.run();
    const auto p = t.model().parameters();
    struct one {
      double norm, lr;
      std::vector<float> params;
    };
    return one{r.steps.at(0).grad_norm, r.steps.at(0).lr, {p.begin(), p.end()}};
  };
  const auto [norm_off, lr, off] = one_step(0.0f);
  ASSERT_GT(norm_off, 1.0) << "the test needs a step whose norm exceeds the default threshold";
  const auto [norm_default, lr_default, clipped] = one_step(tk::trainer_config{}.grad_clip);
  const auto [norm_above, lr_above, above] = one_step(float(2 * norm_off));
  EXPECT_EQ(norm_default, norm_off) << "the logged norm is the one before clipping";
  EXPECT_EQ(norm_above, norm_off);
  EXPECT_NE(clipped, off) << "grad_clip = 1 must scale a step whose norm is " << norm_off;
  EXPECT_EQ(above, off) << "a threshold above the norm must leave the step unscaled";
  // The clipped step is the update with factor 1/norm, computed here without a trainer.
  tk::model::gpt2_cpu m(tiny_model(), 3);
  tk::optim::adamw_cpu opt(m, tk::optim::adamw_config{});
  auto src = synthetic();
  tk::host_batch b;
  src.next(b);
  m.zero_grad();
  (void)m.forward_backward(tk::view_of(b), 1.0f);
  EXPECT_EQ(tk::optim::clip_then_update<tk::host_memory>(1.0)(opt, m, float(lr)), float(norm_off));
  const auto want = m.parameters();
  EXPECT_TRUE(std::equal(want.begin(), want.end(), clipped.begin()));
}

TEST(Trainer, DivergenceIsAnError) {
  auto cfg = quiet_config(5);
  cfg.schedule.max_lr = 1e30f;  // the first update blows the weights up
  cfg.grad_clip = 0;
  synthetic_trainer t(cfg, synthetic(), std::nullopt, tk::model::gpt2_cpu(tiny_model(), 1),
                      tk::optim::adamw_config{}, tk::checkpoint::no_checkpoint{});
  EXPECT_THROW(t.run(), tk::error);
}

TEST(Trainer, VerdictInputBoundWhenTheSourceIsSlow) {
  // Producer delay far above compute with an inline (synchronous) prefetcher: the loop waits.
  using slow_trainer =
      tk::trainer<tk::data::synthetic_source, tk::prefetch::synchronous, tk::model::gpt2_cpu,
                  tk::optim::adamw_cpu, tk::checkpoint::no_checkpoint>;
  slow_trainer t(quiet_config(6), synthetic(2, 8, std::chrono::milliseconds(60)), std::nullopt,
                 tk::model::gpt2_cpu(tiny_model(), 1), tk::optim::adamw_config{},
                 tk::checkpoint::no_checkpoint{});
  const auto r = t.run();
  EXPECT_EQ(r.summary.verdict, tk::bottleneck::input) << r.summary.evidence;
}

TEST(Trainer, VerdictComputeBoundWithNothingInjected) {
  // A model wide enough that a step costs far more than producing a batch.
  auto wide = tiny_model();
  wide.channels = 256;
  wide.num_heads = 4;
  synthetic_trainer t(quiet_config(8), synthetic(4, 32), std::nullopt, tk::model::gpt2_cpu(wide, 1),
                      tk::optim::adamw_config{}, tk::checkpoint::no_checkpoint{});
  const auto r = t.run();
  EXPECT_EQ(r.summary.verdict, tk::bottleneck::compute) << r.summary.evidence;
}

namespace {
/// A checkpointer whose save blocks like a slow synchronous disk write.
struct slow_checkpointer {
  static constexpr bool reads_device_memory = false;
  void save(const tk::checkpoint::checkpoint_state&) {
    tk::stopwatch sw;
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    stall_ = sw.elapsed_ms();
  }
  bool load_latest(tk::checkpoint::checkpoint_state&) { return false; }
  void wait() {}
  double last_stall_ms() const { return stall_; }
  double stall_ = 0;
};
}  // namespace

TEST(Trainer, VerdictCheckpointBoundWhenSavesBlock) {
  auto cfg = quiet_config(6);
  cfg.ckpt_every = 1;
  tk::trainer<tk::data::synthetic_source, tk::prefetch::threaded<2>, tk::model::gpt2_cpu,
              tk::optim::adamw_cpu, slow_checkpointer>
      t(cfg, synthetic(), std::nullopt, tk::model::gpt2_cpu(tiny_model(), 1),
        tk::optim::adamw_config{}, slow_checkpointer{});
  const auto r = t.run();
  EXPECT_EQ(r.summary.verdict, tk::bottleneck::checkpoint) << r.summary.evidence;
  for (const auto& m : r.steps) EXPECT_GE(m.ckpt_stall_ms, 149.0);
}
