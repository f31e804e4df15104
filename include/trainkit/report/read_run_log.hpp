// trainkit/report/read_run_log.hpp — reads any supported training log, sniffing its format.
//
// `read_run_log(path, format)` reads trainkit's metrics JSONL (metrics_reader.hpp) or the console
// log of nanoGPT, llm.c, torchtitan or build-nanogpt (nanogpt_log.hpp, llmc_log.hpp,
// torchtitan_log.hpp, build_nanogpt_log.hpp) into one run_log. Console lines are first reduced to
// the tool's own text (detail/log_lines.hpp: timestamps, rank tags, logging prefixes, ANSI, '\r'
// and CRLF). With no format given it sniffs: the format whose step line matches most lines wins,
// and a file in which no line matches any is an error naming the file and quoting its first
// three lines, never a guess. A log with no step line at all is an error too; other lines are
// counted and skipped. A launch command pasted with the lines (torchrun --nproc_per_node=N
// [--nnodes=M], mpirun -np N) gives the device count where the tool's lines do not.
//
// trainkit's own files go through metrics_reader.hpp, so this header needs nlohmann_json like it.
#pragma once

#include <array>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <istream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/report/build_nanogpt_log.hpp"
#include "trainkit/report/detail/log_lines.hpp"
#include "trainkit/report/detail/log_scan.hpp"
#include "trainkit/report/llmc_log.hpp"
#include "trainkit/report/metrics_reader.hpp"
#include "trainkit/report/nanogpt_log.hpp"
#include "trainkit/report/run_log.hpp"
#include "trainkit/report/torchtitan_log.hpp"

namespace trainkit::report {

namespace detail {

inline bool is_trainkit_metrics_line(std::string_view line) {
  line = trim(line);
  return line.starts_with('{') && line.find("\"dt_ms\"") != std::string_view::npos;
}

/// The example step line of each format, for messages.
inline const char* step_line_shape(log_format f) noexcept {
  switch (f) {
    case log_format::trainkit:
      return "{\"step\":N,...,\"dt_ms\":X,...}";
    case log_format::nanogpt:
      return "iter N: loss X, time Yms, mfu Z%";
    case log_format::llmc:
      return "step N/M | loss X | ... | Y ms | Z% bf16 MFU | W tok/s";
    case log_format::torchtitan:
      return "[titan] DATE TIME - root - INFO - step: N  loss: X  ...  tps: Y  tflops: Z  mfu: W%";
    case log_format::build_nanogpt:
      return "step N | loss: X | lr ... | norm: ... | dt: Yms | tok/sec: Z";
  }
  return "";
}

/// The first three non-empty lines of a log, quoted (each cut at 80 characters), for messages.
inline std::string first_lines(std::span<const std::string> lines) {
  std::string out;
  int shown = 0;
  for (const auto& raw : lines) {
    const std::string l = strip_escapes(trim(raw));
    if (l.empty()) continue;
    std::string q;
    for (char c : l.substr(0, 80)) q += (unsigned char)c < 0x20 ? '?' : c;
    out += std::string(shown ? ", " : "") + "\"" + q + (l.size() > 80 ? "...\"" : "\"");
    if (++shown == 3) break;
  }
  return shown ? "; it begins " + out : "; it is empty";
}

/// The process count a launch command pasted with the log states: torchrun's (or
/// `python -m torch.distributed.run/launch`'s) --nproc_per_node (or --nproc-per-node) times a
/// plain --nnodes, or mpirun's / mpiexec's -np / -n. nullopt for any other line.
inline std::optional<int> launch_command_devices(std::string_view line) {
  const bool torch = line.find("torchrun") != std::string_view::npos ||
                     line.find("torch.distributed.run") != std::string_view::npos ||
                     line.find("torch.distributed.launch") != std::string_view::npos;
  const bool mpi = line.find("mpirun") != std::string_view::npos ||
                   line.find("mpiexec") != std::string_view::npos;
  if (!torch && !mpi) return std::nullopt;
  // The integer after one of `flags` ("--flag=N" or "--flag N"), if a flag is followed by one.
  auto value_of = [&](std::initializer_list<std::string_view> flags) -> std::optional<long> {
    for (std::string_view flag : flags) {
      for (auto at = line.find(flag); at != std::string_view::npos; at = line.find(flag, at + 1)) {
        std::size_t i = at + flag.size();
        if (at > 0 && line[at - 1] != ' ' && line[at - 1] != '\t') continue;  // a word's tail
        if (i >= line.size() || (line[i] != '=' && line[i] != ' ')) continue;
        while (i < line.size() && (line[i] == '=' || line[i] == ' ')) ++i;
        std::size_t j = i;
        long v = 0;
        while (j < line.size() && j - i < 7 && line[j] >= '0' && line[j] <= '9')
          v = v * 10 + (line[j++] - '0');
        if (j == i || (j < line.size() && line[j] != ' ' && line[j] != '\t')) continue;
        return v;
      }
    }
    return std::nullopt;
  };
  long n = 0;
  if (torch) {
    const auto per_node = value_of({"--nproc_per_node", "--nproc-per-node"});
    if (!per_node) return std::nullopt;
    n = *per_node * value_of({"--nnodes"}).value_or(1);
  } else {
    const auto np = value_of({"-np", "-n"});
    if (!np) return std::nullopt;
    n = *np;
  }
  if (n < 1 || n > 1'000'000) return std::nullopt;
  return int(n);
}

}  // namespace detail

/// The format most of `lines` (the tools' texts) are step lines of, or nullopt when none is.
inline std::optional<log_format> sniff_log_texts(std::span<const detail::log_line> lines) {
  constexpr std::size_t looked_at = 5000;  // enough for any preamble (llm.c's table, configs)
  std::array<std::size_t, 5> hits{};
  std::size_t n = 0;
  for (const auto& l : lines) {
    if (++n > looked_at) break;
    const std::string_view line = l.text;
    if (detail::is_trainkit_metrics_line(line)) ++hits[0];
    if (is_nanogpt_step_line(line)) ++hits[1];
    if (is_llmc_step_line(line)) ++hits[2];
    if (is_torchtitan_step_line(line)) ++hits[3];
    if (is_build_nanogpt_step_line(line)) ++hits[4];
  }
  constexpr std::array<log_format, 5> order{log_format::trainkit, log_format::nanogpt,
                                            log_format::llmc, log_format::torchtitan,
                                            log_format::build_nanogpt};
  std::size_t best = 0;
  for (std::size_t i = 1; i < hits.size(); ++i)
    if (hits[i] > hits[best]) best = i;
  if (hits[best] == 0) return std::nullopt;
  return order[best];
}

/// The format most raw lines of a log are step lines of, or nullopt when none is.
inline std::optional<log_format> sniff_log_format(std::span<const std::string> lines) {
  return sniff_log_texts(
      detail::normalise_log(lines.first(std::min<std::size_t>(lines.size(), 5000))).lines);
}

/// trainkit's metrics lines as a run_log: evaluations are the lines with a validation loss,
/// timed in their own step (eval_ms); checkpoint stalls stay phases (ckpt_stall_ms).
inline run_log parse_trainkit_metrics(std::istream& in, const std::string& source) {
  const metrics_file file = parse_metrics_jsonl(in, source);
  run_log run;
  run.format = log_format::trainkit;
  run.source = source;
  run.warnings = file.warnings;
  for (const auto& m : file.steps) {
    logged_step s;
    s.m = m;
    s.log_mfu = m.mfu;
    s.log_tflops = m.tflops;
    s.log_tok_per_s = m.tok_per_s;
    run.steps.push_back(s);
    if (std::isfinite(m.val_loss)) {
      log_event e;
      e.kind = log_event::kind_t::eval;
      e.step = m.step;
      e.timed_in = run.steps.size() - 1;
      e.ms = m.eval_ms;
      e.val_loss = m.val_loss;
      run.events.push_back(e);
    }
  }
  run.lines = file.steps.size();
  if (file.run) {  // the run header: what the report would otherwise need flags for
    const auto& h = *file.run;
    run.facts.attention = h.get("attention");
    run.facts.model = h.get("model");
    run.facts.device = h.get("device_name");
    const double ws = h.number("world_size"), tok = h.number("tokens_per_step"),
                 seq = h.number("seq_len"), fpt = h.number("flops_per_token"),
                 peak = h.number("peak_tflops");
    if (std::isfinite(ws) && ws >= 1 && ws < 1e6) {
      run.facts.devices = int(ws);
      run.facts.devices_from = "the run header";
    }
    if (std::isfinite(tok) && tok >= 1 && tok < 1e18)
      run.facts.tokens_per_step = std::uint64_t(tok);
    if (std::isfinite(seq) && seq >= 1 && seq < 1 << 30) run.facts.seq = int(seq);
    if (std::isfinite(fpt) && fpt > 0) run.facts.flops_per_token = fpt;
    if (std::isfinite(peak) && peak > 0) run.facts.peak_tflops = peak;
    // The lines' mfu is per device where the header says so (trainer/throughput.hpp); a header
    // that does not (written before, same release) counted every rank against one device's peak.
    if (!h.mfu_is_per_device() && run.facts.devices > 1)
      for (auto& st : run.steps) st.log_mfu /= run.facts.devices;
  }
  return run;
}

/// Parses a log read from `in`; `format` nullopt sniffs it. `source` names the file in messages.
inline run_log parse_run_log(std::istream& in, const std::string& source,
                             std::optional<log_format> format = std::nullopt) {
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
  const bool json = format == log_format::trainkit ||
                    (!format && sniff_log_format(lines) == log_format::trainkit);
  detail::normalised_log norm;
  if (!json) norm = detail::normalise_log(lines);
  if (!format) format = json ? log_format::trainkit : sniff_log_texts(norm.lines);
  if (!format)
    throw format_error(source + ": not a training log trainkit can read: none of its " +
                       std::to_string(lines.size()) +
                       " lines is a step line of nanoGPT (\"iter N: loss X, time Yms[, mfu Z%]\"), "
                       "llm.c (\"step N/M | ... | Y ms | ...\", \"step N: train loss X (took Y "
                       "ms)\"), torchtitan (\"step: N  loss: X  ... tps: Y ...\"), build-nanogpt "
                       "(\"step N | loss: X | ... | dt: Yms | tok/sec: Z\") or a trainkit metrics "
                       "file" +
                       detail::first_lines(lines));
  run_log run;
  switch (*format) {
    case log_format::trainkit: {
      std::string text;
      for (const auto& l : lines) text += l + '\n';
      std::istringstream again(text);
      run = parse_trainkit_metrics(again, source);
      break;
    }
    case log_format::nanogpt:
      run = parse_nanogpt_log(norm, source);
      break;
    case log_format::llmc:
      run = parse_llmc_log(norm, source);
      break;
    case log_format::torchtitan:
      run = parse_torchtitan_log(norm, source);
      break;
    case log_format::build_nanogpt:
      run = parse_build_nanogpt_log(norm, source);
      break;
  }
  if (run.steps.empty())
    throw format_error(source + ": no step lines of a " + log_format_title(*format) + " (\"" +
                       detail::step_line_shape(*format) + "\")" + detail::first_lines(lines));
  // A launch command pasted with the log ("$ torchrun --standalone --nproc_per_node=8
  // train.py") states the process count where the tool's own lines do not.
  if (!json && run.facts.devices == 0)
    for (const auto& l : norm.lines)
      if (const auto n = detail::launch_command_devices(l.text)) {
        run.facts.devices = *n;
        run.facts.devices_from = "the launch command in the log, line " + std::to_string(l.line);
        break;
      }
  return run;
}

/// Reads the log at `path`; throws io_error when it cannot be opened, format_error when it is
/// no log of `format` (or, with nullopt, of any format this header reads).
inline run_log read_run_log(const std::filesystem::path& path,
                            std::optional<log_format> format = std::nullopt) {
  std::ifstream in(path);
  if (!in) throw io_error("cannot open log file " + path.string());
  return parse_run_log(in, path.string(), format);
}

}  // namespace trainkit::report
