// Tests for the SVG run chart: well-formed XML, one loss point per step, stacked phase bars whose
// heights add up to each step's wall time, binning of long runs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <trainkit/report/chart.hpp>

namespace tk = trainkit;

namespace {

std::vector<tk::step_metrics> run_of(int n) {
  std::vector<tk::step_metrics> v;
  for (int i = 1; i <= n; ++i) {
    tk::step_metrics m;
    m.step = std::uint64_t(i);
    m.loss = 6.0 - 0.05 * i;
    m.data_wait_ms = 0.5 + (i % 3);
    m.compute_ms = 40 + i % 7;
    m.optimizer_ms = 5;
    m.ckpt_stall_ms = i % 10 == 0 ? 120 : 0;  // a spike every 10 steps
    m.log_ms = 0.2;
    m.other_ms = 0.3;
    m.dt_ms = m.phases_ms() + m.other_ms;
    if (i % 5 == 0) m.val_loss = m.loss + 0.1;
    v.push_back(m);
  }
  return v;
}

/// Checks XML well-formedness the way a parser would for this subset: every start tag closed in
/// order, self-closing tags balanced, attributes quoted, no stray '<' or '&' in text.
::testing::AssertionResult well_formed(const std::string& s) {
  std::vector<std::string> stack;
  std::size_t i = 0;
  if (s.rfind("<?xml", 0) == 0) i = s.find("?>") + 2;
  const std::regex attr(R"(\s+[a-zA-Z_:][-a-zA-Z0-9_:.]*="[^"<]*")");
  while (i < s.size()) {
    const auto lt = s.find('<', i);
    const std::string text = s.substr(i, lt == std::string::npos ? std::string::npos : lt - i);
    for (std::size_t a = text.find('&'); a != std::string::npos; a = text.find('&', a + 1))
      if (!std::regex_search(text.substr(a), std::regex("^&(amp|lt|gt|quot|apos);")))
        return ::testing::AssertionFailure() << "bare & in text: " << text;
    if (lt == std::string::npos) break;
    const auto gt = s.find('>', lt);
    if (gt == std::string::npos) return ::testing::AssertionFailure() << "unclosed tag";
    std::string tag = s.substr(lt + 1, gt - lt - 1);
    if (tag.find('<') != std::string::npos)
      return ::testing::AssertionFailure() << "'<' inside tag: " << tag;
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (stack.empty() || stack.back() != name)
        return ::testing::AssertionFailure()
               << "</" << name << "> closes " << (stack.empty() ? "nothing" : stack.back());
      stack.pop_back();
    } else {
      const bool self = tag.back() == '/';
      if (self) tag.pop_back();
      const auto sp = tag.find_first_of(" \n");
      const std::string name = tag.substr(0, sp);
      const std::string attrs = sp == std::string::npos ? "" : tag.substr(sp);
      if (std::regex_replace(attrs, attr, "").find_first_not_of(" \n") != std::string::npos)
        return ::testing::AssertionFailure() << "bad attributes in <" << tag << ">";
      if (!self) stack.push_back(name);
    }
    i = gt + 1;
  }
  if (!stack.empty()) return ::testing::AssertionFailure() << "<" << stack.back() << "> not closed";
  return ::testing::AssertionSuccess();
}

double attr_of(const std::string& tag, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(tag, m, std::regex(" " + name + "=\"([^\"]*)\"")))
    throw std::runtime_error("no attribute " + name + " in " + tag);
  return std::stod(m[1]);
}

std::vector<std::string> tags_of(const std::string& s, const std::string& name) {
  std::vector<std::string> out;
  const std::regex re("<" + name + "[ >][^>]*>");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back(it->str());
  return out;
}

std::size_t polyline_points(const std::string& svg) {
  std::smatch m;
  EXPECT_TRUE(
      std::regex_search(svg, m, std::regex("<polyline id=\"loss\"[^>]* points=\"([^\"]*)\"")));
  const std::string pts = m[1];
  std::size_t n = 0;
  const std::regex point("[-0-9.]+,[-0-9.]+");
  for (auto it = std::sregex_iterator(pts.begin(), pts.end(), point); it != std::sregex_iterator();
       ++it)
    ++n;
  return n;
}

}  // namespace

TEST(Chart, WellFormedWithOnePointPerStep) {
  const auto steps = run_of(37);
  const std::string svg = tk::render_chart_svg(steps, {.title = "a & b <test>"});
  EXPECT_TRUE(well_formed(svg));
  EXPECT_EQ(polyline_points(svg), steps.size());
  EXPECT_EQ(tags_of(svg, "circle").size(), 7u + 1u);  // 7 val points + the legend dot
  EXPECT_NE(svg.find("a &amp; b &lt;test&gt;"), std::string::npos);
}

TEST(Chart, StackedBarsSumToStepTime) {
  const auto steps = run_of(25);
  const std::string svg = tk::render_chart_svg(steps);
  std::smatch g;
  ASSERT_TRUE(
      std::regex_search(svg, g, std::regex("<g id=\"phases\" data-px-per-ms=\"([^\"]*)\"")));
  const double px_per_ms = std::stod(g[1]);
  ASSERT_GT(px_per_ms, 0);
  std::map<int, double> height;       // per step
  std::map<int, double> top, bottom;  // the stack is contiguous: each segment sits on the last
  std::map<int, int> segments;
  for (const auto& tag : tags_of(svg, "rect")) {
    if (tag.find("data-step") == std::string::npos) continue;
    const int step = int(attr_of(tag, "data-step"));
    const double y = attr_of(tag, "y"), h = attr_of(tag, "height");
    EXPECT_GT(h, 0);
    if (segments[step]++ > 0)
      EXPECT_NEAR(y + h, top[step], 1e-3) << "gap in the stack, step " << step;
    else
      bottom[step] = y + h;
    top[step] = y;
    height[step] += h;
  }
  ASSERT_EQ(height.size(), steps.size());
  for (const auto& m : steps) {
    EXPECT_NEAR(height.at(int(m.step)) / px_per_ms, m.dt_ms, 1e-3 * m.dt_ms) << m.step;
    EXPECT_EQ(segments.at(int(m.step)), m.ckpt_stall_ms > 0 ? 6 : 5) << m.step;
  }
  // All bars stand on the same baseline.
  for (const auto& [step, b] : bottom) EXPECT_NEAR(b, bottom.begin()->second, 1e-3) << step;
}

TEST(Chart, LongRunsAreBinnedAndStillSumToMeanStepTime) {
  const auto steps = run_of(1000);
  const std::string svg = tk::render_chart_svg(steps, {.max_points = 100});
  EXPECT_TRUE(well_formed(svg));
  EXPECT_EQ(polyline_points(svg), 100u);
  std::smatch g;
  ASSERT_TRUE(std::regex_search(svg, g, std::regex("data-px-per-ms=\"([^\"]*)\"")));
  const double px_per_ms = std::stod(g[1]);
  double total_px = 0;
  for (const auto& tag : tags_of(svg, "rect"))
    if (tag.find("data-step") != std::string::npos) total_px += attr_of(tag, "height");
  double total_ms = 0;
  for (const auto& m : steps) total_ms += m.dt_ms;
  // 100 bins of 10 steps, each bar the bin's mean: the bars add up to the run's time / 10.
  EXPECT_NEAR(total_px / px_per_ms, total_ms / 10, 1e-3 * total_ms);
}

TEST(Chart, EmptyAndSingleStepRuns) {
  EXPECT_TRUE(well_formed(tk::render_chart_svg({})));
  const auto one = run_of(1);
  const std::string svg = tk::render_chart_svg(one);
  EXPECT_TRUE(well_formed(svg));
  EXPECT_EQ(polyline_points(svg), 1u);
}

TEST(Chart, WritesAFile) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("trainkit-chart-" + std::to_string(::getpid()) + ".svg");
  tk::write_chart_svg(path, run_of(3));
  EXPECT_GT(std::filesystem::file_size(path), 500u);
  std::filesystem::remove(path);
  EXPECT_THROW(tk::write_chart_svg("/proc/definitely/not/writable.svg", run_of(3)), tk::io_error);
}
