// Tests for the end-of-run summary: percentiles, phase shares, verdicts and the JSON line format.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <vector>

#include <trainkit/trainer/metrics.hpp>
#include <trainkit/trainer/report.hpp>

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
  EXPECT_DOUBLE_EQ(j["val_loss"].get<double>(), 5.5);
  m.val_loss = NAN;
  m.mfu = NAN;  // unknown device peak
  const auto k = nlohmann::json::parse(tk::to_json_line(m));
  EXPECT_FALSE(k.contains("val_loss"));
  EXPECT_TRUE(k["mfu"].is_null());
}
