// Tests for the log readers: nanoGPT, llm.c and torchtitan lines (the committed sample logs in
// tests/fixtures/logs, written by make_logs.py in each program's exact format), sniffing, skipped
// lines, resumed runs and the errors for what is not a log.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <trainkit/report/read_run_log.hpp>

namespace tk = trainkit;
namespace rp = trainkit::report;

namespace {

std::string fixture(const char* name) {
  return std::string(TRAINKIT_SOURCE_DIR) + "/tests/fixtures/logs/" + name;
}

rp::run_log parse(const std::string& text, std::optional<rp::log_format> f = std::nullopt) {
  std::istringstream in(text);
  return rp::parse_run_log(in, "test.log", f);
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST(LogReaders, SniffsEachSampleLog) {
  EXPECT_EQ(rp::read_run_log(fixture("nanogpt_gpt2xl_h200.log")).format, rp::log_format::nanogpt);
  EXPECT_EQ(rp::read_run_log(fixture("llmc_gpt2xl_h100.log")).format, rp::log_format::llmc);
  EXPECT_EQ(rp::read_run_log(fixture("torchtitan_llama_h200.log")).format,
            rp::log_format::torchtitan);
  const auto tk_run = parse(R"({"step":1,"loss":5.0,"dt_ms":10.0,"tokens":100}
{"step":2,"loss":4.0,"dt_ms":11.0,"tokens":100,"val_loss":4.5,"eval_ms":2.0}
)");
  EXPECT_EQ(tk_run.format, rp::log_format::trainkit);
  ASSERT_EQ(tk_run.steps.size(), 2u);
  ASSERT_EQ(tk_run.events.size(), 1u);
  EXPECT_EQ(tk_run.events[0].step, 2u);
  EXPECT_DOUBLE_EQ(tk_run.events[0].ms, 2.0);
}

TEST(LogReaders, NanoGptStepsEventsAndFacts) {
  const auto path = fixture("nanogpt_gpt2xl_h200.log");
  const auto run = rp::read_run_log(path, rp::log_format::nanogpt);
  // Independently: every "iter N: ... time Xms" line, by regex.
  const std::regex iter(R"(^iter (\d+): loss ([0-9.]+), time ([0-9.]+)ms, mfu (-?[0-9.]+)%$)");
  std::vector<std::pair<unsigned, double>> expected;
  for (const auto& l : lines_of(path)) {
    std::smatch m;
    if (std::regex_match(l, m, iter)) expected.emplace_back(std::stoul(m[1]), std::stod(m[3]));
  }
  ASSERT_EQ(run.steps.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(run.steps[i].m.step, expected[i].first);
    EXPECT_DOUBLE_EQ(run.steps[i].m.dt_ms, expected[i].second);
  }
  EXPECT_TRUE(std::isnan(run.steps[0].log_mfu)) << "-100.00% means not estimated yet";
  EXPECT_NEAR(run.steps[1].log_mfu, 1.6413, 1e-12);
  EXPECT_TRUE(run.facts.compiled);
  EXPECT_EQ(run.facts.tokens_per_step, 16u * 1024 * 64);
  EXPECT_EQ(run.facts.parameters, 1556050000u);
  EXPECT_TRUE(run.facts.parameters_exclude_wpe);
  EXPECT_EQ(run.facts.layers, 48);
  EXPECT_EQ(run.facts.width, 1600);
  EXPECT_EQ(run.facts.seq, 1024);
  // Evaluations at iterations 0 and 250, the save at 250, each timed in its iteration's line.
  ASSERT_EQ(run.events.size(), 3u);
  EXPECT_EQ(run.events[2].kind, rp::log_event::kind_t::checkpoint);
  EXPECT_EQ(run.events[2].step, 250u);
  ASSERT_LT(run.events[2].timed_in, run.steps.size());
  EXPECT_EQ(run.steps[run.events[2].timed_in].m.step, 250u);
  EXPECT_EQ(run.steps[run.events[0].timed_in].m.step, 0u);
  EXPECT_DOUBLE_EQ(run.steps[run.events[1].timed_in].m.val_loss, 3.6655);
}

TEST(LogReaders, LlmcStepLinesOfBothFormatsAndTheTable) {
  const auto run = rp::read_run_log(fixture("llmc_gpt2xl_h100.log"));
  ASSERT_EQ(run.steps.size(), 60u);
  EXPECT_EQ(run.steps.front().m.step, 1u);
  EXPECT_DOUBLE_EQ(run.steps.front().m.dt_ms, 23456.78);
  EXPECT_DOUBLE_EQ(run.steps[36].m.dt_ms, 35000.0);
  EXPECT_NEAR(run.steps[1].log_mfu, 0.496, 1e-12);
  EXPECT_EQ(run.facts.device, "NVIDIA H100 80GB HBM3");
  EXPECT_DOUBLE_EQ(run.facts.peak_tflops, 988.8);
  EXPECT_EQ(run.facts.parameters, 1557686400u);
  EXPECT_EQ(run.facts.tokens_per_step, 1048576u);
  EXPECT_EQ(run.facts.max_seq, 1024);
  EXPECT_EQ(run.facts.devices, 1);
  std::size_t saves = 0;
  for (const auto& e : run.events) {
    EXPECT_EQ(e.timed_in, rp::log_event::not_timed) << "llm.c times the training section alone";
    saves += e.kind == rp::log_event::kind_t::checkpoint;
  }
  EXPECT_EQ(saves, 2u);
  // The format before commit 569f9f1, and a device llm.c's table lacks (-100.0%).
  const auto old = parse(
      "step    1/10 | train loss 11.009872 | norm 15.1234 | lr 6.00e-06 | 3012.55 ms | -100.0% "
      "bf16 MFU | 174032 tok/s\n");
  ASSERT_EQ(old.steps.size(), 1u);
  EXPECT_DOUBLE_EQ(old.steps[0].m.loss, 11.009872);
  EXPECT_DOUBLE_EQ(old.steps[0].m.dt_ms, 3012.55);
  EXPECT_TRUE(std::isnan(old.steps[0].log_mfu));
  EXPECT_DOUBLE_EQ(old.steps[0].log_tok_per_s, 174032);
}

TEST(LogReaders, TorchtitanTimesStepsFromTimestampsAndReadsSaveDurations) {
  const auto path = fixture("torchtitan_llama_h200.log");
  const auto run = rp::read_run_log(path);
  // Independently: the timestamps of "Training starts" and of each step line.
  const std::regex stamp(R"(^\[titan\] \d{4}-\d\d-\d\d (\d\d):(\d\d):(\d\d),(\d{3}) - .*)");
  std::vector<double> t;
  std::vector<unsigned> steps{0};
  for (const auto& raw : lines_of(path)) {
    std::smatch m;
    if (!std::regex_match(raw, m, stamp)) continue;
    const double s =
        std::stod(m[1]) * 3600 + std::stod(m[2]) * 60 + std::stod(m[3]) + std::stod(m[4]) / 1000;
    const auto at = raw.find("step: ");
    if (raw.find("Training starts at step 1") != std::string::npos) t.push_back(s);
    if (at != std::string::npos && raw.find("validate") == std::string::npos) {
      t.push_back(s);
      steps.push_back(unsigned(std::stoul(raw.substr(at + 6))));
    }
  }
  ASSERT_EQ(run.steps.size() + 1, t.size());
  for (std::size_t i = 0; i < run.steps.size(); ++i) {
    EXPECT_EQ(run.steps[i].m.step, steps[i + 1]);
    EXPECT_EQ(run.steps[i].covers, steps[i + 1] - steps[i]);
    EXPECT_NEAR(run.steps[i].m.dt_ms, (t[i + 1] - t[i]) * 1e3 / (steps[i + 1] - steps[i]), 1e-6);
  }
  EXPECT_EQ(run.facts.device, "NVIDIA H200");
  EXPECT_EQ(run.facts.devices, 1);
  EXPECT_NEAR(run.steps[1].log_mfu, 0.4591, 1e-12);
  EXPECT_NEAR(run.steps[1].log_tflops, 454.07, 1e-9);
  EXPECT_NEAR(run.steps[1].memory_gib, 97.31, 1e-9);
  bool save = false;
  for (const auto& e : run.events)
    if (e.kind == rp::log_event::kind_t::checkpoint) {
      save = true;
      EXPECT_EQ(e.step, 500u);
      EXPECT_DOUBLE_EQ(e.ms, 84120.0);
      ASSERT_LT(e.timed_in, run.steps.size());
      EXPECT_EQ(run.steps[e.timed_in].m.step, 510u) << "its time shows in the next line";
    }
  EXPECT_TRUE(save);
  // Without the logger's timestamps no step has a wall time: an error, not a guess.
  EXPECT_THROW(parse("step:  1  loss: 12.0  memory: 1.00GiB(1.00%)  tps: 1,000  tflops: 1.00  "
                     "mfu: 1.00%\n"),
               tk::format_error);
}

// Multi-device runs: the device count comes from the log, and a step's tokens are shared by them.
TEST(LogReaders, DeviceCountsOfMultiDeviceRuns) {
  const auto titan = parse(
      "[titan] 2026-03-02 09:00:00,000 - root - INFO - Building device mesh with parallelism: "
      "pp=1, dp_replicate=2, dp_shard=4, cp=1, tp=2, ep=1\n"
      "[titan] 2026-03-02 09:00:01,000 - root - INFO - Training starts at step 1\n"
      "[titan] 2026-03-02 09:00:03,000 - root - INFO - step:  1  loss: 12.0  memory: "
      "1.00GiB(1.00%)  tps: 1,000  tflops: 1.00  mfu: 0.10%\n");
  EXPECT_EQ(titan.facts.devices, 16);
  ASSERT_EQ(titan.steps.size(), 1u);
  EXPECT_DOUBLE_EQ(titan.steps[0].m.dt_ms, 2000.0);
  const auto llmc = parse(
      "| total batch size      | 524288                                             |\n"
      "| num_processes         | 8                                                  |\n"
      "step    1/10 | loss 11.009872 (+nanz)| norm 15.1234 (+nanz)| lr 6.00e-06 | 300.00 ms | "
      "40.0% bf16 MFU | 174032 tok/s\n");
  EXPECT_EQ(llmc.facts.devices, 8);
  EXPECT_EQ(llmc.facts.tokens_per_step, 524288u);
}

TEST(LogReaders, UnparseableLinesAreCountedAndSkipped) {
  const auto run = parse(
      "some banner\n"
      "iter 0: loss 10.9, time 1000.00ms, mfu -100.00%\n"
      "iter 1: loss 10.8, time 500.00ms, mfu -100.00%\n"
      "iter 2: loss oops, time 500.00ms, mfu 1.00%\n"
      "\n"
      "step 2: train loss 10.7, val loss\n"
      "iter 2: loss 10.7, time 510.00ms, mfu 1.00%\n");
  EXPECT_EQ(run.format, rp::log_format::nanogpt);
  EXPECT_EQ(run.steps.size(), 3u);
  EXPECT_EQ(run.skipped, 3u);  // the banner, the bad iter line, the cut-off evaluation line
}

TEST(LogReaders, AResumedRunReplacesTheStepsItRepeats) {
  const auto run = parse(
      "iter 0: loss 10.9, time 1000.00ms, mfu -100.00%\n"
      "iter 1: loss 10.8, time 500.00ms, mfu -100.00%\n"
      "iter 2: loss 10.7, time 500.00ms, mfu -100.00%\n"
      "iter 1: loss 10.8, time 700.00ms, mfu -100.00%\n"
      "iter 2: loss 10.6, time 501.00ms, mfu -100.00%\n");
  ASSERT_EQ(run.steps.size(), 3u);
  EXPECT_DOUBLE_EQ(run.steps[1].m.dt_ms, 700.0);
  EXPECT_DOUBLE_EQ(run.steps[2].m.loss, 10.6);
  ASSERT_EQ(run.warnings.size(), 1u);
  EXPECT_NE(run.warnings[0].find("test.log:4: step 1 again (a resumed run)"), std::string::npos)
      << run.warnings[0];
}

TEST(LogReaders, WhatIsNotALogIsAnErrorNamingTheFile) {
  try {
    parse("hello\nworld\n");
    FAIL() << "no error";
  } catch (const tk::format_error& e) {
    EXPECT_NE(std::string(e.what()).find("test.log: not a training log"), std::string::npos)
        << e.what();
  }
  try {  // a nanoGPT log read as llm.c's
    rp::read_run_log(fixture("nanogpt_gpt2xl_h200.log"), rp::log_format::llmc);
    FAIL() << "no error";
  } catch (const tk::format_error& e) {
    EXPECT_NE(std::string(e.what()).find("nanogpt_gpt2xl_h200.log: no step lines of a llm.c"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(rp::read_run_log(fixture("no_such.log")), tk::io_error);
  EXPECT_THROW(rp::parse_log_format("wandb"), tk::config_error);
  EXPECT_FALSE(rp::parse_log_format("auto").has_value());
  EXPECT_EQ(rp::parse_log_format("torchtitan"), rp::log_format::torchtitan);
}

// trainkit's run header ({"run":{...}}, trainer/metrics.hpp): written, read back, used.
TEST(RunHeader, RoundTripAndPerDeviceMfu) {
  tk::run_header h;
  h.meta = {{"model", "d12"}, {"attention", "cudnn"}, {"optimizer", "adamw \"fused\""}};
  h.world_size = 2;
  h.tokens_per_step = 16384;
  h.seq_len = 1024;
  h.flops_per_token = 8.55383040e8;
  h.device = "NVIDIA H100 80GB HBM3";
  h.peak_tflops = 989;
  h.dtype = "bf16";
  const std::string line = tk::to_json_header(h);
  ASSERT_TRUE(line.starts_with("{\"run\":{")) << line;
  const std::string text =
      line +
      "\n{\"step\":1,\"loss\":5.0,\"tokens\":16384,\"dt_ms\":10.0,\"mfu\":0.6}\n"
      "{\"step\":2,\"loss\":4.9,\"tokens\":16384,\"dt_ms\":10.0,\"mfu\":0.6}\n";
  std::istringstream in(text);
  const auto file = tk::parse_metrics_jsonl(in, "m.jsonl");
  ASSERT_TRUE(file.run.has_value());
  EXPECT_EQ(file.steps.size(), 2u);
  EXPECT_EQ(file.run->get("optimizer"), "adamw \"fused\"");
  EXPECT_EQ(file.run->get("device_name"), h.device);
  EXPECT_DOUBLE_EQ(file.run->number("world_size"), 2);
  EXPECT_DOUBLE_EQ(file.run->number("flops_per_token"), h.flops_per_token);
  EXPECT_DOUBLE_EQ(file.run->number("peak_tflops"), 989);
  const auto run = parse(text);
  EXPECT_EQ(run.format, rp::log_format::trainkit);
  EXPECT_EQ(run.facts.devices, 2);
  EXPECT_EQ(run.facts.attention, "cudnn");
  EXPECT_EQ(run.facts.tokens_per_step, 16384u);
  EXPECT_DOUBLE_EQ(run.steps[0].log_mfu, 0.6) << "the lines' mfu is per device: not divided again";
  // A header from before the lines were per device says so; its lines are divided by the ranks.
  std::string older = text;
  const std::string per = "device: all ranks' FLOP/s / world_size / one device's peak";
  older.replace(older.find(per), per.size(), "all ranks' FLOP/s over one device's peak");
  for (std::size_t at; (at = older.find("\"mfu\":0.6")) != std::string::npos;)
    older.replace(at, 9, "\"mfu\":1.2");
  EXPECT_DOUBLE_EQ(parse(older).steps[0].log_mfu, 0.6) << "every rank's FLOPs / one peak / 2";
  // A file without the header (written before it existed) is read as before.
  std::istringstream old("{\"step\":1,\"loss\":5.0,\"tokens\":1,\"dt_ms\":10.0}\n");
  const auto o = tk::parse_metrics_jsonl(old, "old.jsonl");
  EXPECT_FALSE(o.run.has_value());
  EXPECT_EQ(o.steps.size(), 1u);
}
