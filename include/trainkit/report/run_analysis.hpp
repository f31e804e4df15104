// trainkit/report/run_analysis.hpp — explains a run from any log: where the time went, the honest
// MFU, the floor, and what would change the verdict.
//
// From a run_log (read_run_log.hpp) and what the log does not say (log_report_config: the model's
// shape, tokens per step, the device), it computes:
//   - the FLOPs per step by trainkit's count, 6·N + 12·L·C·T per token (docs/architecture.md,
//     N without the position embedding), and the floor: the step time at 100% of the device's
//     dense bf16 peak (core/device_info.hpp);
//   - the summary trainkit prints for its own runs (median, p95, warm-up, throughput, MFU, time
//     shares), over steps rebuilt from the log, so `format_summary` and the SVG chart say the
//     same words for any source. A log does not split steps into phases: the cost of evaluations
//     and checkpoint saves becomes their phases, the rest of a step is shown as compute;
//   - the warm-up (leading steps slower than the median: compilation, autotuning), spikes and the
//     evaluations and saves that coincide with them, each save's cost (the log's own figure, or
//     its step's excess over the median) and their share of the wall time;
//   - the log's own MFU beside the honest one, with the formula and the peak that reproduce it
//     (nanoGPT: trainkit's count against an A100's 312 TFLOP/s on every device);
//   - a verdict with what would change it.
// Errors name config fields (`log_report_config.seq`); programs map them to their flags.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/core/device_info.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/model/gpt2/config.hpp"
#include "trainkit/model/llama/config.hpp"
#include "trainkit/report/run_log.hpp"
#include "trainkit/trainer/report.hpp"

namespace trainkit::report {

/// What a log does not say about its run. Zero/empty fields are taken from the log where it
/// states them; what neither gives is an error naming the field.
struct log_report_config {
  std::string model{};                // a preset of `arch` (d2 ... d48): N, L and C
  std::string arch = "gpt2";          // the family of `model`: "gpt2" or "llama"
  std::uint64_t params = 0;           // N, dense parameters without the embeddings
  std::uint64_t active_params = 0;    // mixture of experts: N active per token (replaces N)
  int layers = 0;                     // L
  int width = 0;                      // C
  int seq = 0;                        // T, tokens per sequence
  std::uint64_t tokens_per_step = 0;  // tokens one optimizer step processes, all devices
  int devices = 0;                    // devices the run used; 0 = as the log says, else 1
  std::string device{};               // a name of the peak table (core/device_info.hpp)
  double peak_tflops = 0;             // the device's dense bf16 peak; overrides `device`
  verdict_thresholds thresholds{};
};

/// An evaluation or checkpoint save with what it cost.
struct event_cost {
  enum class where_t {
    costed,     // `ms` is its cost
    in_save,    // inside the cost of the checkpoint save at the same step (nanoGPT)
    in_warmup,  // inside the warm-up steps' excess
    untimed     // in no step time of the log (llm.c)
  };
  log_event event;
  double ms = NAN;
  where_t where = where_t::untimed;
  bool stated = false;     // the log printed its duration
  bool with_eval = false;  // a save whose cost includes the evaluation at the same step
};

/// A step line well above the median, and what coincides with it.
struct log_spike {
  std::uint64_t step = 0;
  std::uint64_t covers = 1;  // steps the line covers (it ends at `step`)
  double dt_ms = 0;          // the line's time per step
  double excess_ms = 0;      // above the median, over the steps the line covers
  std::string what;          // "evaluation + checkpoint save", or that the log mentions nothing
};

/// The explanation of one run.
struct run_analysis {
  log_format format = log_format::trainkit;
  std::string source;
  std::size_t step_lines = 0;
  std::uint64_t first_step = 0, last_step = 0;
  // The log starts where the run did: its first step line is step 0 or 1 (timed, or read but left
  // untimed: torchtitan without "Training starts"), or times steps 2.. from such a line. Else an
  // excerpt.
  bool from_start = true;
  std::uint64_t unprinted_steps = 0;  // steps in the span no line times (nanoGPT's log_interval)
  bool per_line = false;  // `steps` has one row per line, not per step (a span too long to hold)
  std::size_t skipped_lines = 0;
  bool compiled = false;        // the log says the model was compiled
  std::string log_device;       // the device the log names, if any
  std::size_t repeats = 0;      // step lines other ranks printed again, read once
  std::size_t other_ranks = 0;  // lines of other ranks' tags left out
  int rank = -1;                // the rank whose lines were read

  // The FLOP count and the device.
  double params = 0;       // N (the active parameters of a mixture of experts)
  bool active = false;     // `params` are active parameters (--active-params)
  std::string model_name;  // "GPT-2 d48", "Llama d12", or empty for a given shape
  int layers = 0, width = 0, seq = 0;
  double flops_per_token = 0;   // 6·N + 12·L·C·T
  double tokens_per_step = 0;   // per device
  bool tokens_derived = false;  // from the log's tokens/s × step time
  int devices = 1;
  std::string devices_from;      // "given", "llm.c's num_processes", "assumed: ..."
  bool devices_assumed = false;  // neither the caller nor the log said
  std::string tokens_from;       // where tokens per step came from
  double flops_per_step = 0;     // per device
  double peak_tflops = 0;
  std::string peak_source;  // "H200" or "given"
  double floor_ms = 0;      // flops_per_step at 100% of the peak
  double mfu_median = 0;    // at the median step
  bool refused = false;     // the MFU would exceed 100%: inconsistent inputs, no verdict
  std::string refusal;      // which input, and what value would make it consistent
  std::string attention;    // the attention engine (trainkit's run header)

  run_summary summary;              // trainkit's words over `steps`
  std::vector<step_metrics> steps;  // one per step the log timed, phases rebuilt: chart input

  std::size_t warmup_lines = 0;
  double warmup_ms = 0;            // their time above the median
  bool warmup_has_events = false;  // an evaluation or save shares the warm-up steps
  std::vector<log_spike> spikes;
  std::vector<event_cost> saves, evals;
  double save_ms_total = 0, eval_ms_total = 0;  // of the costed ones
  double save_ms_each = NAN;                    // median cost of a costed save
  std::size_t untimed_saves = 0, untimed_evals = 0;
  double wall_ms = 0;              // timed lines plus unprinted steps at the median
  double memory_gib = NAN;         // the largest peak device memory the log printed (torchtitan)
  std::vector<event_cost> pauses;  // garbage collection, profiler dumps (as the log states)
  double pause_ms_total = 0;
  std::uint64_t save_interval = 0;  // steps between saves, where two saves are seen
  double save_run_share = NAN;      // a save's cost over its interval's time: share of a run
  // Time gaps between timestamped step lines (formats that time steps themselves).
  std::size_t gaps_steady = 0;    // gaps that match the steps between at the steady rate
  std::vector<log_spike> stalls;  // gaps that do not: time outside every step's measurement

  // The log's own MFU and what reproduces it.
  double log_mfu = NAN;              // median of the printed figures over steady steps
  double log_peak_tflops = NAN;      // the peak that reproduces them with the log's formula
  double log_flops_per_token = NAN;  // the log's count
  std::string log_formula;           // how the log counts FLOPs

  bottleneck verdict = bottleneck::unknown;
  std::string evidence;
};

namespace detail {

using trainkit::detail::format;

inline double median(std::vector<double> v) {
  return trainkit::detail::percentile(std::move(v), 0.5);
}

/// The table entry whose bf16 peak is `tflops` (within 1.5%), e.g. "A100"; empty when none.
inline std::string peak_owner(double tflops) {
  for (const auto& e : device_peak_table)
    if (e.match != "cpu" && std::fabs(e.bf16_tflops - tflops) <= 0.015 * e.bf16_tflops)
      return std::string(e.name);
  return {};
}

inline std::string thousands(double v) {
  const std::string digits = format("%.0f", v);
  const std::size_t sign = !digits.empty() && digits[0] == '-';
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > sign && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace detail

namespace detail {

/// `text` with the summary's "MFU unknown (device not in the peak table ...)" replaced: a refused
/// analysis knows the device; it states no MFU because the inputs do not add up.
inline std::string unstated_mfu(std::string text) {
  constexpr std::string_view unknown =
      "MFU unknown (device not in the peak table; give its peak: summary_context.peak_tflops)";
  if (const auto at = text.find(unknown); at != std::string::npos)
    text.replace(at, unknown.size(), "MFU not stated: the inputs do not add up (see the verdict)");
  return text;
}

/// What a refused analysis says: the MFU the inputs imply, and for each input the value that
/// would bring it to 100% at most (a real run sits well below), the assumed ones first.
inline std::string refusal_text(const run_analysis& a, const log_report_config& cfg) {
  const double x = a.mfu_median;  // > 1
  std::string s = format(
      "no measurement and no verdict: these inputs put the median step at %.0f%% of the "
      "device's %.4g TFLOP/s peak (%s), and no device runs above 100%%, so one of them is "
      "inconsistent with the log: ",
      100 * x, a.peak_tflops, a.peak_source.c_str());
  std::vector<std::string> fixes;
  const std::string dev =
      format("the device count %d (%s) would have to be at least %s", a.devices,
             a.devices_assumed ? "assumed: the log does not say; give log_report_config.devices"
                               : a.devices_from.c_str(),
             std::isfinite(x) && a.devices * x < 1e9
                 ? format("%.0f", std::ceil(a.devices * x - 1e-9)).c_str()
                 : "a billion (a step time of zero?)");
  const std::string tok = format("the tokens per step %s (%s) at most %s",
                                 thousands(a.tokens_per_step * a.devices).c_str(),
                                 a.tokens_from.empty() ? "given" : a.tokens_from.c_str(),
                                 thousands(std::floor(a.tokens_per_step * a.devices / x)).c_str());
  const std::string model = format(
      "the model's %.4g FLOPs per token (%s) at most %.4g (a model %.2fx smaller, or "
      "log_report_config.active_params for a mixture of experts)",
      a.flops_per_token,
      !a.model_name.empty()
          ? a.model_name.c_str()
          : format("N %s, L %d, C %d, T %d", thousands(a.params).c_str(), a.layers, a.width, a.seq)
                .c_str(),
      a.flops_per_token / x, x);
  const std::string peak = format("the device (peak %.4g TFLOP/s) one of at least %.4g TFLOP/s",
                                  a.peak_tflops, a.peak_tflops * x);
  if (a.devices_assumed) {
    fixes = {dev, tok, model, peak};
  } else if (a.tokens_from == "given" || cfg.tokens_per_step > 0) {
    fixes = {tok, dev, model, peak};
  } else {
    fixes = {dev, tok, model, peak};
  }
  for (std::size_t i = 0; i < fixes.size(); ++i) s += (i == 0 ? "" : "; or ") + fixes[i];
  return s;
}

}  // namespace detail

/// Runs spanning more steps than this are summarised one row per log line, not per step.
inline constexpr std::uint64_t max_rebuilt_steps = 200'000;

/// The word a log uses for a step ("iter" for nanoGPT).
inline const char* step_word(log_format f) noexcept {
  return f == log_format::nanogpt ? "iter" : "step";
}

/// Explains `run`. Throws config_error naming every field of `cfg` that is needed and that
/// neither `cfg` nor the log gives.
inline run_analysis analyze_run(const run_log& run, const log_report_config& cfg) {
  using detail::format;
  run_analysis a;
  a.format = run.format;
  a.source = run.source;
  a.step_lines = run.steps.size();
  a.skipped_lines = run.skipped;
  a.compiled = run.facts.compiled;
  a.log_device = run.facts.device;
  a.repeats = run.repeats;
  a.other_ranks = run.other_ranks;
  a.rank = run.rank;
  if (run.steps.empty()) throw format_error(run.source + ": no step lines");
  a.first_step = run.steps.front().m.step;
  a.from_start = a.first_step <= 1 || (run.untimed_first_step && *run.untimed_first_step <= 1) ||
                 (run.steps.front().covers > 1 && a.first_step + 1 - run.steps.front().covers <= 2);
  a.last_step = run.steps.back().m.step;
  const auto& facts = run.facts;

  // ---- what the log does not say: the caller's fields first, then the log's ----------------
  std::vector<std::string> missing;
  a.seq = cfg.seq > 0 ? cfg.seq : facts.seq;
  if (cfg.seq < 0) throw config_error("log_report_config.seq must be positive");
  if (cfg.arch != "gpt2" && cfg.arch != "llama")
    throw config_error("log_report_config.arch: unknown family '" + cfg.arch +
                       "' (valid: gpt2, llama)");
  if (!cfg.model.empty() && cfg.arch == "llama") {
    model::llama_config g;
    try {
      g = model::llama_config::preset(cfg.model);
    } catch (const config_error& e) {
      throw config_error(std::string("log_report_config.model: ") + e.what());
    }
    a.layers = g.num_layers;
    a.width = g.channels;
    // llama_config::flops_per_token: N without the input embedding of an untied model.
    a.params = double(g.num_parameters()) -
               (g.tied_embeddings ? 0.0 : double(g.padded_vocab_size) * g.channels);
    a.model_name = "Llama " + cfg.model;
  } else if (!cfg.model.empty()) {
    model::gpt2_config g;
    try {
      g = model::gpt2_config::preset(cfg.model);
    } catch (const config_error& e) {
      throw config_error(std::string("log_report_config.model: ") + e.what());
    }
    a.layers = g.num_layers;
    a.width = g.channels;
    a.params = double(g.num_parameters()) - double(g.max_seq_len) * g.channels;
    a.model_name = "GPT-2 " + cfg.model;
  } else {
    a.layers = cfg.layers > 0 ? cfg.layers : facts.layers;
    a.width = cfg.width > 0 ? cfg.width : facts.width;
    if (cfg.params > 0 || cfg.active_params > 0) {
      a.params = double(cfg.active_params > 0 ? cfg.active_params : cfg.params);
      a.active = cfg.active_params > 0;
    } else if (facts.parameters > 0 && facts.parameters_exclude_wpe) {
      a.params = double(facts.parameters);
    } else if (facts.parameters > 0 && a.width > 0 && (facts.max_seq > 0 || a.seq > 0)) {
      // llm.c counts the position embedding (maxT rows of C) in num_parameters.
      a.params = double(facts.parameters) -
                 double(facts.max_seq > 0 ? facts.max_seq : a.seq) * double(a.width);
    }
    if (!(a.params > 0)) missing.push_back("log_report_config.params");
    if (a.layers <= 0) missing.push_back("log_report_config.layers");
    if (a.width <= 0) missing.push_back("log_report_config.width");
    if (!missing.empty())
      missing.insert(missing.begin(), "log_report_config.model (or params, layers and width)");
    if (missing.size() > 1) missing.erase(missing.begin() + 1, missing.end());
  }
  if (a.seq <= 0) missing.push_back("log_report_config.seq");
  if (cfg.devices < 0) throw config_error("log_report_config.devices must be positive");
  // Tokens the log's own rate implies per step: tokens/s × step time (torchtitan: per device;
  // llm.c and build-nanogpt: all processes).
  double rate_tokens = NAN;
  {
    std::vector<double> t;
    for (const auto& s : run.steps)
      if (std::isfinite(s.log_tok_per_s) && s.log_tok_per_s > 0 && s.m.dt_ms > 0)
        t.push_back(s.log_tok_per_s * s.m.dt_ms / 1e3);
    if (!t.empty()) rate_tokens = detail::median(t);
  }
  const bool rate_per_device = run.format == log_format::torchtitan;
  if (cfg.devices > 0) {
    a.devices = cfg.devices;
    a.devices_from = "given";
  } else if (facts.devices > 0) {
    a.devices = facts.devices;
    a.devices_from = facts.devices_from.empty() ? "as the log states" : facts.devices_from;
  } else if (facts.rank_tags > 1) {
    a.devices = facts.rank_tags;
    a.devices_from = "the log's lines carry " + std::to_string(facts.rank_tags) + " rank tags";
  } else if (rate_per_device && std::isfinite(rate_tokens) && facts.tokens_per_step > 0 &&
             double(facts.tokens_per_step) / rate_tokens >= 1.5 &&
             double(facts.tokens_per_step) / rate_tokens < 1e6) {
    // torchtitan: a step's global tokens over one device's share (tps × step time)
    a.devices = int(std::lround(double(facts.tokens_per_step) / rate_tokens));
    a.devices_from = "global batch tokens / tps per device";
  } else {
    a.devices = 1;
    a.devices_assumed = true;
    a.devices_from = "assumed: the log does not say";
  }
  if (cfg.tokens_per_step > 0) {
    a.tokens_per_step = double(cfg.tokens_per_step) / a.devices;
    a.tokens_from = "given";
  } else if (rate_per_device && std::isfinite(rate_tokens)) {
    // tps is per device and covers the training time of the interval: tokens = tps × time.
    a.tokens_per_step = rate_tokens;
    a.tokens_derived = true;
    a.tokens_from = "tps per device x step time";
  } else if (facts.tokens_per_step > 0) {
    a.tokens_per_step = double(facts.tokens_per_step) / a.devices;
    a.tokens_from = "as the log states";
  } else if (std::isfinite(rate_tokens)) {
    a.tokens_per_step = std::round(rate_tokens) / a.devices;  // tok/s of all processes
    a.tokens_derived = true;
    a.tokens_from = "tok/s x step time";
  }
  if (!(a.tokens_per_step > 0)) missing.push_back("log_report_config.tokens_per_step");
  if (cfg.peak_tflops < 0) throw config_error("log_report_config.peak_tflops must be positive");
  if (cfg.peak_tflops > 0) {
    a.peak_tflops = cfg.peak_tflops;
    a.peak_source = "given";
  } else {
    const std::string& name = !cfg.device.empty() ? cfg.device : facts.device;
    // llm.c's CPU trainer names no CPU: the table's "cpu" row is trainkit's own reference
    // machine, not the poster's (an M3 Max read 72% of it), so a CPU log's peak must be given.
    const bool unnamed_cpu = cfg.device.empty() && facts.device == "cpu";
    if (!name.empty() && !unnamed_cpu) {
      if (const auto p = peak_tflops(name, compute_dtype::bf16)) {
        a.peak_tflops = *p;
        a.peak_source = name;
      } else if (!cfg.device.empty()) {
        throw config_error("log_report_config.device: '" + cfg.device +
                           "' is not in the peak table (core/device_info.hpp); give "
                           "log_report_config.peak_tflops instead");
      }
    }
    if (unnamed_cpu)
      missing.push_back(
          "log_report_config.peak_tflops (it ran on a CPU and names none; the peak of that CPU)");
    else if (!(a.peak_tflops > 0))
      missing.push_back("log_report_config.device (or log_report_config.peak_tflops)");
  }
  if (!missing.empty()) {
    std::string fields;
    for (const auto& m : missing) fields += (fields.empty() ? "" : ", ") + m;
    throw config_error(fields + ": the " + log_format_title(run.format) + " " + run.source +
                       " does not state " + (missing.size() > 1 ? "them" : "it") + "; give " +
                       (missing.size() > 1 ? "them" : "it"));
  }
  a.flops_per_token = 6.0 * a.params + 12.0 * a.layers * double(a.width) * a.seq;
  a.attention = facts.attention;
  a.flops_per_step = a.flops_per_token * a.tokens_per_step;
  a.floor_ms = a.flops_per_step / (a.peak_tflops * 1e12) * 1e3;

  // ---- steps rebuilt for the summary: one per step the log timed -----------------------------
  const verdict_thresholds& th = cfg.thresholds;
  const summary_context ctx{.peak_tflops = a.peak_tflops, .dtype = "bf16"};
  // One row per step while the run's span is small enough to hold (a run of 10B tokens at 1M per
  // step is ~10k steps); beyond, one row per line, its time the line's time per step.
  a.per_line = double(a.last_step - a.first_step) + double(run.steps.front().covers) >
               double(max_rebuilt_steps);
  // `fill_ms` > 0: the steps between lines that no line prints are added at that time.
  auto rebuild = [&](const std::vector<double>& ckpt_ms, const std::vector<double>& eval_ms,
                     double fill_ms) {
    std::vector<step_metrics> out;
    for (std::size_t i = 0; i < run.steps.size(); ++i) {
      const auto& s = run.steps[i];
      const double k = double(s.covers);
      if (i > 0 && fill_ms > 0 && !a.per_line) {
        const std::uint64_t from = run.steps[i - 1].m.step + 1, to = s.m.step - s.covers;
        for (std::uint64_t n = from; n <= to; ++n) {
          step_metrics m;
          m.step = n;
          m.loss = NAN;
          m.dt_ms = m.compute_ms = fill_ms;
          m.tokens = std::uint64_t(std::llround(a.tokens_per_step));
          m.tok_per_s = a.tokens_per_step / (fill_ms / 1e3);
          m.tflops = a.flops_per_step / (fill_ms / 1e3) / 1e12;
          m.mfu = m.tflops / a.peak_tflops;
          out.push_back(m);
        }
      }
      const std::uint64_t rows = a.per_line ? 1 : s.covers;
      for (std::uint64_t j = 0; j < rows; ++j) {
        step_metrics m = s.m;
        m.step = s.m.step - (rows - 1 - j);
        if (j + 1 < rows) m.val_loss = NAN;
        m.tokens = std::uint64_t(std::llround(a.tokens_per_step));
        m.tok_per_s = m.dt_ms > 0 ? a.tokens_per_step / (m.dt_ms / 1e3) : 0;
        m.tflops = m.dt_ms > 0 ? a.flops_per_step / (m.dt_ms / 1e3) / 1e12 : 0;
        m.mfu = m.tflops / a.peak_tflops;
        m.mfu_calibrated = NAN;
        for (const auto& p : phase_table) m.*p.field = 0;
        m.ckpt_stall_ms = std::min(m.dt_ms, ckpt_ms[i] / k);
        m.eval_ms = std::min(m.dt_ms - m.ckpt_stall_ms, eval_ms[i] / k);
        m.compute_ms = m.dt_ms - m.ckpt_stall_ms - m.eval_ms;
        out.push_back(m);
      }
    }
    return out;
  };
  const std::vector<double> zeros(run.steps.size(), 0.0);
  a.steps = rebuild(zeros, zeros, 0);
  const double med = summarize(a.steps, th, ctx).median_step_ms;

  // ---- warm-up, per-line excess, the cost of evaluations and saves ---------------------------
  std::vector<double> excess(run.steps.size());
  for (std::size_t i = 0; i < run.steps.size(); ++i)
    excess[i] = std::max(0.0, (run.steps[i].m.dt_ms - med) * double(run.steps[i].covers));
  // Leading slow lines are a warm-up only where the log starts at the run's start: the first
  // line of an excerpt (a log from step 10750 on) is an arbitrary step, often an evaluation's.
  while (a.from_start && a.warmup_lines + 1 < run.steps.size() &&
         a.warmup_lines < std::max<std::size_t>(1, run.steps.size() / 2) &&
         run.steps[a.warmup_lines].m.dt_ms > th.warmup_ratio * med) {
    a.warmup_ms += excess[a.warmup_lines];
    ++a.warmup_lines;
  }
  std::vector<std::vector<std::size_t>> at(run.steps.size());  // events timed in each line
  for (std::size_t e = 0; e < run.events.size(); ++e)
    if (run.events[e].timed_in < run.steps.size()) at[run.events[e].timed_in].push_back(e);
  auto kind_at = [&](std::size_t i, log_event::kind_t k) {
    return std::any_of(at[i].begin(), at[i].end(),
                       [&](std::size_t e) { return run.events[e].kind == k; });
  };
  // An evaluation's cost from the lines that evaluated and saved nothing (outside the warm-up).
  std::vector<double> eval_only;
  for (std::size_t i = a.warmup_lines; i < run.steps.size(); ++i)
    if (kind_at(i, log_event::kind_t::eval) && !kind_at(i, log_event::kind_t::checkpoint)) {
      double stated = 0;
      bool all_stated = true;
      for (std::size_t e : at[i]) {
        if (std::isfinite(run.events[e].ms))
          stated += run.events[e].ms;
        else
          all_stated = false;
      }
      eval_only.push_back(all_stated ? stated : excess[i]);
    }
  const double eval_estimate = eval_only.empty() ? NAN : detail::median(eval_only);

  std::vector<double> ckpt_ms(run.steps.size(), 0.0), eval_ms(run.steps.size(), 0.0);
  for (std::size_t i = 0; i < run.steps.size(); ++i) {
    if (i < a.warmup_lines) {  // the warm-up's excess is the warm-up's
      for (std::size_t e : at[i]) {
        event_cost c{run.events[e], NAN, event_cost::where_t::in_warmup};
        if (run.events[e].kind == log_event::kind_t::pause) {
          c.ms = run.events[e].ms;
          c.stated = std::isfinite(c.ms);
          a.pauses.push_back(c);
          continue;
        }
        (run.events[e].kind == log_event::kind_t::checkpoint ? a.saves : a.evals).push_back(c);
      }
      a.warmup_has_events = a.warmup_has_events || !at[i].empty();
      continue;
    }
    double remaining = excess[i];
    std::vector<std::size_t> unstated_saves, unstated_evals;
    for (std::size_t e : at[i]) {
      const auto& ev = run.events[e];
      if (ev.kind == log_event::kind_t::pause) {  // stated or not, never a save's or eval's
        a.pauses.push_back({ev, ev.ms, event_cost::where_t::costed, std::isfinite(ev.ms), false});
        if (std::isfinite(ev.ms)) remaining = std::max(0.0, remaining - ev.ms);
        continue;
      }
      if (std::isfinite(ev.ms)) {
        event_cost c{ev, ev.ms, event_cost::where_t::costed, true, false};
        (ev.kind == log_event::kind_t::checkpoint ? ckpt_ms : eval_ms)[i] += ev.ms;
        (ev.kind == log_event::kind_t::checkpoint ? a.saves : a.evals).push_back(c);
        if (run.format != log_format::trainkit) remaining = std::max(0.0, remaining - ev.ms);
      } else {
        (ev.kind == log_event::kind_t::checkpoint ? unstated_saves : unstated_evals).push_back(e);
      }
    }
    // Saves and evaluations the log gives no figure for share the line's excess; an
    // evaluation next to a save gets the typical evaluation's cost when one is known, else the
    // save's figure includes it.
    const bool eval_in_save =
        !unstated_evals.empty() && !unstated_saves.empty() && !std::isfinite(eval_estimate);
    if (!unstated_evals.empty()) {
      const double share = unstated_saves.empty() ? remaining
                           : eval_in_save         ? 0.0
                                                  : std::min(remaining, eval_estimate);
      for (std::size_t e : unstated_evals) {
        const double each = share / double(unstated_evals.size());
        a.evals.push_back(
            {run.events[e], eval_in_save ? NAN : each,
             eval_in_save ? event_cost::where_t::in_save : event_cost::where_t::costed});
        eval_ms[i] += each;
      }
      remaining -= share;
    }
    for (std::size_t e : unstated_saves) {
      const double each = remaining / double(unstated_saves.size());
      a.saves.push_back({run.events[e], each, event_cost::where_t::costed, false, eval_in_save});
      ckpt_ms[i] += each;
    }
  }
  for (const auto& ev : run.events) {
    if (ev.timed_in < run.steps.size()) continue;
    if (ev.kind == log_event::kind_t::pause) {
      a.pauses.push_back({ev, ev.ms, event_cost::where_t::untimed, std::isfinite(ev.ms), false});
      continue;
    }
    (ev.kind == log_event::kind_t::checkpoint ? a.saves : a.evals)
        .push_back({ev, NAN, event_cost::where_t::untimed});
    ++(ev.kind == log_event::kind_t::checkpoint ? a.untimed_saves : a.untimed_evals);
  }
  std::vector<double> save_costs;
  for (const auto& c : a.saves)
    if (std::isfinite(c.ms)) {
      a.save_ms_total += c.ms;
      save_costs.push_back(c.ms);
    }
  for (const auto& c : a.evals)
    if (std::isfinite(c.ms)) a.eval_ms_total += c.ms;
  if (!save_costs.empty()) a.save_ms_each = detail::median(save_costs);
  for (const auto& c : a.pauses)
    if (std::isfinite(c.ms)) a.pause_ms_total += c.ms;
  {  // the save interval, where two saves at different steps are seen
    std::vector<double> gaps;
    for (std::size_t k = 1; k < a.saves.size(); ++k)
      if (a.saves[k].event.step > a.saves[k - 1].event.step)
        gaps.push_back(double(a.saves[k].event.step - a.saves[k - 1].event.step));
    if (!gaps.empty()) a.save_interval = std::uint64_t(std::llround(detail::median(gaps)));
  }

  // ---- spikes ---------------------------------------------------------------------------------
  for (std::size_t i = a.warmup_lines; i < run.steps.size(); ++i) {
    if (!(excess[i] > (th.spike_ratio - 1) * med)) continue;
    const bool ev = kind_at(i, log_event::kind_t::eval);
    const bool ck = kind_at(i, log_event::kind_t::checkpoint);
    a.spikes.push_back({run.steps[i].m.step, run.steps[i].covers, run.steps[i].m.dt_ms, excess[i],
                        ev && ck ? "evaluation + checkpoint save"
                        : ck     ? "checkpoint save"
                        : ev     ? "evaluation"
                        : i == 0 && !a.from_start
                            ? "the first line of a log that starts mid-run: a warm-up if the run "
                              "(re)started here, else an evaluation or stall the excerpt does not "
                              "show"
                            : "nothing the log mentions coincides (input stall, garbage "
                              "collection, another process?)"});
  }

  // ---- wall time, the summary in trainkit's words --------------------------------------------
  std::uint64_t covered = 0;
  for (const auto& s : run.steps) {
    a.wall_ms += s.m.dt_ms * double(s.covers);
    covered += s.covers;
    if (std::isfinite(s.memory_gib) && !(s.memory_gib <= a.memory_gib)) a.memory_gib = s.memory_gib;
  }
  const std::uint64_t span = a.last_step - a.first_step + run.steps.front().covers;
  a.unprinted_steps = span > covered ? span - covered : 0;
  a.wall_ms += double(a.unprinted_steps) * med;
  a.steps = rebuild(ckpt_ms, eval_ms, med);
  a.summary = summarize(a.steps, th, ctx);
  a.mfu_median = a.flops_per_step / (med / 1e3) / (a.peak_tflops * 1e12);
  if (a.save_interval > 0 && std::isfinite(a.save_ms_each) && med > 0)
    a.save_run_share = a.save_ms_each / (double(a.save_interval) * med + a.save_ms_each);

  // ---- time gaps between timestamped step lines (the step times are the log's own) ---------
  if (run.format != log_format::torchtitan && run.format != log_format::trainkit) {
    for (std::size_t i = 1; i < run.steps.size(); ++i) {
      const auto& p = run.steps[i - 1];
      const auto& s = run.steps[i];
      if (!std::isfinite(p.stamp_ms) || !std::isfinite(s.stamp_ms) || s.m.step <= p.m.step)
        continue;
      // The steps after p up to s: the unprinted ones at the steady rate, s at its own time.
      const double expected = double(s.m.step - p.m.step - 1) * med + s.m.dt_ms;
      const double observed = s.stamp_ms - p.stamp_ms;
      // Second-resolution stamps: a gap within 1 s (+10%) of the expectation matches.
      if (observed <= expected * 1.1 + 1000.0) {
        ++a.gaps_steady;
      } else {
        a.stalls.push_back({s.m.step, s.m.step - p.m.step, observed, observed - expected,
                            "time between the step lines that no step's time includes"});
      }
    }
  }

  // ---- the log's own MFU ----------------------------------------------------------------------
  std::vector<double> printed, peaks, log_fpt;
  for (std::size_t i = a.warmup_lines; i < run.steps.size(); ++i) {
    const auto& s = run.steps[i];
    if (!(std::isfinite(s.log_mfu) && s.log_mfu > 0) || excess[i] > (th.spike_ratio - 1) * med)
      continue;
    printed.push_back(s.log_mfu);
    double fpt = NAN;
    switch (run.format) {
      case log_format::nanogpt:  // model.py estimate_mfu: 6·N + 12·L·H·Q·T, N without wpe
        fpt = a.flops_per_token;
        break;
      case log_format::llmc: {  // train_gpt2.cu gpt2_estimate_mfu: 6·N_all + 6·L·C·T
        const double wpe = double(facts.max_seq > 0 ? facts.max_seq : a.seq) * a.width;
        const double n_all = facts.parameters > 0 ? double(facts.parameters) : a.params + wpe;
        fpt = 6.0 * n_all + 6.0 * a.layers * double(a.width) * a.seq;
        break;
      }
      case log_format::torchtitan:
        if (std::isfinite(s.log_tflops) && s.log_tok_per_s > 0)
          fpt = s.log_tflops * 1e12 / s.log_tok_per_s;
        break;
      case log_format::trainkit:
        fpt = facts.flops_per_token > 0 ? facts.flops_per_token : a.flops_per_token;
        break;
      case log_format::build_nanogpt:
        break;  // prints no MFU
    }
    if (!std::isfinite(fpt)) continue;
    log_fpt.push_back(fpt);
    const double achieved = run.format == log_format::torchtitan
                                ? s.log_tflops * 1e12
                                : fpt * a.tokens_per_step / (s.m.dt_ms / 1e3);
    peaks.push_back(achieved / s.log_mfu / 1e12);
  }
  if (!printed.empty()) a.log_mfu = detail::median(printed);
  if (!peaks.empty()) a.log_peak_tflops = detail::median(peaks);
  if (!log_fpt.empty()) a.log_flops_per_token = detail::median(log_fpt);
  switch (run.format) {
    case log_format::nanogpt:
      a.log_formula =
          "6·N + 12·L·H·Q·T per token (model.py estimate_mfu; N without the position "
          "embedding, H·Q = C: trainkit's count)";
      break;
    case log_format::llmc:
      a.log_formula =
          "6·N + 6·L·C·T per token (train_gpt2.cu gpt2_estimate_mfu; N with the position "
          "embedding, attention halved for causality)";
      break;
    case log_format::torchtitan:
      a.log_formula =
          "tflops / tps = " + format("%.4g", a.log_flops_per_token) +
          " FLOPs per token (models/utils.py: 6·N + 12·L·H·Q·T, N without the embedding "
          "unless tied)";
      break;
    case log_format::trainkit:
      a.log_formula = "6·N + 12·L·C·T per token";
      break;
    case log_format::build_nanogpt:
      break;
  }

  // ---- the verdict ----------------------------------------------------------------------------
  const double wall = a.wall_ms > 0 ? a.wall_ms : 1;
  const bool saves_with_eval =
      std::any_of(a.saves.begin(), a.saves.end(), [](const auto& c) { return c.with_eval; });
  const std::string save_hint =
      std::isfinite(a.save_ms_each) && a.save_ms_total > 0
          ? format(
                "an asynchronous checkpoint would have saved %s~%.0f s per save, %.1f%% of "
                "wall time",
                saves_with_eval ? "up to " : "", a.save_ms_each / 1e3, 100 * a.save_ms_total / wall)
          : std::string();
  // In an excerpt (a log from step 2920 on) one save or one evaluation gives its cost but not
  // how often it comes: its share of the excerpt is no verdict on the run (a 4-step paste with
  // one evaluation read "eval-bound, 87%" for a run that evaluates every 250 steps).
  const bool excerpt = !a.from_start;
  const bool lone_save = excerpt && a.saves.size() - a.untimed_saves < 2 &&
                         a.save_ms_total / wall > th.checkpoint_share;
  const bool lone_eval =
      excerpt && a.evals.size() - a.untimed_evals < 2 && a.eval_ms_total / wall > th.eval_share;
  if (a.warmup_ms / wall > th.warmup_share) {
    a.verdict = bottleneck::warmup;
    a.evidence = format(
        "the first %zu step line(s) took %.1f s above the median: %.0f%% of the "
        "run's wall time; run longer before judging",
        a.warmup_lines, a.warmup_ms / 1e3, 100 * a.warmup_ms / wall);
  } else if (a.save_ms_total / wall > th.checkpoint_share && !lone_save) {
    a.verdict = bottleneck::checkpoint;
    a.evidence =
        format(
            "checkpoint saves took %.1f%% of the wall time (%zu saves, ~%.0f s "
            "each); ",
            100 * a.save_ms_total / wall, a.saves.size() - a.untimed_saves, a.save_ms_each / 1e3) +
        save_hint + ", or save less often";
  } else if (a.eval_ms_total / wall > th.eval_share && !lone_eval) {
    a.verdict = bottleneck::eval;
    a.evidence = format(
        "evaluation took %.1f%% of the wall time; evaluate less often or on "
        "fewer batches",
        100 * a.eval_ms_total / wall);
  } else if (a.mfu_median >= th.compute_mfu) {
    a.verdict = bottleneck::compute;
    a.evidence = format(
        "at %.1f%% MFU (the median step against the %.4g TFLOP/s peak): faster "
        "kernels, not more data workers",
        100 * a.mfu_median, a.peak_tflops);
    if (!save_hint.empty()) a.evidence += "; " + save_hint;
  } else {
    a.verdict = bottleneck::unknown;
    a.evidence = format(
        "at %.1f%% MFU most of a step is not model FLOPs, and the log does not "
        "say where it goes (input, host, communication): profile a step",
        100 * a.mfu_median);
    if (!save_hint.empty()) a.evidence += "; " + save_hint;
  }
  if (lone_save || lone_eval)
    a.evidence += format(
        "; this excerpt's one %s took %.0f s, %.1f%% of its wall time, but one is not an "
        "interval: its share of the whole run needs a longer log",
        lone_save ? "checkpoint save" : "evaluation",
        (lone_save ? a.save_ms_total : a.eval_ms_total) / 1e3,
        100 * (lone_save ? a.save_ms_total : a.eval_ms_total) / wall);
  if (a.untimed_saves + a.untimed_evals > 0)
    a.evidence += format(
        "; %zu checkpoint save(s) and %zu evaluation(s) are in no step time "
        "of this log, so their cost is not known",
        a.untimed_saves, a.untimed_evals);
  if (a.mfu_median > 1.0) {
    // Nothing runs above its peak: some input is wrong. No measurement, no verdict.
    a.refused = true;
    a.refusal = detail::refusal_text(a, cfg);
    a.verdict = bottleneck::unknown;
    a.evidence = a.refusal;
    for (auto& m : a.steps) m.mfu = NAN;
    a.summary = summarize(a.steps, th, {});
  }
  a.summary.verdict = a.verdict;
  a.summary.evidence = a.evidence;
  return a;
}

/// The report for a run read from a log: the header, trainkit's summary, the analysis, the
/// verdict.
inline std::string format_run_analysis(const run_analysis& a) {
  using detail::format;
  const char* w = step_word(a.format);
  std::string s;
  s += format("log: %s (%s): %zu timed step lines, %s %llu to %llu", a.source.c_str(),
              log_format_title(a.format), a.step_lines, w, (unsigned long long)a.first_step,
              (unsigned long long)a.last_step);
  if (a.unprinted_steps > 0)
    s += format(" (%llu steps not printed, taken at the median)",
                (unsigned long long)a.unprinted_steps);
  if (a.skipped_lines > 0) s += format(", %zu other lines skipped", a.skipped_lines);
  if (a.repeats > 0) s += format(", %zu step lines repeated by other ranks read once", a.repeats);
  if (a.other_ranks > 0)
    s += format(", %zu lines of ranks other than rank %d left out", a.other_ranks, a.rank);
  if (a.per_line) s += "; summarised one row per line";
  s += "\n";
  if (!a.from_start)
    s += format("window: an excerpt from %s %llu on; shares below are of this window\n", w,
                (unsigned long long)a.first_step);
  s += format(
      "model: %s6·N + 12·L·C·T = %.4g FLOPs per token (N %s%s, L %d, C %d, T %d) x %s "
      "tokens per step%s%s = %.4g FLOPs per step%s\n",
      a.model_name.empty() ? "" : (a.model_name + ": ").c_str(), a.flops_per_token,
      detail::thousands(a.params).c_str(), a.active ? " active" : "", a.layers, a.width, a.seq,
      detail::thousands(a.tokens_per_step).c_str(),
      a.devices > 1 ? format(" on each of %d devices", a.devices).c_str() : "",
      a.tokens_derived ? format(" (%s)", a.tokens_from.c_str()).c_str() : "", a.flops_per_step,
      a.devices > 1 ? " per device" : "");
  s += format("devices: %d (%s); MFU is per device: one device's FLOP/s over its dense peak\n",
              a.devices,
              a.devices_assumed ? "assumed: the log does not say how many; give the count if it "
                                  "used more"
                                : a.devices_from.c_str());
  if (!a.attention.empty()) s += "attention: " + a.attention + "\n";
  {
    std::string body = format_summary_body(a.summary);
    if (a.refused) body = detail::unstated_mfu(std::move(body));
    s += body;
  }
  s += "phases: the log does not split a step; time outside evaluations and checkpoint saves "
       "shows as compute\n";
  if (a.refused) {
    s += format(
        "floor: not stated: at 100%% of the %.4g TFLOP/s peak (%s) a step would take %.2f s, "
        "but the median step took %.2f s\n",
        a.peak_tflops, a.peak_source.c_str(), a.floor_ms / 1e3, a.summary.median_step_ms / 1e3);
  } else {
    s += format(
        "floor: %.2f s per step at 100%% of the dense bf16 peak %.4g TFLOP/s (%s); the "
        "median step, %.2f s, is %.2fx the floor: MFU %.1f%%\n",
        a.floor_ms / 1e3, a.peak_tflops, a.peak_source.c_str(), a.summary.median_step_ms / 1e3,
        a.summary.median_step_ms / a.floor_ms, 100 * a.mfu_median);
  }
  if (a.warmup_lines > 0) {
    s += format("warm-up: %s %llu", w, (unsigned long long)a.first_step);
    if (a.warmup_lines > 1)
      s += format(" to %llu", (unsigned long long)(a.first_step + a.warmup_lines - 1));
    s += format(" took %.1f s above the median", a.warmup_ms / 1e3);
    s += a.compiled ? " (the log says the model was compiled: torch.compile's first steps"
         : a.format == log_format::llmc ? " (first-use costs: cuBLAS/cuDNN set-up, autotuning"
                                        : " (compilation and first-use costs";
    if (a.warmup_has_events) s += "; an evaluation or save at those steps is included";
    s += ")\n";
  }
  for (std::size_t i = 0; i < a.spikes.size() && i < 10; ++i) {
    const auto& p = a.spikes[i];
    if (p.covers > 1)
      s += format("spike: %ss %llu to %llu took %.2f s each, %.1f s above the median in all: %s\n",
                  w, (unsigned long long)(p.step - p.covers + 1), (unsigned long long)p.step,
                  p.dt_ms / 1e3, p.excess_ms / 1e3, p.what.c_str());
    else
      s += format("spike: %s %llu took %.1f s, %.1f s above the median: %s\n", w,
                  (unsigned long long)p.step, p.dt_ms / 1e3, p.excess_ms / 1e3, p.what.c_str());
  }
  if (a.spikes.size() > 10) s += format("spike: %zu more\n", a.spikes.size() - 10);
  auto list_events = [&](const std::vector<event_cost>& v, const char* name, double total) {
    if (v.empty()) return;
    std::string steps;
    bool with_eval = false, stated = false;
    std::size_t in_save = 0, in_warmup = 0, untimed = 0;
    std::vector<double> costs;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i < 8) steps += (i ? ", " : "") + std::to_string(v[i].event.step);
      with_eval = with_eval || v[i].with_eval;
      stated = stated || v[i].stated;
      switch (v[i].where) {
        case event_cost::where_t::costed:
          costs.push_back(v[i].ms);
          break;
        case event_cost::where_t::in_save:
          ++in_save;
          break;
        case event_cost::where_t::in_warmup:
          ++in_warmup;
          break;
        case event_cost::where_t::untimed:
          ++untimed;
          break;
      }
    }
    if (v.size() > 8) steps += ", ...";
    s += format("%s: %zu (%s %s)", name, v.size(), w, steps.c_str());
    if (!costs.empty())
      s += format(", ~%.1f s each%s%s, %.1f s in all = %.1f%% of wall time",
                  detail::median(costs) / 1e3, stated ? " (as the log states)" : "",
                  with_eval ? " (with the evaluation at the same step: the log cannot separate "
                              "them)"
                            : "",
                  total / 1e3, 100 * total / (a.wall_ms > 0 ? a.wall_ms : 1));
    if (in_save > 0)
      s += format("; %zu inside the checkpoint save's figure at the same step", in_save);
    if (in_warmup > 0) s += format("; %zu inside the warm-up", in_warmup);
    if (untimed > 0)
      s += format("; %zu in no step time of the log%s", untimed,
                  a.format == log_format::llmc ? " (llm.c times the training section alone)" : "");
    s += "\n";
  };
  if (std::isfinite(a.memory_gib))
    s += format("memory: %.2f GiB reserved at most (as the log states)\n", a.memory_gib);
  list_events(a.saves, "checkpoint saves", a.save_ms_total);
  if (std::isfinite(a.save_run_share))
    s += format("checkpoint saves in a whole run: a save every %llu %ss costs ~%.1f%% of the run\n",
                (unsigned long long)a.save_interval, w, 100 * a.save_run_share);
  list_events(a.evals, "evaluations", a.eval_ms_total);
  if (!a.pauses.empty()) {
    std::size_t gc = 0, prof = 0;
    for (const auto& c : a.pauses) (c.event.what == "garbage collection" ? gc : prof) += 1;
    s += format(
        "pauses: %zu garbage collection(s), %zu profiler dump(s), %.2f s in all as the "
        "log states = %.2f%% of wall time\n",
        gc, prof, a.pause_ms_total / 1e3, 100 * a.pause_ms_total / (a.wall_ms > 0 ? a.wall_ms : 1));
  }
  if (a.gaps_steady + a.stalls.size() > 0) {
    s += format(
        "time gaps: %zu between timestamped step lines match the steps between them at "
        "the steady rate (unprinted steps, or pieces of a run joined), %zu do not",
        a.gaps_steady, a.stalls.size());
    double stall_ms = 0;
    for (const auto& p : a.stalls) stall_ms += p.excess_ms;
    if (!a.stalls.empty())
      s += format(
          ": %.1f s outside every step's time (a stall, or work the log's step timer "
          "does not cover), the largest before %s %llu",
          stall_ms / 1e3, w,
          (unsigned long long)
              std::max_element(a.stalls.begin(), a.stalls.end(), [](const auto& x, const auto& y) {
                return x.excess_ms < y.excess_ms;
              })->step);
    s += "\n";
  }
  if (std::isfinite(a.log_mfu) && !std::isfinite(a.log_flops_per_token)) {
    // torchtitan's 2024 lines print mfu and wps but no tflops: count and peak stay together.
    s += format(
        "the log's own MFU: %.1f%% (it prints no FLOP/s, so its FLOP count and its peak cannot "
        "be told apart)",
        100 * a.log_mfu);
    if (a.refused)
      s += "; trainkit's count gives no figure (see the verdict)\n";
    else
      s += format("; trainkit's count against the %.4g TFLOP/s peak gives %.1f%%\n", a.peak_tflops,
                  100 * a.mfu_median);
  } else if (std::isfinite(a.log_mfu)) {
    s += format("the log's own MFU: %.1f%%, its FLOPs %s", 100 * a.log_mfu, a.log_formula.c_str());
    if (std::isfinite(a.log_peak_tflops) && a.refused) {
      s += format(
          " (with these inputs its figure implies a %.4g TFLOP/s peak: another sign that an "
          "input is off)",
          a.log_peak_tflops);
    } else if (std::isfinite(a.log_peak_tflops)) {
      // The device the log names when its table peak is the one reproduced, else the table's.
      const auto named =
          a.log_device.empty() ? std::nullopt : peak_tflops(a.log_device, compute_dtype::bf16);
      const std::string owner = named && std::fabs(*named - a.log_peak_tflops) <= 0.015 * *named
                                    ? a.log_device
                                    : detail::peak_owner(a.log_peak_tflops);
      s += format(" against %.4g TFLOP/s", a.log_peak_tflops);
      if (!owner.empty()) s += format(" (the %s's dense bf16 peak)", owner.c_str());
      if (a.format == log_format::nanogpt) s += ", nanoGPT's constant for every device";
    }
    if (a.refused)
      s += "; trainkit's count gives no figure (see the verdict)\n";
    else
      s += format("; trainkit's count against the %.4g TFLOP/s peak gives %.1f%%\n", a.peak_tflops,
                  100 * a.mfu_median);
  } else if (a.format != log_format::trainkit) {
    s += "the log's own MFU: not printed";
    if (a.format == log_format::llmc)
      s += " (llm.c prints -100% when its table, llmc/mfu.h, lacks the device)";
    s += "\n";
  }
  if (a.refused)
    s += "verdict: none — " + a.evidence + "\n";
  else
    s += format("verdict: %s — %s\n", bottleneck_name(a.verdict), a.evidence.c_str());
  return s;
}

}  // namespace trainkit::report
