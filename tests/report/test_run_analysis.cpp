// Tests for the analysis of a run read from a log: the seed case of docs/bottlenecks.md in
// nanoGPT's, llm.c's and torchtitan's words (tests/fixtures/logs, written by make_logs.py). Every
// expected number is computed here from the log's own values (read by regex, not by the reader)
// and the model's shape, not copied from the report.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <trainkit/report/chart.hpp>
#include <trainkit/report/read_run_log.hpp>
#include <trainkit/report/run_analysis.hpp>

namespace tk = trainkit;
namespace rp = trainkit::report;

namespace {

std::string fixture(const char* name) {
  return std::string(TRAINKIT_SOURCE_DIR) + "/tests/fixtures/logs/" + name;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// GPT-2 XL (d48): L 48, C 1600, padded vocabulary 50304, 1024 positions.
constexpr double L = 48, C = 1600, VP = 50304, MAXT = 1024;
const double n_all = VP * C + MAXT * C + L * (12 * C * C + 13 * C) + 2 * C;
const double n_no_wpe = n_all - MAXT * C;
double trainkit_flops_per_token(double n, double t) {
  return 6 * n + 12 * L * C * t;
}

constexpr double h200_peak = 989e12;  // NVIDIA's dense bf16 figure (core/device_info.hpp)

// A library's text speaks of config fields, never of a program's flags.
void expect_no_flags(const std::string& text) {
  EXPECT_EQ(text.find("--"), std::string::npos) << text;
}

struct nanogpt_line {
  unsigned iter;
  double ms, mfu;
};

std::vector<nanogpt_line> nanogpt_lines(const std::string& path) {
  const std::regex iter(R"(^iter (\d+): loss [0-9.]+, time ([0-9.]+)ms, mfu (-?[0-9.]+)%$)");
  std::vector<nanogpt_line> out;
  for (const auto& l : lines_of(path)) {
    std::smatch m;
    if (std::regex_match(l, m, iter))
      out.push_back({unsigned(std::stoul(m[1])), std::stod(m[2]), std::stod(m[3]) / 100});
  }
  return out;
}

}  // namespace

// The seed: GPT-2 XL on an H200, ~21 s per 1M-token step, nanoGPT printing "mfu 164%".
TEST(RunAnalysis, NanoGptSeedRunOnAnH200) {
  const auto path = fixture("nanogpt_gpt2xl_h200.log");
  const auto lines = nanogpt_lines(path);
  ASSERT_GT(lines.size(), 20u);
  std::vector<double> steady;
  for (std::size_t i = 1; i < lines.size(); ++i) steady.push_back(lines[i].ms);
  const double median = median_of(steady);
  const double tokens = 16 * 1024 * 64;  // "tokens per iteration will be: 1,048,576"
  const double fpt = trainkit_flops_per_token(n_no_wpe, 1024);

  rp::log_report_config cfg;
  cfg.model = "d48";
  cfg.device = "H200";
  const auto a = rp::analyze_run(rp::read_run_log(path), cfg);
  const std::string text = rp::format_run_analysis(a);

  // The honest MFU: trainkit's count against the H200's 989 TFLOP/s, about 52%.
  EXPECT_DOUBLE_EQ(a.summary.median_step_ms, median);
  EXPECT_NEAR(a.flops_per_token, fpt, 1e-6 * fpt);
  EXPECT_NEAR(a.mfu_median, fpt * tokens / (median / 1e3) / h200_peak, 1e-9);
  EXPECT_NEAR(a.mfu_median, 0.52, 0.01);
  // The floor: the step at 100% of the peak, ~10.9 s.
  EXPECT_NEAR(a.floor_ms, fpt * tokens / h200_peak * 1e3, 1e-6);
  EXPECT_NEAR(a.floor_ms / 1e3, 10.9, 0.05);
  EXPECT_NE(text.find(tk::detail::format("floor: %.2f s per step", fpt * tokens / h200_peak)),
            std::string::npos)
      << text;

  // The printed 164% is trainkit's count against an A100's 312 TFLOP/s.
  std::vector<double> printed, peaks;
  for (std::size_t i = 1; i < lines.size(); ++i)
    if (lines[i].mfu > 0 && lines[i].ms < 1.5 * median) {
      printed.push_back(lines[i].mfu);
      peaks.push_back(fpt * tokens / (lines[i].ms / 1e3) / lines[i].mfu / 1e12);
    }
  EXPECT_DOUBLE_EQ(a.log_mfu, median_of(printed));
  EXPECT_NEAR(a.log_mfu, 1.64, 0.01);
  EXPECT_NEAR(a.log_peak_tflops, median_of(peaks), 1e-9);
  EXPECT_NEAR(a.log_peak_tflops, 312, 312 * 0.01);
  EXPECT_NE(text.find("the A100's dense bf16 peak"), std::string::npos) << text;

  // The iteration-0 warm-up (torch.compile) and the iteration-250 save, costed.
  EXPECT_EQ(a.warmup_lines, 1u);
  EXPECT_DOUBLE_EQ(a.warmup_ms, lines[0].ms - median);
  EXPECT_NE(text.find("torch.compile"), std::string::npos) << text;
  ASSERT_EQ(a.saves.size(), 1u);
  EXPECT_EQ(a.saves[0].event.step, 250u);
  const auto at250 =
      std::find_if(lines.begin(), lines.end(), [](auto& l) { return l.iter == 250; });
  ASSERT_NE(at250, lines.end());
  EXPECT_DOUBLE_EQ(a.saves[0].ms, at250->ms - median);
  EXPECT_NEAR(a.saves[0].ms, 84000, 100);
  EXPECT_TRUE(a.saves[0].with_eval) << "the evaluation at 250 shares the line";
  // Wall time: the printed iterations plus the unprinted ones at the median.
  double printed_ms = 0;
  for (const auto& l : lines) printed_ms += l.ms;
  const double wall = printed_ms + double(lines.back().iter + 1 - lines.size()) * median;
  EXPECT_NEAR(a.wall_ms, wall, 1e-6);
  EXPECT_NE(text.find(tk::detail::format("%.1f%% of wall time", 100 * a.saves[0].ms / wall)),
            std::string::npos)
      << text;
  ASSERT_EQ(a.spikes.size(), 1u);
  EXPECT_EQ(a.spikes[0].step, 250u);
  EXPECT_EQ(a.spikes[0].what, "evaluation + checkpoint save");

  EXPECT_EQ(a.verdict, tk::bottleneck::compute);
  EXPECT_NE(a.evidence.find("faster kernels, not more data workers"), std::string::npos);
  EXPECT_NE(
      a.evidence.find(tk::detail::format("saved up to ~%.0f s per save", a.saves[0].ms / 1e3)),
      std::string::npos)
      << a.evidence;
  EXPECT_NE(text.find("verdict: compute-bound"), std::string::npos);
  expect_no_flags(text);

  // The chart shows the save as its own phase at iteration 250.
  const std::string svg = tk::render_chart_svg(a.steps);
  EXPECT_NE(svg.find("class=\"ckpt_stall\" data-step=\"250\""), std::string::npos);
}

// What nanoGPT's log states (parameters, config echo, tokens per iteration) is enough with the
// device: the same MFU as from the preset, to the rounding of "1556.05M".
TEST(RunAnalysis, NanoGptFactsFromTheLogItself) {
  rp::log_report_config cfg;
  cfg.device = "H200";
  const auto a = rp::analyze_run(rp::read_run_log(fixture("nanogpt_gpt2xl_h200.log")), cfg);
  EXPECT_DOUBLE_EQ(a.params, 1556.05e6);
  EXPECT_EQ(a.layers, 48);
  EXPECT_EQ(a.width, 1600);
  EXPECT_EQ(a.seq, 1024);
  EXPECT_NEAR(a.mfu_median, 0.519, 0.001);
}

TEST(RunAnalysis, MissingFactsAreOneErrorNamingEveryField) {
  const auto run = rp::read_run_log(fixture("nanogpt_gpt2xl_h200.log"));
  try {
    rp::analyze_run(run, {});
    FAIL() << "no error";
  } catch (const tk::config_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("log_report_config.device"), std::string::npos) << m;
    EXPECT_EQ(m.find("log_report_config.seq"), std::string::npos) << "the log states T: " << m;
    expect_no_flags(m);
  }
  std::istringstream bare(
      "iter 0: loss 10.9, time 1000.00ms, mfu -100.00%\n"
      "iter 1: loss 10.8, time 500.00ms, mfu -100.00%\n");
  const auto little = rp::parse_run_log(bare, "bare.log");
  try {
    rp::analyze_run(little, {.peak_tflops = 989});
    FAIL() << "no error";
  } catch (const tk::config_error& e) {
    const std::string m = e.what();
    for (const char* field : {"log_report_config.model (or params, layers and width)",
                              "log_report_config.seq", "log_report_config.tokens_per_step"})
      EXPECT_NE(m.find(field), std::string::npos) << field << " in " << m;
    EXPECT_NE(m.find("bare.log"), std::string::npos) << m;
  }
  EXPECT_THROW(rp::analyze_run(run, {.model = "d99", .device = "H200"}), tk::config_error);
  try {
    rp::analyze_run(run, {.device = "TPU v5"});
    FAIL() << "no error";
  } catch (const tk::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("log_report_config.device: 'TPU v5'"), std::string::npos);
  }
}

// llm.c states everything (its table); its MFU uses 6·N_all + 6·L·C·T against its own peak.
TEST(RunAnalysis, LlmcRunOnAnH100) {
  const auto path = fixture("llmc_gpt2xl_h100.log");
  const std::regex step(R"(^step +(\d+)/\d+ \| .*\| ([0-9.]+) ms \| (-?[0-9.]+)% bf16 MFU \| .*)");
  std::vector<double> ms, mfu;
  for (const auto& l : lines_of(path)) {
    std::smatch m;
    if (std::regex_match(l, m, step))
      ms.push_back(std::stod(m[2])), mfu.push_back(std::stod(m[3]) / 100);
  }
  ASSERT_EQ(ms.size(), 60u);
  const double median = median_of(std::vector<double>(ms.begin() + 1, ms.end()));
  const double tokens = 1048576, fpt = trainkit_flops_per_token(n_no_wpe, 1024);
  const double llmc_fpt = 6 * n_all + 6 * L * C * 1024;

  const auto a = rp::analyze_run(rp::read_run_log(path), {});
  const std::string text = rp::format_run_analysis(a);
  EXPECT_DOUBLE_EQ(a.peak_tflops, 989.0) << "the device the log names, from trainkit's table";
  EXPECT_NEAR(a.params, n_no_wpe, 0.5);
  EXPECT_NEAR(a.mfu_median, fpt * tokens / (median / 1e3) / h200_peak, 1e-9);
  EXPECT_NEAR(a.mfu_median, 0.52, 0.01);
  EXPECT_NEAR(a.floor_ms / 1e3, 10.9, 0.05);
  EXPECT_NEAR(a.log_flops_per_token, llmc_fpt, 1e-6 * llmc_fpt);
  std::vector<double> printed, peaks;
  for (std::size_t i = 1; i < ms.size(); ++i)
    if (ms[i] < 1.5 * median) {
      printed.push_back(mfu[i]);
      peaks.push_back(llmc_fpt * tokens / (ms[i] / 1e3) / mfu[i] / 1e12);
    }
  EXPECT_DOUBLE_EQ(a.log_mfu, median_of(printed));
  EXPECT_NEAR(a.log_peak_tflops, median_of(peaks), 1e-9);
  EXPECT_NEAR(a.log_peak_tflops, 988.8, 988.8 * 0.005) << "llmc/mfu.h's H100 SXM figure";
  EXPECT_NE(text.find("(the NVIDIA H100 80GB HBM3's dense bf16 peak)"), std::string::npos) << text;
  // No compile: the first step is close to the median. The stall at step 37 has no event.
  EXPECT_EQ(a.warmup_lines, 0u);
  ASSERT_EQ(a.spikes.size(), 1u);
  EXPECT_EQ(a.spikes[0].step, 37u);
  EXPECT_DOUBLE_EQ(a.spikes[0].excess_ms, ms[36] - median);
  EXPECT_NE(a.spikes[0].what.find("nothing the log mentions"), std::string::npos);
  // The saves and evaluations happen outside llm.c's step timer: found, not costed.
  EXPECT_EQ(a.saves.size(), 2u);
  EXPECT_EQ(a.untimed_saves, 2u);
  EXPECT_EQ(a.untimed_evals, 4u);
  EXPECT_EQ(a.verdict, tk::bottleneck::compute);
  EXPECT_NE(a.evidence.find("their cost is not known"), std::string::npos) << a.evidence;
  expect_no_flags(text);
}

// torchtitan: step times from the timestamps, tokens from tps x time, the save's own figure.
TEST(RunAnalysis, TorchtitanRunOnAnH200) {
  rp::log_report_config cfg;
  cfg.params = 1'800'000'000;
  cfg.layers = 24;
  cfg.width = 2048;
  cfg.seq = 4096;
  const auto run = rp::read_run_log(fixture("torchtitan_llama_h200.log"));
  const auto a = rp::analyze_run(run, cfg);
  const std::string text = rp::format_run_analysis(a);
  const double fpt = 6 * 1.8e9 + 12 * 24 * 2048 * 4096.0;
  std::vector<double> dts;
  for (std::size_t i = 1; i < run.steps.size(); ++i)
    for (std::uint64_t k = 0; k < run.steps[i].covers; ++k) dts.push_back(run.steps[i].m.dt_ms);
  const double median = median_of(dts);
  EXPECT_DOUBLE_EQ(a.peak_tflops, 989.0);
  EXPECT_TRUE(a.tokens_derived);
  EXPECT_NEAR(a.tokens_per_step, 8 * 4096 * 8, 8 * 4096 * 8 * 1e-3);
  EXPECT_NEAR(a.mfu_median, fpt * a.tokens_per_step / (median / 1e3) / h200_peak, 1e-3);
  EXPECT_NEAR(a.mfu_median, 0.52, 0.01);
  // torchtitan's own MFU: its tflops over its 989 TFLOP/s, its count leaving the embedding out.
  EXPECT_NEAR(a.log_peak_tflops, 454.07 / 0.4591, 1e-9);
  EXPECT_NEAR(a.log_flops_per_token, 454.07e12 / 39010, 1e-3 * 454.07e12 / 39010);
  EXPECT_LT(a.log_flops_per_token, fpt);
  // The save: 84.12 s as the log states, 2% of the wall time; the evaluation at 250 costed
  // from its line's excess.
  ASSERT_EQ(a.saves.size(), 1u);
  EXPECT_TRUE(a.saves[0].stated);
  EXPECT_DOUBLE_EQ(a.saves[0].ms, 84120.0);
  double wall = 0;
  for (const auto& s : run.steps) wall += s.m.dt_ms * double(s.covers);
  EXPECT_NEAR(a.wall_ms, wall, 1e-6);
  EXPECT_NE(a.evidence.find(
                tk::detail::format("~84 s per save, %.1f%% of wall time", 100 * 84120.0 / wall)),
            std::string::npos)
      << a.evidence;
  ASSERT_EQ(a.evals.size(), 2u);
  const auto at260 = std::find_if(run.steps.begin(), run.steps.end(),
                                  [](const auto& s) { return s.m.step == 260; });
  ASSERT_NE(at260, run.steps.end());
  EXPECT_NEAR(a.evals[0].ms, (at260->m.dt_ms - median) * 10, 1e-6);
  EXPECT_EQ(a.warmup_lines, 1u);
  EXPECT_DOUBLE_EQ(a.memory_gib, 97.31);
  EXPECT_NE(text.find("memory: 97.31 GiB reserved at most"), std::string::npos) << text;
  EXPECT_EQ(a.verdict, tk::bottleneck::compute);
  expect_no_flags(text);
}

// The rules beside compute-bound, on runs built here.
TEST(RunAnalysis, CheckpointBoundEvalBoundAndUnknown) {
  auto make = [](double step_ms, double save_ms, double eval_ms) {
    rp::run_log run;
    run.format = rp::log_format::nanogpt;
    run.source = "made.log";
    for (std::uint64_t i = 0; i < 20; ++i) {
      rp::logged_step s;
      s.m.step = i;
      s.m.dt_ms = step_ms;
      if (i == 10) s.m.dt_ms += save_ms + eval_ms;
      run.steps.push_back(s);
    }
    if (eval_ms > 0)
      run.events.push_back({rp::log_event::kind_t::eval, 10, 1, 10, eval_ms, NAN, {}});
    if (save_ms > 0)
      run.events.push_back({rp::log_event::kind_t::checkpoint, 10, 2, 10, save_ms, NAN, {}});
    return run;
  };
  // d2-sized FLOPs against a 1 TFLOP/s peak: 6·N + 12·L·C·T at N 1e6, L 2, C 128, T 64.
  const rp::log_report_config cfg{.params = 1'000'000,
                                  .layers = 2,
                                  .width = 128,
                                  .seq = 64,
                                  .tokens_per_step = 4096,
                                  .peak_tflops = 1.0};
  const double step_at_50 = (6e6 + 12 * 2 * 128 * 64.0) * 4096 / 1e12 / 0.5 * 1e3;  // ms
  const auto ckpt = rp::analyze_run(make(step_at_50, 10 * step_at_50, 0), cfg);
  EXPECT_EQ(ckpt.verdict, tk::bottleneck::checkpoint);
  EXPECT_NEAR(ckpt.save_ms_total, 10 * step_at_50, 1e-9);
  EXPECT_NE(ckpt.evidence.find("an asynchronous checkpoint would have saved"), std::string::npos)
      << ckpt.evidence;
  const auto eval = rp::analyze_run(make(step_at_50, 0, 20 * step_at_50), cfg);
  EXPECT_EQ(eval.verdict, tk::bottleneck::eval);
  const auto slow = rp::analyze_run(make(step_at_50 * 5, 0, 0), cfg);  // MFU 10%
  EXPECT_EQ(slow.verdict, tk::bottleneck::unknown);
  EXPECT_NEAR(slow.mfu_median, 0.1, 1e-9);
  const auto fast = rp::analyze_run(make(step_at_50, 0, 0), cfg);
  EXPECT_EQ(fast.verdict, tk::bottleneck::compute);
  EXPECT_NEAR(fast.floor_ms, step_at_50 / 2, 1e-9);
}

// A span of steps too long to rebuild step by step is summarised one row per line, quickly.
TEST(RunAnalysis, AHugeStepSpanIsSummarisedPerLine) {
  std::istringstream in(
      "iter 0: loss 10.9, time 1000.00ms, mfu -100.00%\n"
      "iter 10000000: loss 3.0, time 500.00ms, mfu 1.00%\n"
      "iter 20000000: loss 2.9, time 500.00ms, mfu 1.00%\n");
  const auto run = rp::parse_run_log(in, "long.log");
  const auto a = rp::analyze_run(run, {.params = 1'000'000,
                                       .layers = 2,
                                       .width = 128,
                                       .seq = 64,
                                       .tokens_per_step = 4096,
                                       .peak_tflops = 1.0});
  EXPECT_TRUE(a.per_line);
  EXPECT_EQ(a.steps.size(), 3u);
  EXPECT_EQ(a.unprinted_steps, 20'000'001u - 3u);
  EXPECT_NEAR(a.wall_ms, 2000 + double(a.unprinted_steps) * 500, 1e-3);
}

// llm.c's total batch size is for all processes; MFU is per device, as llm.c's own.
TEST(RunAnalysis, TokensPerDeviceOfAMultiProcessRun) {
  std::istringstream in(
      "| total batch size      | 524288                                             |\n"
      "| num_processes         | 8                                                  |\n"
      "step    1/10 | loss 11.0 (+nanz)| norm 1.0 (+nanz)| lr 6.00e-06 | 300.00 ms | 40.0% bf16 "
      "MFU | 174032 tok/s\n"
      "step    2/10 | loss 10.9 (+nanz)| norm 1.0 (+nanz)| lr 6.00e-06 | 300.00 ms | 40.0% bf16 "
      "MFU | 174032 tok/s\n");
  const auto a = rp::analyze_run(rp::parse_run_log(in, "ddp.log"),
                                 {.model = "d12", .seq = 1024, .device = "H100"});
  EXPECT_EQ(a.devices, 8);
  EXPECT_DOUBLE_EQ(a.tokens_per_step, 524288.0 / 8);
  EXPECT_NE(rp::format_run_analysis(a).find("x 65,536 tokens per step on each of 8 devices"),
            std::string::npos)
      << rp::format_run_analysis(a);
  const tk::model::gpt2_config d12 = tk::model::gpt2_config::preset("d12");
  EXPECT_NEAR(a.mfu_median, d12.flops_per_token(1024) * 65536 / 0.3 / 989e12, 1e-12);
}
