// commands/report.hpp — `gpt_fineweb report METRICS.jsonl [--svg FILE]`: the end-of-run report
// for any metrics file, a crashed run's included (its cut-off last line is skipped with a
// warning), with the HellaSwag scores of that run beside it (hellaswag.hpp) and, with --svg, the
// chart of loss and phases per step.
//
// Other log formats (nanoGPT, llm.c, torchtitan) are read here too once they exist: a `--from`
// option in add_options and a branch at the top of run.
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <ostream>
#include <string>
#include <string_view>

#include <trainkit/core/error.hpp>
#include <trainkit/report/chart.hpp>
#include <trainkit/report/metrics_reader.hpp>
#include <trainkit/trainer/report.hpp>

#include "../command.hpp"
#include "../hellaswag.hpp"

namespace gpt_fineweb {

class report_command final : public command {
 public:
  std::string_view name() const override { return "report"; }
  std::string_view summary() const override {
    return "Summarise a metrics JSONL file (even a crashed run's)";
  }
  void add_options(CLI::App& app) override {
    app.add_option("metrics", path_, "metrics file written by --metrics")->required();
    app.add_option("--svg", svg_, "also write a chart of loss and phases per step (SVG)");
  }
  int run(std::ostream& out) override {
    namespace fs = std::filesystem;
    const auto file = trainkit::read_metrics_jsonl(path_);
    for (const auto& w : file.warnings) std::cerr << "gpt_fineweb: warning: " << w << "\n";
    if (file.steps.empty()) throw trainkit::format_error(path_ + ": no step lines");
    out << trainkit::format_summary(trainkit::summarize(file.steps));
    // HellaSwag scored during that run (--hellaswag-every) sits beside the metrics file.
    if (const fs::path hs = hellaswag_log_path(path_); fs::exists(hs))
      out << format_hellaswag_log(read_hellaswag_log(hs));
    if (!svg_.empty()) {
      trainkit::write_chart_svg(svg_, file.steps, {.title = fs::path(path_).filename().string()});
      out << "chart: " << svg_ << "\n";
    }
    return 0;
  }

 private:
  std::string path_, svg_;
};

}  // namespace gpt_fineweb
