// trainkit/report/metrics_reader.hpp — reads a metrics JSONL file back into step_metrics.
//
// `gpt_fineweb report` and the charts read files written by jsonl_sink, including those of runs
// that crashed or were killed: the last line may then be cut off mid-object, which is skipped
// with a warning rather than failing the whole report. A run resumed after such a crash appends
// to the same file (jsonl_sink first ends the cut-off line), so a line that is merely cut off is
// skipped with a warning wherever it is; the resumed run also re-runs the steps after its
// checkpoint, so when step numbers go back the later lines replace the earlier ones (also with a
// warning). The run header line a fresh run's file opens with ({"run":{...}}, trainer/metrics.hpp)
// is read into `metrics_file::run`; files written before it existed have none. Anything else that
// is not a flat JSON object with "step" and "dt_ms" is an error naming FILE:LINE.
//
// The lines are parsed with nlohmann_json, so this header (unlike the trainer's) needs it: link
// trainkit::hf or nlohmann_json::nlohmann_json. The umbrella header trainkit.hpp leaves it out.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainkit/core/error.hpp"
#include "trainkit/trainer/metrics.hpp"

namespace trainkit {

namespace detail {

enum class json_parse_status { ok, cut_off, malformed };

struct flat_json {
  json_parse_status status = json_parse_status::malformed;
  std::map<std::string, double, std::less<>> fields;  // numbers; null → NaN, true/false → 1/0
};

/// Parses one flat JSON object: string keys, values that are numbers, null, true/false or strings
/// (strings are skipped). `cut_off` means the text is a valid beginning of a JSON text that ends
/// too early (what a crash mid-write leaves): nlohmann's parser then fails past the last byte.
/// `malformed` is anything else, a nested value included. null maps to NaN so "unknown" stays
/// distinguishable from 0.
inline flat_json parse_flat_json(std::string_view s) {
  flat_json result;
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    result.status = json_parse_status::cut_off;
    return result;
  }
  if (s[first] != '{') return result;  // malformed: a metrics line is an object
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(s);
  } catch (const nlohmann::json::parse_error& e) {
    if (e.byte > s.size()) result.status = json_parse_status::cut_off;
    return result;
  } catch (const nlohmann::json::exception&) {
    return result;  // e.g. a number out of double's range
  }
  for (const auto& [key, value] : j.items()) {
    if (value.is_number()) {
      result.fields[key] = value.get<double>();
    } else if (value.is_null()) {
      result.fields[key] = NAN;
    } else if (value.is_boolean()) {
      result.fields[key] = value.get<bool>() ? 1 : 0;
    } else if (!value.is_string()) {
      return result;  // nested object or array
    }
  }
  result.status = json_parse_status::ok;
  return result;
}

}  // namespace detail

/// The run header as read back: its text values and its numbers (null → NaN).
struct run_header_fields {
  std::map<std::string, std::string, std::less<>> text;  // model, device_name, attention, ...
  std::map<std::string, double, std::less<>> numbers;    // world_size, tokens_per_step, ...

  std::string get(std::string_view key) const {
    const auto it = text.find(key);
    return it == text.end() ? std::string() : it->second;
  }
  double number(std::string_view key, double dflt = NAN) const {
    const auto it = numbers.find(key);
    return it == numbers.end() ? dflt : it->second;
  }
  /// Whether the step lines' mfu is per device (to_json_header's mfu_per_device_text); otherwise
  /// it is all ranks' FLOP/s over one device's peak, which the ranks divide.
  bool mfu_is_per_device() const { return get("mfu_per") == mfu_per_device_text; }
};

/// A metrics file's steps plus what was skipped on the way.
struct metrics_file {
  std::vector<step_metrics> steps;       // in step order, resume repeats resolved
  std::vector<std::string> warnings;     // "FILE:LINE: ..." for each skipped or replaced line
  std::optional<run_header_fields> run;  // the first run header line, if the file has one
};

namespace detail {

/// A run header line ({"run":{...}} with flat values) read into `out`; false when `s` is not one.
inline bool parse_run_header(std::string_view s, run_header_fields& out) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos || !s.substr(first).starts_with("{\"run\"")) return false;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(s);
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  if (!j.is_object() || j.size() != 1 || !j.contains("run") || !j["run"].is_object()) return false;
  for (const auto& [key, value] : j["run"].items()) {
    if (value.is_string())
      out.text[key] = value.get<std::string>();
    else if (value.is_number())
      out.numbers[key] = value.get<double>();
    else if (value.is_null())
      out.numbers[key] = NAN;
    else if (value.is_boolean())
      out.numbers[key] = value.get<bool>() ? 1 : 0;
  }
  return true;
}

}  // namespace detail

/// step_metrics from one parsed line; missing fields stay at their defaults.
inline step_metrics step_metrics_from_fields(const std::map<std::string, double, std::less<>>& f) {
  auto get = [&](std::string_view k, double dflt) {
    auto it = f.find(k);
    return it == f.end() ? dflt : it->second;
  };
  step_metrics m;
  m.step = std::uint64_t(get("step", 0));
  m.loss = get("loss", NAN);
  m.lr = get("lr", 0);
  m.grad_norm = get("grad_norm", 0);
  m.tokens = std::uint64_t(get("tokens", 0));
  m.dt_ms = get("dt_ms", 0);
  for (const phase_info& p : phase_table) m.*p.field = get(p.json_key, 0);
  m.tok_per_s = get("tok_per_s", 0);
  m.tflops = get("tflops", 0);
  m.mfu = get("mfu", NAN);
  m.mfu_calibrated = get("mfu_calibrated", NAN);
  m.val_loss = get("val_loss", NAN);
  return m;
}

/// Parses metrics lines. `source` names the file in messages.
inline metrics_file parse_metrics_jsonl(std::istream& in, const std::string& source) {
  metrics_file out;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
  std::size_t last_nonempty = lines.size();
  for (std::size_t i = lines.size(); i-- > 0;)
    if (lines[i].find_first_not_of(" \t\r") != std::string::npos) {
      last_nonempty = i;
      break;
    }
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = source + ":" + std::to_string(i + 1);
    if (run_header_fields h; detail::parse_run_header(line, h)) {
      if (!out.run) out.run = std::move(h);
      continue;
    }
    const auto parsed = detail::parse_flat_json(line);
    if (parsed.status != detail::json_parse_status::ok) {
      if (i == last_nonempty) {
        out.warnings.push_back(where +
                               ": incomplete last line skipped (the run was "
                               "interrupted while writing it)");
        continue;
      }
      if (parsed.status == detail::json_parse_status::cut_off) {
        out.warnings.push_back(where +
                               ": cut-off line skipped (a run interrupted here was "
                               "resumed later)");
        continue;
      }
      throw format_error(where + ": not a flat JSON object: " + line.substr(0, 80));
    }
    if (!parsed.fields.contains("step") || !parsed.fields.contains("dt_ms"))
      throw format_error(where + ": missing \"step\" or \"dt_ms\"");
    // Counts must be whole numbers in range: casting a negative, fractional-beyond-2^64 or NaN
    // double to uint64 is undefined behaviour (found by fuzz_metrics_reader).
    for (const char* key : {"step", "tokens"}) {
      const auto it = parsed.fields.find(key);
      if (it != parsed.fields.end() && !(it->second >= 0 && it->second < 18446744073709551616.0 &&
                                         it->second == std::floor(it->second)))
        throw format_error(where + ": \"" + key + "\" must be a non-negative integer");
    }
    const step_metrics m = step_metrics_from_fields(parsed.fields);
    if (!out.steps.empty() && m.step <= out.steps.back().step) {
      // A resume re-ran steps after its checkpoint: the new lines describe the run that continued.
      std::size_t dropped = 0;
      while (!out.steps.empty() && out.steps.back().step >= m.step) {
        out.steps.pop_back();
        ++dropped;
      }
      out.warnings.push_back(where + ": step " + std::to_string(m.step) +
                             " again (a resumed run): " + std::to_string(dropped) +
                             " earlier line(s) replaced by the resumed ones");
    }
    out.steps.push_back(m);
  }
  return out;
}

/// Reads a metrics file; throws io_error when it cannot be opened, format_error when a line
/// other than the last is not a metrics object.
inline metrics_file read_metrics_jsonl(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw io_error("cannot open metrics file " + path.string());
  return parse_metrics_jsonl(in, path.string());
}

}  // namespace trainkit
