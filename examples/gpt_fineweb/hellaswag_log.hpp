// gpt_fineweb's record of HellaSwag during training: `<metrics stem>.hellaswag.jsonl`, one line
// {"step", "examples", "acc", "acc_norm"} per evaluation, written beside --metrics and read back
// by `gpt_fineweb report`; the same figures go to TensorBoard (eval/hellaswag_acc,
// eval/hellaswag_acc_norm in the run's `hellaswag/` subfolder) and the end-of-run report.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <trainkit/core/error.hpp>
#include <trainkit/eval/hellaswag.hpp>

namespace gpt_fineweb {

struct hellaswag_point {
  std::uint64_t step = 0;
  int examples = 0;
  double acc = 0, acc_norm = 0;
};

inline hellaswag_point hellaswag_point_of(std::uint64_t step,
                                          const trainkit::eval::hellaswag_result& r) {
  return {step, r.examples, r.acc(), r.acc_norm()};
}

/// `<metrics stem>.hellaswag.jsonl` for a metrics file path.
inline std::filesystem::path hellaswag_log_path(const std::filesystem::path& metrics) {
  return std::filesystem::path(metrics).replace_extension(".hellaswag.jsonl");
}

inline std::string hellaswag_log_line(const hellaswag_point& p) {
  return nlohmann::json{
      {"step", p.step}, {"examples", p.examples}, {"acc", p.acc}, {"acc_norm", p.acc_norm}}
      .dump();
}

/// The points of a HellaSwag log; format_error naming FILE:LINE for a malformed line (a last line
/// cut off by a crash included: the log is written line by line and flushed).
inline std::vector<hellaswag_point> read_hellaswag_log(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw trainkit::io_error("cannot read the HellaSwag log '" + path.string() + "'");
  std::vector<hellaswag_point> points;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "'" + path.string() + "':" + std::to_string(n);
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_unsigned() ||
        !j.contains("examples") || !j["examples"].is_number_integer() || !j.contains("acc") ||
        !j["acc"].is_number() || !j.contains("acc_norm") || !j["acc_norm"].is_number())
      throw trainkit::format_error(where +
                                   ": not a HellaSwag log line {step, examples, acc, acc_norm}");
    points.push_back({j["step"].get<std::uint64_t>(), j["examples"].get<int>(),
                      j["acc"].get<double>(), j["acc_norm"].get<double>()});
  }
  return points;
}

/// "hellaswag: 4 evaluations; last (step 40) acc 0.2950 acc_norm 0.3010 over 10042 examples;
/// best acc_norm 0.3010 at step 40".
inline std::string format_hellaswag_log(const std::vector<hellaswag_point>& points) {
  if (points.empty()) return "hellaswag: no evaluations\n";
  const hellaswag_point& last = points.back();
  const hellaswag_point* best = &points.front();
  for (const auto& p : points)
    if (p.acc_norm > best->acc_norm) best = &p;
  char line[256];
  std::snprintf(line, sizeof line,
                "hellaswag: %zu evaluation%s; last (step %llu) acc %.4f acc_norm %.4f over %d "
                "examples; best acc_norm %.4f at step %llu\n",
                points.size(), points.size() == 1 ? "" : "s", (unsigned long long)last.step,
                last.acc, last.acc_norm, last.examples, best->acc_norm,
                (unsigned long long)best->step);
  return line;
}

}  // namespace gpt_fineweb
