// Tests for reading metrics JSONL back: round trip with the writer, a crashed run's cut-off last
// line (skipped with a warning), errors elsewhere, resumed runs' repeated steps, and a resumed
// sink finishing a cut-off line so the file stays readable.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <trainkit/report/metrics_reader.hpp>
#include <trainkit/trainer/metrics.hpp>
#include <trainkit/trainer/sinks/jsonl.hpp>

namespace tk = trainkit;

namespace {

tk::step_metrics sample(std::uint64_t step) {
  tk::step_metrics m;
  m.step = step;
  m.loss = 5.5 - 0.25 * double(step);
  m.lr = 6e-4;
  m.grad_norm = 1.25;
  m.tokens = 4096;
  m.compute_ms = 30.5;
  m.data_wait_ms = 1.5;
  m.optimizer_ms = 4;
  m.ckpt_stall_ms = step == 3 ? 100 : 0;
  m.other_ms = 0.25;
  m.dt_ms = m.phases_ms() + m.other_ms;
  m.tok_per_s = 100000;
  m.tflops = 0.05;
  m.mfu = 0.25;
  return m;
}

tk::metrics_file parse(const std::string& text) {
  std::istringstream in(text);
  return tk::parse_metrics_jsonl(in, "m.jsonl");
}

}  // namespace

TEST(MetricsReader, RoundTripsTheWriter) {
  std::string text;
  for (std::uint64_t s = 1; s <= 4; ++s) {
    auto m = sample(s);
    if (s == 2) m.val_loss = 4.75;
    if (s == 4) m.mfu = NAN;  // written as null
    m.mfu_calibrated = s == 1 ? 0.5 : NAN;
    text += tk::to_json_line(m) + "\n";
  }
  const auto f = parse(text);
  EXPECT_TRUE(f.warnings.empty());
  ASSERT_EQ(f.steps.size(), 4u);
  const auto& m = f.steps[2];
  EXPECT_EQ(m.step, 3u);
  EXPECT_DOUBLE_EQ(m.loss, 4.75);
  EXPECT_DOUBLE_EQ(m.ckpt_stall_ms, 100);
  EXPECT_DOUBLE_EQ(m.dt_ms, sample(3).dt_ms);
  EXPECT_EQ(m.tokens, 4096u);
  EXPECT_DOUBLE_EQ(f.steps[1].val_loss, 4.75);
  EXPECT_TRUE(std::isnan(f.steps[0].val_loss));
  EXPECT_TRUE(std::isnan(f.steps[3].mfu));  // null stays "unknown", not 0
  EXPECT_DOUBLE_EQ(f.steps[0].mfu_calibrated, 0.5);
  EXPECT_TRUE(std::isnan(f.steps[1].mfu_calibrated));
}

TEST(MetricsReader, CutOffLastLineIsSkippedWithAWarning) {
  const std::string full = tk::to_json_line(sample(1)) + "\n" + tk::to_json_line(sample(2)) + "\n";
  const std::string third = tk::to_json_line(sample(3));
  for (std::size_t cut : {std::size_t(1), third.size() / 2, third.size() - 1}) {
    const auto f = parse(full + third.substr(0, cut));
    EXPECT_EQ(f.steps.size(), 2u) << cut;
    ASSERT_EQ(f.warnings.size(), 1u) << cut;
    EXPECT_NE(f.warnings[0].find("m.jsonl:3"), std::string::npos) << f.warnings[0];
    EXPECT_NE(f.warnings[0].find("incomplete last line"), std::string::npos) << f.warnings[0];
  }
  // Trailing blank lines do not hide which line was last.
  EXPECT_EQ(parse(full + third.substr(0, 10) + "\n\n").warnings.size(), 1u);
}

TEST(MetricsReader, BadLineInTheMiddleIsAnError) {
  const std::string text = tk::to_json_line(sample(1)) + "\n{\"step\":2,\"dt_ms\":x}\n" +
                           tk::to_json_line(sample(3)) + "\n";
  try {
    parse(text);
    FAIL() << "expected format_error";
  } catch (const tk::format_error& e) {
    EXPECT_NE(std::string(e.what()).find("m.jsonl:2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse("{\"step\":1}\n"), tk::format_error);                          // no dt_ms
  EXPECT_THROW(parse("{\"step\":1,\"dt_ms\":{\"x\":1}}\n{}\n"), tk::format_error);  // nested
  EXPECT_THROW(parse("[1,2]\n{\"step\":1,\"dt_ms\":1}\n"), tk::format_error);
  EXPECT_THROW(parse("{\"step\":1,\"dt_ms\":1} trailing\n{\"step\":2,\"dt_ms\":1}\n"),
               tk::format_error);
}

// Found by fuzz_metrics_reader: a negative, fractional or huge step was cast to uint64 (UB).
TEST(MetricsReader, StepAndTokensMustBeNonNegativeIntegers) {
  for (const char* bad : {"-1", "1.5", "1e30"}) {
    try {
      parse(std::string("{\"step\":") + bad + ",\"dt_ms\":1}\n{\"step\":9,\"dt_ms\":1}\n");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const tk::format_error& e) {
      EXPECT_NE(std::string(e.what()).find("m.jsonl:1: \"step\""), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse("{\"step\":1,\"tokens\":-5,\"dt_ms\":1}\n{\"step\":2,\"dt_ms\":1}\n"),
               tk::format_error);
}

TEST(MetricsReader, CutOffTellsTruncationFromGarbage) {
  using tk::detail::json_parse_status;
  const std::string line = "{\"step\":12,\"lr\":-6e-04,\"loss\":null,\"x\":\"a\\\"b\",\"t\":true}";
  EXPECT_EQ(tk::detail::parse_flat_json(line).status, json_parse_status::ok);
  for (std::size_t n = 0; n < line.size(); ++n)
    EXPECT_EQ(tk::detail::parse_flat_json(line.substr(0, n)).status, json_parse_status::cut_off)
        << line.substr(0, n);
  EXPECT_EQ(tk::detail::parse_flat_json("{\"step\":nul}").status, json_parse_status::malformed);
  EXPECT_EQ(tk::detail::parse_flat_json("{\"step\" 1}").status, json_parse_status::malformed);
  EXPECT_EQ(tk::detail::parse_flat_json("{\"a\":1}{").status, json_parse_status::malformed);
}

TEST(MetricsReader, ResumedRunReplacesRepeatedSteps) {
  // Steps 1..5 ran, the checkpoint was at 3, the resumed run wrote 4..6.
  std::string text;
  for (std::uint64_t s = 1; s <= 5; ++s) text += tk::to_json_line(sample(s)) + "\n";
  for (std::uint64_t s = 4; s <= 6; ++s) {
    auto m = sample(s);
    m.compute_ms = 99;
    text += tk::to_json_line(m) + "\n";
  }
  const auto f = parse(text);
  ASSERT_EQ(f.steps.size(), 6u);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(f.steps[i].step, i + 1);
  EXPECT_DOUBLE_EQ(f.steps[3].compute_ms, 99);
  EXPECT_DOUBLE_EQ(f.steps[2].compute_ms, 30.5);
  ASSERT_EQ(f.warnings.size(), 1u);
  EXPECT_NE(f.warnings[0].find("2 earlier line(s) replaced"), std::string::npos) << f.warnings[0];
}

TEST(MetricsReader, ResumedSinkEndsACutOffLine) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("trainkit-metrics-reader-" + std::to_string(::getpid()) + ".jsonl");
  {
    std::ofstream out(path, std::ios::trunc);
    out << tk::to_json_line(sample(1)) << "\n" << tk::to_json_line(sample(2)).substr(0, 20);
  }
  {
    tk::jsonl_sink sink(path, /*append=*/true);
    sink.write(tk::to_json_line(sample(2)));
    sink.write(tk::to_json_line(sample(3)));
  }
  // Without the sink's newline the resumed step 2 would be glued onto the cut-off line.
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) ++n;
  EXPECT_EQ(n, 4);
  const auto f = tk::read_metrics_jsonl(path);
  ASSERT_EQ(f.steps.size(), 3u);
  EXPECT_EQ(f.steps[1].step, 2u);
  EXPECT_EQ(f.steps[2].step, 3u);
  ASSERT_EQ(f.warnings.size(), 1u);
  EXPECT_NE(f.warnings[0].find(":2: cut-off line skipped"), std::string::npos) << f.warnings[0];
  std::filesystem::remove(path);
  EXPECT_THROW(tk::read_metrics_jsonl(path), tk::io_error);
}
