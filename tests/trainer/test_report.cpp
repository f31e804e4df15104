// Tests for the end-of-run summary: percentiles, phase shares, verdicts and the JSON line format.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <trainkit/trainer/metrics.hpp>
#include <trainkit/trainer/report.hpp>
#include <trainkit/trainer/sinks/console.hpp>

namespace tk = trainkit;

namespace {
tk::step_metrics step(std::uint64_t n, double compute, double data = 0, double ckpt = 0,
                      double other = 0) {
  tk::step_metrics m;
  m.step = n;
  m.tokens = 1000;
  m.compute_ms = compute;
  m.data_wait_ms = data;
  m.ckpt_stall_ms = ckpt;
  m.other_ms = other;
  m.dt_ms = compute + data + ckpt + other;
  m.tflops = 1.0;
  m.mfu = 0.5;
  return m;
}
}  // namespace

TEST(Report, MedianAndP95ExcludeTheFirstStep) {
  std::vector<tk::step_metrics> s{step(1, 1000)};
  for (int i = 2; i <= 21; ++i) s.push_back(step(i, double(i)));  // 2..21 ms
  const auto r = tk::summarize(s);
  EXPECT_EQ(r.steady_steps, 20u);
  EXPECT_DOUBLE_EQ(r.first_step_ms, 1000);
  EXPECT_DOUBLE_EQ(r.median_step_ms, 11.5);
  EXPECT_NEAR(r.p95_step_ms, 2 + 0.95 * 19, 1e-9);
  double total = 0;
  for (int i = 2; i <= 21; ++i) total += i;
  EXPECT_NEAR(r.tokens_per_s, 20 * 1000 / (total / 1e3), 1e-6);
}

TEST(Report, SharesSumToOne) {
  std::vector<tk::step_metrics> s;
  for (int i = 1; i <= 5; ++i) s.push_back(step(i, 10, 2, 3, 1));
  const auto r = tk::summarize(s);
  double sum = 0;
  for (const auto& p : r.phases) sum += p.share;
  EXPECT_NEAR(sum, 1.0, 1e-12);
}

TEST(Report, Verdicts) {
  auto verdict = [](double compute, double data, double ckpt, double other) {
    std::vector<tk::step_metrics> s;
    for (int i = 1; i <= 10; ++i) s.push_back(step(i, compute, data, ckpt, other));
    return tk::summarize(s).verdict;
  };
  EXPECT_EQ(verdict(100, 1, 0, 1), tk::bottleneck::compute);
  EXPECT_EQ(verdict(100, 40, 0, 1), tk::bottleneck::input);
  EXPECT_EQ(verdict(100, 1, 40, 1), tk::bottleneck::checkpoint);
  EXPECT_EQ(verdict(100, 1, 1, 60), tk::bottleneck::host);
  // Time blocked in the reducer's finish(): communication, named with its share.
  std::vector<tk::step_metrics> comm;
  for (int i = 1; i <= 10; ++i) {
    comm.push_back(step(i, 100, 1, 0, 1));
    comm.back().comm_ms = 30;
    comm.back().dt_ms += 30;
  }
  const auto c = tk::summarize(comm);
  EXPECT_EQ(c.verdict, tk::bottleneck::communication);
  EXPECT_STREQ(tk::bottleneck_name(c.verdict), "communication-bound");
  EXPECT_NE(c.evidence.find("waited 22.7% of the time for the gradient reduction"),
            std::string::npos)
      << c.evidence;
  for (auto& m : comm) m.comm_ms = 5, m.dt_ms = 107;  // 4.7%: under the threshold
  EXPECT_EQ(tk::summarize(comm).verdict, tk::bottleneck::compute);
  std::vector<tk::step_metrics> warm{step(1, 100000)};
  for (int i = 2; i <= 5; ++i) warm.push_back(step(i, 10));
  EXPECT_EQ(tk::summarize(warm).verdict, tk::bottleneck::warmup);
}

TEST(Metrics, JsonLineRoundTrips) {
  auto m = step(12, 380.25, 0.5, 0, 1.25);
  m.loss = 5.8125;
  m.lr = 6e-4;
  m.val_loss = 5.5;
  const auto j = nlohmann::json::parse(tk::to_json_line(m));
  EXPECT_EQ(j["step"].get<int>(), 12);
  EXPECT_DOUBLE_EQ(j["loss"].get<double>(), 5.8125);
  EXPECT_DOUBLE_EQ(j["lr"].get<double>(), 6e-4);
  EXPECT_DOUBLE_EQ(j["compute_ms"].get<double>(), 380.25);
  for (const auto& p : tk::phase_table) EXPECT_TRUE(j.contains(p.json_key)) << p.json_key;
  EXPECT_DOUBLE_EQ(j["comm_ms"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(j["val_loss"].get<double>(), 5.5);
  m.val_loss = NAN;
  m.mfu = NAN;  // unknown device peak
  const auto k = nlohmann::json::parse(tk::to_json_line(m));
  EXPECT_FALSE(k.contains("val_loss"));
  EXPECT_TRUE(k["mfu"].is_null());
}

TEST(Report, ComputeBoundEvidenceSaysHowFarFromPeak) {
  std::vector<tk::step_metrics> s;
  for (int i = 1; i <= 10; ++i) s.push_back(step(i, 100, 1, 0, 1));
  // tflops 1.0, mfu 0.5 per step: the peak is recovered as 2 TFLOP/s when not given.
  const auto derived = tk::summarize(s);
  EXPECT_EQ(derived.verdict, tk::bottleneck::compute);
  EXPECT_DOUBLE_EQ(derived.peak_tflops, 2.0);
  EXPECT_NE(derived.evidence.find("MFU 50.0% of the device's dense peak 2 TFLOP/s"),
            std::string::npos)
      << derived.evidence;
  const auto given = tk::summarize(s, {}, {.peak_tflops = 2.0, .dtype = "bf16"});
  EXPECT_NE(given.evidence.find("dense bf16 peak 2 TFLOP/s"), std::string::npos) << given.evidence;
  for (auto& m : s) m.mfu = NAN;  // device not in the table
  const auto unknown = tk::summarize(s);
  EXPECT_TRUE(std::isnan(unknown.mfu));
  EXPECT_NE(unknown.evidence.find("MFU unknown"), std::string::npos) << unknown.evidence;
  // The library names the config field; the program maps it to its flag.
  EXPECT_NE(tk::format_summary(unknown).find("summary_context.peak_tflops"), std::string::npos);
  EXPECT_EQ(tk::format_summary(unknown).find("--"), std::string::npos);
}

// Nothing runs above its peak: a step over 100% of the assumed peak (a CPU faster than the table's
// placeholder, a wrong device name) is not stated as a measurement, even where the mean is below
// 100%; the sentence names the field to fix and the peak that would be consistent.
TEST(Report, MfuAboveThePeakIsNotStated) {
  std::vector<tk::step_metrics> s;
  for (int i = 1; i <= 6; ++i) s.push_back(step(i, 100));
  s[3].mfu = 1.3;  // one steady step at 130% of the 2 TFLOP/s peak
  const auto r = tk::summarize(s, {}, {.peak_tflops = 2.0, .dtype = ""});
  EXPECT_LT(r.mfu, 1.0);
  EXPECT_DOUBLE_EQ(r.max_step_mfu, 1.3);
  const std::string text = tk::format_summary(r);
  EXPECT_NE(text.find("MFU not stated: steps reach 130% of the dense peak 2 TFLOP/s"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("mfu_settings.peak_tflops; 2.6 TFLOP/s or more"), std::string::npos) << text;
  EXPECT_EQ(text.find("MFU 5"), std::string::npos) << text;  // no figure beside it

  std::ostringstream out;
  tk::console_sink console(out, {.log_every = 1}, 6);
  console.on_step(s[3]);
  console.on_step(s[4]);
  EXPECT_NE(out.str().find("MFU n/a (peak too low)"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("MFU 130"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("MFU 50.0%"), std::string::npos) << out.str();
}

TEST(Report, CalibratedMfuIsReportedBesideTheTablePeak) {
  std::vector<tk::step_metrics> s;
  for (int i = 1; i <= 5; ++i) {
    auto m = step(i, 100);
    m.mfu_calibrated = 0.8;  // 1 TFLOP/s achieved against a measured 1.25
    s.push_back(m);
  }
  const auto r = tk::summarize(s);
  EXPECT_NEAR(r.calibrated_tflops, 1.25, 1e-12);
  EXPECT_NEAR(r.mfu_calibrated, 0.8, 1e-12);
  const std::string text = tk::format_summary(r);
  EXPECT_NE(text.find("MFU 50.0% of the device's dense peak 2 TFLOP/s (80.0% of the measured "
                      "GEMM rate 1.25 TFLOP/s)"),
            std::string::npos)
      << text;
}

TEST(Report, WarmUpLineIsAlwaysShown) {
  std::vector<tk::step_metrics> s{step(1, 30)};
  for (int i = 2; i <= 5; ++i) s.push_back(step(i, 10));
  const std::string text = tk::format_summary(tk::summarize(s));
  EXPECT_NE(text.find("warm-up: first step 30.0 ms vs median 10.0 ms (3.00x)"), std::string::npos)
      << text;
  EXPECT_EQ(tk::summarize(s).verdict, tk::bottleneck::compute);  // shown, not blamed
}

TEST(Report, HostBoundEvidenceNamesLaunchGaps) {
  std::vector<tk::step_metrics> s;
  for (int i = 1; i <= 10; ++i) s.push_back(step(i, 50, 0, 0, 50));
  const auto r = tk::summarize(s);
  EXPECT_EQ(r.verdict, tk::bottleneck::host);
  EXPECT_NE(r.evidence.find("launch gaps"), std::string::npos) << r.evidence;
}

TEST(Report, CheckpointAndEvalEvidenceNameConfigFieldsNotFlags) {
  std::vector<tk::step_metrics> s;
  for (int i = 1; i <= 10; ++i) s.push_back(step(i, 100, 0, 50));
  const auto ckpt = tk::summarize(s);
  EXPECT_EQ(ckpt.verdict, tk::bottleneck::checkpoint);
  EXPECT_NE(ckpt.evidence.find("checkpoint::asio_checkpointer"), std::string::npos)
      << ckpt.evidence;
  EXPECT_NE(ckpt.evidence.find("trainer_config.ckpt_every"), std::string::npos) << ckpt.evidence;
  for (auto& m : s) m.ckpt_stall_ms = 0, m.eval_ms = 100, m.dt_ms = 200;
  const auto eval = tk::summarize(s);
  EXPECT_EQ(eval.verdict, tk::bottleneck::eval);
  EXPECT_NE(eval.evidence.find("trainer_config.eval_every"), std::string::npos) << eval.evidence;
  EXPECT_EQ(tk::format_summary(ckpt).find("--"), std::string::npos);
  EXPECT_EQ(tk::format_summary(eval).find("--"), std::string::npos);
}
