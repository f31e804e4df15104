// commands/report.hpp — `gpt_fineweb report LOG`: the end-of-run report of any training run,
// trainkit's own metrics file or the console log of nanoGPT, llm.c or torchtitan.
//
// A trainkit metrics file gets exactly the report it always got (phases from the file; a crashed
// run's cut-off line skipped with a warning; the HellaSwag scores of that run beside it,
// hellaswag.hpp; with --svg the chart of loss and phases per step). Another program's log goes
// through trainkit::report: its reader (sniffed with `--from auto`), then run_analysis with what
// the log does not say given by flags (--arch/--model or --params/--layers/--width, or
// --active-params for a mixture of experts, --seq, --tokens-per-step, --gpus, --device or
// --peak-tflops). MFU is per device; where the inputs would put it above 100% the report gives no
// figure and no verdict but names the inconsistent input (device count, tokens per step, model
// size) and the value that would make it consistent, for trainkit's own files too (their run
// header, trainer/metrics.hpp, states the ranks; older files take --gpus). The library names config
// fields
// (`log_report_config.seq`); report_flag_names maps them to the flags, so a missing fact is one
// line naming the flag and exit code 2 (command.hpp's error path).
#pragma once

#include <CLI/CLI.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

#include <trainkit/core/device_info.hpp>
#include <trainkit/core/error.hpp>
#include <trainkit/report/chart.hpp>
#include <trainkit/report/metrics_reader.hpp>
#include <trainkit/report/read_run_log.hpp>
#include <trainkit/report/run_analysis.hpp>
#include <trainkit/trainer/report.hpp>

#include "../command.hpp"
#include "../flag_names.hpp"
#include "../hellaswag.hpp"

namespace gpt_fineweb {

struct report_options {
  std::string log;            // LOG: a metrics JSONL or another program's console log
  std::string from = "auto";  // trainkit | nanogpt | llmc | torchtitan | auto
  std::string model;          // a preset of `arch`
  std::string arch = "gpt2";  // gpt2 | llama
  std::uint64_t params = 0;
  std::uint64_t active_params = 0;
  int gpus = 0;
  int layers = 0;
  int width = 0;
  int seq = 0;
  std::uint64_t tokens_per_step = 0;
  std::string device;
  double peak_tflops = 0;
  std::string svg;
};

inline void add_report_options(CLI::App& sub, report_options& o) {
  sub.add_option("log", o.log,
                 "metrics file written by --metrics, or a nanoGPT / llm.c / torchtitan / "
                 "build-nanogpt log as pasted (timestamps, rank tags, logging prefixes are fine)")
      ->required();
  sub.add_option("--from", o.from, "the log's program (default: auto, sniffed from its lines)")
      ->check(
          CLI::IsMember({"auto", "trainkit", "nanogpt", "llmc", "torchtitan", "build-nanogpt"}));
  sub.add_option("--arch", o.arch, "family of --model: gpt2 (default) or llama")
      ->check(CLI::IsMember({"gpt2", "llama"}));
  auto* model = sub.add_option(
      "--model", o.model,
      "preset of --arch the run trained (gpt2: d2 d6 d12 d24 d36 d48; llama: d2 d6 d12 d20 "
      "d24): the FLOP count's N, L and C");
  auto* params =
      sub.add_option("--params", o.params,
                     "dense parameters N without the embeddings, as torchtitan counts them "
                     "(with --layers and --width, instead of --model)")
          ->check(CLI::PositiveNumber);
  auto* active = sub.add_option("--active-params", o.active_params,
                                "mixture of experts: parameters active per token, used as N in 6·N "
                                "(with --layers and --width)")
                     ->check(CLI::PositiveNumber);
  auto* layers = sub.add_option("--layers", o.layers, "layers L (with --params or --active-params)")
                     ->check(CLI::PositiveNumber);
  auto* width =
      sub.add_option("--width", o.width, "model width C (with --params or --active-params)")
          ->check(CLI::PositiveNumber);
  model->excludes(params)->excludes(layers)->excludes(width)->excludes(active);
  params->excludes(active);
  sub.add_option("--seq", o.seq, "sequence length T the run trained at")
      ->check(CLI::PositiveNumber);
  sub.add_option("--tokens-per-step", o.tokens_per_step,
                 "tokens one optimizer step processes, all devices together")
      ->check(CLI::PositiveNumber);
  sub.add_option("--gpus", o.gpus,
                 "devices the run used (default: as the log says, else 1, said so); MFU is "
                 "per device")
      ->check(CLI::PositiveNumber);
  auto* device = sub.add_option(
      "--device", o.device,
      "device the run used, for its dense bf16 peak (H100, \"NVIDIA H100 80GB HBM3\", "
      "A100, MI300X, RTX 4090, ...; default: as the log says)");
  auto* peak = sub.add_option("--peak-tflops", o.peak_tflops,
                              "the device's dense peak TFLOP/s (instead of --device)")
                   ->check(CLI::PositiveNumber);
  device->excludes(peak);
  sub.add_option("--svg", o.svg, "also write a chart of loss and phases per step (SVG)");
}

/// A library message with the report's config fields named by their flags (flag_names.hpp
/// does the trainer's).
inline std::string report_flag_names(std::string message) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 14> names{{
      {"log_report_config.active_params", "--active-params"},
      {"log_report_config.devices", "--gpus"},
      {"log_report_config.arch", "--arch"},
      {"summary_context.peak_tflops", "--peak-tflops"},
      {"log_report_config.model (or params, layers and width)",
       "--model (or --params, --layers and --width)"},
      {"log_report_config.device (or log_report_config.peak_tflops)",
       "--device (or --peak-tflops)"},
      {"log_report_config.tokens_per_step", "--tokens-per-step"},
      {"log_report_config.peak_tflops", "--peak-tflops"},
      {"log_report_config.params", "--params"},
      {"log_report_config.layers", "--layers"},
      {"log_report_config.width", "--width"},
      {"log_report_config.model", "--model"},
      {"log_report_config.device", "--device"},
      {"log_report_config.seq", "--seq"},
  }};
  for (const auto& [field, flag] : names)
    for (auto at = message.find(field); at != std::string::npos;
         at = message.find(field, at + flag.size()))
      message.replace(at, field.size(), flag);
  return message;
}

/// trainkit's own metrics file: the report the end of the run printed.
inline int report_trainkit_metrics(const report_options& o, std::ostream& out) {
  auto file = trainkit::read_metrics_jsonl(o.log);
  for (const auto& w : file.warnings) std::cerr << "gpt_fineweb: warning: " << w << "\n";
  if (file.steps.empty()) throw trainkit::format_error(o.log + ": no step lines");
  // The step lines' tflops is all ranks' together; their mfu is per device in files whose run
  // header says so ("mfu_per":"device: ..."), else (older files) all ranks' FLOP/s over one
  // device's peak, which the ranks (the header's world_size, or --gpus) divide.
  const bool mfu_per_device = file.run && file.run->mfu_is_per_device();
  int ranks = 1;
  std::string ranks_from = "assumed: the file has no run header; give --gpus if the run had more";
  if (file.run) {
    const double ws = file.run->number("world_size");
    if (std::isfinite(ws) && ws >= 1 && ws < 1e6) {
      ranks = int(ws);
      ranks_from = "the run header";
    }
    std::string line = "run:";
    for (const char* key : {"model", "arch", "optimizer", "attention", "device", "device_name"})
      if (const auto v = file.run->get(key);
          !v.empty() && !(std::string_view(key) == "device_name" && v == file.run->get("device")))
        line += std::string(" ") + key + " " + v + ",";
    line += " " + std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks");
    if (const double p = file.run->number("peak_tflops"); std::isfinite(p) && p > 0)
      line += trainkit::detail::format(", peak %.4g TFLOP/s %s", p, file.run->get("dtype").c_str());
    out << line << "\n";
  }
  if (o.gpus > 0) {
    ranks = o.gpus;
    ranks_from = "given";
  }
  if (ranks > 1) {
    for (auto& m : file.steps) {
      if (!mfu_per_device) {
        m.mfu /= ranks;
        m.mfu_calibrated /= ranks;
      }
      m.tflops /= ranks;
    }
    out << "devices: " << ranks << " (" << ranks_from
        << "); MFU and TFLOP/s below are per device\n";
  }
  trainkit::summary_context ctx;
  if (o.peak_tflops > 0) {
    ctx.peak_tflops = o.peak_tflops;
  } else if (!o.device.empty()) {
    const auto p = trainkit::peak_tflops(o.device, trainkit::compute_dtype::bf16);
    if (!p)
      throw trainkit::config_error("--device: '" + o.device +
                                   "' is not in the peak table; give --peak-tflops");
    ctx.peak_tflops = *p;
    ctx.dtype = "bf16";
  }
  auto summary = trainkit::summarize(file.steps, {}, ctx);
  if (std::isfinite(summary.mfu) && summary.mfu > 1.0) {
    // Nothing runs above its peak: refuse the figure and the verdict, name what to fix.
    const double x = summary.mfu;
    summary.evidence = trainkit::detail::format(
        "no measurement and no verdict: the steps put MFU at %.0f%% of the device's %.4g "
        "TFLOP/s peak, and no device runs above 100%%, so an input is inconsistent: the rank "
        "count %d (%s) would have to be at least %d; or the peak (the device) at least %.4g "
        "TFLOP/s (give --device or --peak-tflops)",
        100 * x, summary.peak_tflops, ranks, ranks_from.c_str(), int(std::ceil(ranks * x - 1e-9)),
        summary.peak_tflops * x);
    summary.verdict = trainkit::bottleneck::unknown;
    summary.mfu = NAN;
    summary.mfu_calibrated = NAN;
  }
  // The library's advice names config fields (trainer_config.ckpt_every); the user reads flags.
  std::string text = trainkit::format_summary(summary);
  if (summary.verdict == trainkit::bottleneck::unknown && !std::isfinite(summary.mfu) &&
      summary.evidence.starts_with("no measurement"))
    text = trainkit::report::detail::unstated_mfu(std::move(text));
  out << name_flags(report_flag_names(text));
  // HellaSwag scored during that run (--hellaswag-every) sits beside the metrics file.
  if (const std::filesystem::path hs = hellaswag_log_path(o.log); std::filesystem::exists(hs))
    out << format_hellaswag_log(read_hellaswag_log(hs));
  if (!o.svg.empty()) {
    trainkit::write_chart_svg(o.svg, file.steps,
                              {.title = std::filesystem::path(o.log).filename().string()});
    out << "chart: " << o.svg << "\n";
  }
  return 0;
}

/// `gpt_fineweb report LOG [flags]`.
inline int run_report_log(const report_options& o, std::ostream& out) {
  namespace rp = trainkit::report;
  try {
    const auto format = rp::parse_log_format(o.from);
    rp::run_log run;
    if (format != rp::log_format::trainkit) {
      // Sniff before deciding the path: trainkit's own files keep their report.
      run = rp::read_run_log(o.log, format);
      if (run.format == rp::log_format::trainkit) return report_trainkit_metrics(o, out);
    } else {
      return report_trainkit_metrics(o, out);
    }
    for (const auto& w : run.warnings) std::cerr << "gpt_fineweb: warning: " << w << "\n";
    rp::log_report_config cfg;
    cfg.model = o.model;
    cfg.arch = o.arch;
    cfg.params = o.params;
    cfg.active_params = o.active_params;
    cfg.devices = o.gpus;
    cfg.layers = o.layers;
    cfg.width = o.width;
    cfg.seq = o.seq;
    cfg.tokens_per_step = o.tokens_per_step;
    cfg.device = o.device;
    cfg.peak_tflops = o.peak_tflops;
    const auto a = rp::analyze_run(run, cfg);
    out << report_flag_names(rp::format_run_analysis(a));
    if (!o.svg.empty()) {
      trainkit::write_chart_svg(o.svg, a.steps,
                                {.title = std::filesystem::path(o.log).filename().string() + " (" +
                                          rp::log_format_title(run.format) + ")"});
      out << "chart: " << o.svg << "\n";
    }
    return 0;
  } catch (const trainkit::config_error& e) {
    throw trainkit::config_error(report_flag_names(e.what()));
  }
}

class report_command final : public command {
 public:
  std::string_view name() const override { return "report"; }
  std::string_view summary() const override {
    return "Explain a run: its metrics JSONL (even a crashed run's) or a nanoGPT, llm.c, "
           "torchtitan or build-nanogpt log as pasted";
  }
  void add_options(CLI::App& app) override { add_report_options(app, options_); }
  int run(std::ostream& out) override { return run_report_log(options_, out); }

 private:
  report_options options_;
};

}  // namespace gpt_fineweb
