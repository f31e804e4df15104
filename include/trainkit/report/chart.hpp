// trainkit/report/chart.hpp — an SVG chart of a run: loss over steps and where each step's time
// went.
//
// Two panels sharing the step axis: the training loss as a polyline (validation loss as dots),
// and a stacked bar per step whose segments are the rows of the phase table (data wait, H2D,
// compute, communication, optimizer, ..., other), so the bar's height is the step's wall
// time. A checkpoint stall or an input stall shows up as a differently coloured spike exactly
// where it happened, which a median hides. SVG is written by hand (no plotting library): it is
// text, diffable, opens in any browser, and keeps the library's dependencies unchanged.
// Runs longer than `max_points` steps are averaged into that many bins so files stay small.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/trainer/metrics.hpp"

namespace trainkit {

struct chart_options {
  int width = 960;                // pixels, whole image
  int panel_height = 260;         // pixels, each plot area
  std::size_t max_points = 1500;  // more steps than this are averaged into this many bins
  std::string title = "trainkit run";
};

namespace detail {

/// "#rrggbb" of a phase's ARGB colour: the chart and the NVTX timeline share hues.
inline std::string svg_color(std::uint32_t argb) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%06x", unsigned(argb & 0xffffffu));
  return buf;
}

inline std::string svg_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

inline std::string fmt_num(double v, const char* f = "%.2f") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

/// About `n` round tick values covering [lo, hi] (1, 2, 5 × 10^k steps).
inline std::vector<double> nice_ticks(double lo, double hi, int n = 5) {
  std::vector<double> t;
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / n;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) t.push_back(v);
  return t;
}

inline std::string tick_label(double v) {
  char buf[32];
  if (std::fabs(v) >= 1e7 || (std::fabs(v) < 1e-2 && v != 0))
    std::snprintf(buf, sizeof buf, "%.3g", v);
  else
    std::snprintf(buf, sizeof buf, "%.7g", std::round(v * 1000) / 1000);
  return buf;
}

/// Steps averaged into at most `max_points` bins (each bin's step is its mean step).
inline std::vector<step_metrics> bin_steps(std::span<const step_metrics> steps,
                                           std::size_t max_points) {
  if (max_points == 0 || steps.size() <= max_points)
    return std::vector<step_metrics>(steps.begin(), steps.end());
  const std::size_t per = (steps.size() + max_points - 1) / max_points;
  std::vector<step_metrics> out;
  for (std::size_t i = 0; i < steps.size(); i += per) {
    const std::size_t end = std::min(steps.size(), i + per);
    step_metrics b;
    double step_sum = 0, loss_sum = 0;
    std::size_t loss_n = 0;
    for (std::size_t j = i; j < end; ++j) {
      const auto& m = steps[j];
      step_sum += double(m.step);
      if (std::isfinite(m.loss)) {
        loss_sum += m.loss;
        ++loss_n;
      }
      b.dt_ms += m.dt_ms;
      for (const auto& p : phase_table) b.*p.field += m.*p.field;
    }
    const double k = double(end - i);
    b.step = std::uint64_t(std::llround(step_sum / k));
    b.loss = loss_n ? loss_sum / double(loss_n) : NAN;
    b.dt_ms /= k;
    for (const auto& p : phase_table) b.*p.field /= k;
    out.push_back(b);
  }
  return out;
}

}  // namespace detail

/// The chart as an SVG document. Rects of the phase panel carry `data-step` and live in
/// `<g id="phases" data-px-per-ms=...>`, so a reader (or a test) can recover the milliseconds.
inline std::string render_chart_svg(std::span<const step_metrics> steps,
                                    const chart_options& opt = {}) {
  using detail::fmt_num;
  const double left = 70, right = 150, top = 44, gap = 56, bottom = 40;
  const double pw = double(opt.width) - left - right, ph = double(opt.panel_height);
  const double height = top + ph + gap + ph + bottom;
  const double top2 = top + ph + gap;
  const auto bins = detail::bin_steps(steps, opt.max_points);

  std::string s;
  s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(opt.width) +
       "\" height=\"" + fmt_num(height, "%.0f") + "\" viewBox=\"0 0 " + std::to_string(opt.width) +
       " " + fmt_num(height, "%.0f") + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + fmt_num(left) + "\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" +
       detail::svg_escape(opt.title) + "</text>\n";
  if (bins.empty()) {
    s += "<text x=\"" + fmt_num(left) + "\" y=\"" + fmt_num(top + 20) +
         "\">no steps recorded</text>\n</svg>\n";
    return s;
  }

  // Shared x axis: step number.
  const double x_lo = double(bins.front().step), x_hi = double(bins.back().step);
  const double x_span = x_hi > x_lo ? x_hi - x_lo : 1.0;
  const double slot = pw / double(bins.size());  // one bar per bin
  auto x_of = [&](double step) {
    return bins.size() == 1 ? left + pw / 2
                            : left + slot / 2 + (step - x_lo) / x_span * (pw - slot);
  };
  auto x_axis = [&](double y0, const char* label) {
    s += "<g class=\"x-axis\" stroke=\"#444\">";
    s += "<line x1=\"" + fmt_num(left) + "\" y1=\"" + fmt_num(y0) + "\" x2=\"" +
         fmt_num(left + pw) + "\" y2=\"" + fmt_num(y0) + "\"/></g>\n";
    for (double t : detail::nice_ticks(x_lo, x_hi, 8)) {
      if (t < x_lo || t > x_hi) continue;
      s += "<text x=\"" + fmt_num(x_of(t)) + "\" y=\"" + fmt_num(y0 + 15) +
           "\" text-anchor=\"middle\" fill=\"#444\">" + detail::tick_label(t) + "</text>\n";
    }
    s += "<text x=\"" + fmt_num(left + pw / 2) + "\" y=\"" + fmt_num(y0 + 31) +
         "\" text-anchor=\"middle\" fill=\"#444\">" + label + "</text>\n";
  };
  auto y_axis = [&](double y_top, double lo, double hi, const std::string& label) {
    s += "<line x1=\"" + fmt_num(left) + "\" y1=\"" + fmt_num(y_top) + "\" x2=\"" + fmt_num(left) +
         "\" y2=\"" + fmt_num(y_top + ph) + "\" stroke=\"#444\"/>\n";
    for (double t : detail::nice_ticks(lo, hi, 5)) {
      const double y = y_top + ph - (t - lo) / (hi - lo) * ph;
      s += "<line x1=\"" + fmt_num(left) + "\" y1=\"" + fmt_num(y) + "\" x2=\"" +
           fmt_num(left + pw) + "\" y2=\"" + fmt_num(y) + "\" stroke=\"#e6e6e6\"/>\n";
      s += "<text x=\"" + fmt_num(left - 6) + "\" y=\"" + fmt_num(y + 4) +
           "\" text-anchor=\"end\" fill=\"#444\">" + detail::tick_label(t) + "</text>\n";
    }
    s += "<text transform=\"translate(16," + fmt_num(y_top + ph / 2) +
         ") rotate(-90)\" text-anchor=\"middle\" fill=\"#444\">" + detail::svg_escape(label) +
         "</text>\n";
  };

  // ---- panel 1: loss ---------------------------------------------------------------------------
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& b : bins)
    if (std::isfinite(b.loss)) lo = std::min(lo, b.loss), hi = std::max(hi, b.loss);
  for (const auto& m : steps)
    if (std::isfinite(m.val_loss)) lo = std::min(lo, m.val_loss), hi = std::max(hi, m.val_loss);
  if (!(hi >= lo)) lo = 0, hi = 1;
  if (hi - lo < 1e-9) lo -= 0.5, hi += 0.5;
  const double pad = 0.05 * (hi - lo);
  lo -= pad;
  hi += pad;
  auto y_loss = [&](double v) { return top + ph - (v - lo) / (hi - lo) * ph; };
  y_axis(top, lo, hi, "loss");
  s += "<polyline id=\"loss\" fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"1.5\" points=\"";
  bool first = true;
  for (const auto& b : bins) {
    if (!std::isfinite(b.loss)) continue;
    if (!first) s += ' ';
    first = false;
    s += fmt_num(x_of(double(b.step))) + "," + fmt_num(y_loss(b.loss));
  }
  s += "\"/>\n<g id=\"val_loss\" fill=\"#e15759\">";
  for (const auto& m : steps) {
    if (!std::isfinite(m.val_loss) || double(m.step) < x_lo || double(m.step) > x_hi) continue;
    s += "<circle cx=\"" + fmt_num(x_of(double(m.step))) + "\" cy=\"" +
         fmt_num(y_loss(m.val_loss)) + "\" r=\"3.5\"/>";
  }
  s += "</g>\n";
  x_axis(top + ph, "step");
  const double lx = left + pw + 16;
  s += "<line x1=\"" + fmt_num(lx) + "\" y1=\"" + fmt_num(top + 10) + "\" x2=\"" +
       fmt_num(lx + 18) + "\" y2=\"" + fmt_num(top + 10) +
       "\" stroke=\"#4e79a7\" stroke-width=\"2\"/>";
  s += "<text x=\"" + fmt_num(lx + 24) + "\" y=\"" + fmt_num(top + 14) + "\">train loss</text>\n";
  s += "<circle cx=\"" + fmt_num(lx + 9) + "\" cy=\"" + fmt_num(top + 30) +
       "\" r=\"3.5\" fill=\"#e15759\"/>";
  s += "<text x=\"" + fmt_num(lx + 24) + "\" y=\"" + fmt_num(top + 34) + "\">val loss</text>\n";

  // ---- panel 2: phases, stacked per step -------------------------------------------------------
  double dt_max = 0;
  std::array<double, phase_table.size()> totals{};
  double total = 0;
  for (const auto& b : bins) {
    double stack = 0;
    for (std::size_t i = 0; i < phase_table.size(); ++i) {
      stack += b.*phase_table[i].field;
      totals[i] += b.*phase_table[i].field;
    }
    dt_max = std::max({dt_max, b.dt_ms, stack});
    total += stack;
  }
  if (!(dt_max > 0)) dt_max = 1;
  // Round the scale up to a tick so the tallest bar sits under a labelled line.
  const auto ticks = detail::nice_ticks(0, dt_max, 5);
  const double tick = ticks.size() > 1 ? ticks[1] - ticks[0] : dt_max;
  const double y_max = std::ceil(dt_max / tick * (1 - 1e-12)) * tick;
  const double px_per_ms = ph / y_max;
  y_axis(top2, 0, y_max,
         bins.size() < steps.size()
             ? "ms per step (mean of " +
                   std::to_string((steps.size() + bins.size() - 1) / bins.size()) + ")"
             : std::string("ms per step"));
  s += "<g id=\"phases\" data-px-per-ms=\"" + fmt_num(px_per_ms, "%.9g") + "\">\n";
  const double bar_w = std::max(slot * (bins.size() > 200 ? 1.0 : 0.8), 0.5);
  for (const auto& b : bins) {
    double y = top2 + ph;
    const double x = x_of(double(b.step)) - bar_w / 2;
    for (const auto& p : phase_table) {
      const double h = b.*p.field * px_per_ms;
      if (!(h > 0)) continue;
      y -= h;
      s += "<rect class=\"" + std::string(p.name) + "\" data-step=\"" + std::to_string(b.step) +
           "\" x=\"" + fmt_num(x, "%.3f") + "\" y=\"" + fmt_num(y, "%.4f") + "\" width=\"" +
           fmt_num(bar_w, "%.3f") + "\" height=\"" + fmt_num(h, "%.6g") + "\" fill=\"" +
           detail::svg_color(p.argb) + "\"/>\n";
    }
  }
  s += "</g>\n";
  x_axis(top2 + ph, "step");
  // Legend with each phase's share of all charted time, top phase first as in the bars' stack.
  s += "<text x=\"" + fmt_num(lx) + "\" y=\"" + fmt_num(top2 - 6) +
       "\" fill=\"#444\">share of charted time</text>\n";
  double ly = top2 + 8;
  for (std::size_t k = phase_table.size(); k-- > 0;) {
    const auto& p = phase_table[k];
    s += "<rect x=\"" + fmt_num(lx) + "\" y=\"" + fmt_num(ly) +
         "\" width=\"12\" height=\"12\" fill=\"" + detail::svg_color(p.argb) + "\"/>";
    s += "<text x=\"" + fmt_num(lx + 18) + "\" y=\"" + fmt_num(ly + 10) + "\">" + p.name + " " +
         fmt_num(total > 0 ? 100 * totals[k] / total : 0, "%.1f") + "%</text>\n";
    ly += 20;
  }
  s += "</svg>\n";
  return s;
}

/// Writes the chart to `path` (created or replaced).
inline void write_chart_svg(const std::filesystem::path& path, std::span<const step_metrics> steps,
                            const chart_options& opt = {}) {
  if (path.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
  }
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw io_error("cannot write chart " + path.string());
  out << render_chart_svg(steps, opt);
  out.flush();
  if (!out) throw io_error("cannot write chart " + path.string());
}

}  // namespace trainkit
