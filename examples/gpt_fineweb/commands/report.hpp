// commands/report.hpp — `gpt_fineweb report LOG`: the end-of-run report of any training run,
// trainkit's own metrics file or the console log of nanoGPT, llm.c or torchtitan.
//
// A trainkit metrics file gets exactly the report it always got (phases from the file; a crashed
// run's cut-off line skipped with a warning; the HellaSwag scores of that run beside it,
// hellaswag.hpp; with --svg the chart of loss and phases per step). Another program's log goes
// through trainkit::report: its reader (sniffed with `--from auto`), then run_analysis with what
// the log does not say given by flags (--model or --params/--layers/--width, --seq,
// --tokens-per-step, --device or --peak-tflops). The library names config fields
// (`log_report_config.seq`); report_flag_names maps them to the flags, so a missing fact is one
// line naming the flag and exit code 2 (command.hpp's error path).
#pragma once

#include <CLI/CLI.hpp>

#include <array>
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
  std::string model;          // GPT-2 preset
  std::uint64_t params = 0;
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
                 "metrics file written by --metrics, or a nanoGPT / llm.c / torchtitan log")
      ->required();
  sub.add_option("--from", o.from, "the log's program (default: auto, sniffed from its lines)")
      ->check(CLI::IsMember({"auto", "trainkit", "nanogpt", "llmc", "torchtitan"}));
  auto* model = sub.add_option("--model", o.model,
                               "GPT-2 preset the run trained (d2 d6 d12 d24 d36 d48): N, L, C");
  auto* params = sub.add_option("--params", o.params,
                                "parameters N without the position embedding (instead of --model)")
                     ->check(CLI::PositiveNumber);
  auto* layers =
      sub.add_option("--layers", o.layers, "layers L (with --params)")->check(CLI::PositiveNumber);
  auto* width = sub.add_option("--width", o.width, "model width C (with --params)")
                    ->check(CLI::PositiveNumber);
  model->excludes(params)->excludes(layers)->excludes(width);
  sub.add_option("--seq", o.seq, "sequence length T the run trained at")
      ->check(CLI::PositiveNumber);
  sub.add_option("--tokens-per-step", o.tokens_per_step,
                 "tokens one optimizer step processes, all devices together")
      ->check(CLI::PositiveNumber);
  auto* device = sub.add_option("--device", o.device,
                                "device the run used, for its dense bf16 peak (e.g. H200, A100)");
  auto* peak = sub.add_option("--peak-tflops", o.peak_tflops,
                              "the device's dense peak TFLOP/s (instead of --device)")
                   ->check(CLI::PositiveNumber);
  device->excludes(peak);
  sub.add_option("--svg", o.svg, "also write a chart of loss and phases per step (SVG)");
}

/// A library message with the report's config fields named by their flags (flag_names.hpp
/// does the trainer's).
inline std::string report_flag_names(std::string message) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 11> names{{
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
  const auto file = trainkit::read_metrics_jsonl(o.log);
  for (const auto& w : file.warnings) std::cerr << "gpt_fineweb: warning: " << w << "\n";
  if (file.steps.empty()) throw trainkit::format_error(o.log + ": no step lines");
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
  // The library's advice names config fields (trainer_config.ckpt_every); the user reads flags.
  out << name_flags(
      report_flag_names(trainkit::format_summary(trainkit::summarize(file.steps, {}, ctx))));
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
    cfg.params = o.params;
    cfg.layers = o.layers;
    cfg.width = o.width;
    cfg.seq = o.seq;
    cfg.tokens_per_step = o.tokens_per_step;
    cfg.device = o.device;
    cfg.peak_tflops = o.peak_tflops;
    const auto a = rp::analyze_run(run, cfg);
    out << rp::format_run_analysis(a);
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
    return "Explain a run: its metrics JSONL (even a crashed run's) or a nanoGPT, llm.c or "
           "torchtitan log";
  }
  void add_options(CLI::App& app) override { add_report_options(app, options_); }
  int run(std::ostream& out) override { return run_report_log(options_, out); }

 private:
  report_options options_;
};

}  // namespace gpt_fineweb
