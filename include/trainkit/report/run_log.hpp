// trainkit/report/run_log.hpp — one description of a training run, whichever program logged it.
//
// `gpt_fineweb report` explains runs of trainkit and of the tools people train with today
// (nanoGPT, llm.c, torchtitan). Each reader (nanogpt_log.hpp, llmc_log.hpp, torchtitan_log.hpp,
// read_run_log.hpp for trainkit's metrics JSONL) turns its log into a `run_log`: one row per
// timed step line with the wall time the log measured, the loss, the log's own throughput and
// MFU where it printed them, and the evaluations and checkpoint saves with the step they happened
// at and the step line whose time includes them. run_analysis.hpp turns that into the summary,
// the chart and the verdict that trainkit's own runs get. What a log does not say (model shape,
// tokens per step, the device) comes from the caller, never from a guess.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/trainer/step_metrics.hpp"

namespace trainkit::report {

/// The programs whose logs are read.
enum class log_format { trainkit, nanogpt, llmc, torchtitan, build_nanogpt };

/// Every format, in the order the sniffer breaks ties.
inline constexpr log_format all_log_formats[] = {log_format::trainkit, log_format::nanogpt,
                                                 log_format::llmc, log_format::torchtitan,
                                                 log_format::build_nanogpt};

/// "trainkit", "nanogpt", "llmc", "torchtitan", "build-nanogpt": the names `parse_log_format`
/// accepts.
inline const char* log_format_name(log_format f) noexcept {
  switch (f) {
    case log_format::trainkit:
      return "trainkit";
    case log_format::nanogpt:
      return "nanogpt";
    case log_format::llmc:
      return "llmc";
    case log_format::torchtitan:
      return "torchtitan";
    case log_format::build_nanogpt:
      return "build-nanogpt";
  }
  return "unknown";
}

/// How the report names the program that wrote a log.
inline const char* log_format_title(log_format f) noexcept {
  switch (f) {
    case log_format::trainkit:
      return "trainkit metrics JSONL";
    case log_format::nanogpt:
      return "nanoGPT train.py log";
    case log_format::llmc:
      return "llm.c log";
    case log_format::torchtitan:
      return "torchtitan log";
    case log_format::build_nanogpt:
      return "build-nanogpt train_gpt2.py log";
  }
  return "log";
}

/// The format named `name`, or nullopt for "auto" (sniff it). Throws config_error for any other.
inline std::optional<log_format> parse_log_format(std::string_view name) {
  for (auto f : all_log_formats)
    if (name == log_format_name(f)) return f;
  if (name == "auto") return std::nullopt;
  throw config_error("log_report_config.format: unknown log format '" + std::string(name) +
                     "' (valid: trainkit, nanogpt, llmc, torchtitan, build-nanogpt, auto)");
}

/// An evaluation or checkpoint save the log mentions.
struct log_event {
  enum class kind_t { eval, checkpoint, pause };  // pause: GC, profiler dump (`what`)
  kind_t kind = kind_t::eval;
  std::uint64_t step = 0;  // the step it happened at, in the log's own numbering
  std::size_t line = 0;    // 1-based line of the log that announced it
  // Index (into run_log::steps) of the step line whose measured time includes this event, or
  // `not_timed` when no step time does (llm.c times only the training section).
  std::size_t timed_in = not_timed;
  double ms = NAN;        // its own duration when the log states one (torchtitan's save message)
  double val_loss = NAN;  // an evaluation's validation loss
  std::string what;       // a pause's kind: "garbage collection", "profiler dump"
  static constexpr std::size_t not_timed = std::numeric_limits<std::size_t>::max();
};

/// One timed step line of a log.
struct logged_step {
  step_metrics m;              // step (the log's number), dt_ms (wall ms per step), loss, val_loss
  std::uint64_t covers = 1;    // steps whose time this line accounts for (torchtitan: log_freq)
  double log_mfu = NAN;        // the MFU the log printed, as a fraction; NaN when none or unknown
  double log_tflops = NAN;     // the TFLOP/s the log printed (torchtitan)
  double log_tok_per_s = NAN;  // the tokens/s the log printed (per device for torchtitan)
  double memory_gib = NAN;     // peak reserved device memory the log printed (torchtitan)
  double stamp_ms = NAN;       // the line's timestamp (ms) when a prefix carried one
  std::size_t line = 0;        // 1-based line of the log
};

/// What a log states about its run besides the steps; zero/empty when it does not say.
struct log_facts {
  std::uint64_t parameters = 0;         // as the log counts them (see run_log::format)
  bool parameters_exclude_wpe = false;  // nanoGPT prints N without the position embedding
  int layers = 0;
  int heads = 0;
  int width = 0;
  int seq = 0;                        // T of the training batches
  int max_seq = 0;                    // rows of the position embedding (llm.c's maxT)
  std::uint64_t tokens_per_step = 0;  // all devices together
  int devices = 0;                    // processes / GPUs
  std::string devices_from;           // where the log says it: "num_processes", "rank tags", ...
  int rank_tags = 0;                  // distinct launcher rank tags on the lines (0: none)
  std::string device;                 // device name
  double peak_tflops = 0;             // the peak the log's own MFU used, when it printed one
  bool compiled = false;              // the log says the model was compiled (torch.compile)
  double average_ms = NAN;            // llm.c's "total average iteration time"
  std::string attention;              // the attention engine (trainkit's run header)
  std::string model;                  // the model the log names (trainkit's run header)
  double flops_per_token = 0;         // the log's FLOP count per token (trainkit's run header)
  bool mfu_all_devices = false;       // the printed MFU is all devices' FLOPs over one's peak
};

/// A run as one log describes it.
struct run_log {
  log_format format = log_format::trainkit;
  std::string source;              // the file, for messages
  std::vector<logged_step> steps;  // in step order
  std::vector<log_event> events;   // in the order the log printed them
  log_facts facts;
  std::size_t lines = 0;        // lines read
  std::size_t skipped = 0;      // lines no rule of the format matched (counted, not errors)
  std::size_t repeats = 0;      // step lines printed again by another rank (counted once)
  std::size_t other_ranks = 0;  // lines of other ranks' tags, left out (rank `rank` kept)
  int rank = -1;                // the launcher rank whose lines were read; -1: no tags
  std::size_t last_step_index = std::numeric_limits<std::size_t>::max();  // reader's cursor
  std::vector<std::string> warnings;  // "FILE:LINE: ..." for lines dropped or replaced
  // The step of a step line read but left untimed before the first timed one (torchtitan's first
  // line with no "Training starts" before it): the log still starts there, not at steps[0].
  std::optional<std::uint64_t> untimed_first_step;

  /// The steps as the summary and chart read them.
  std::vector<step_metrics> metrics() const {
    std::vector<step_metrics> out;
    out.reserve(steps.size());
    for (const auto& s : steps) out.push_back(s.m);
    return out;
  }
};

namespace detail {

/// Whether a step line at normalised line `index` is another rank's copy of the last one: the
/// same step and loss on the very next line (every rank printing its own; tps may differ).
inline bool is_rank_repeat(run_log& run, std::uint64_t step, double loss, std::size_t index) {
  if (run.steps.empty() || run.last_step_index + 1 != index) return false;
  const auto& last = run.steps.back().m;
  const bool same_loss = (std::isnan(loss) && std::isnan(last.loss)) || loss == last.loss;
  if (last.step != step || !same_loss) return false;
  run.last_step_index = index;
  ++run.repeats;
  return true;
}

/// Appends a step line; when the log's step numbers go back (a resumed run re-runs steps after
/// its checkpoint) the later lines replace the earlier ones, with a warning, as
/// metrics_reader.hpp does for trainkit's own files. Events keep pointing at the right rows.
/// `index` is the step line's position among the normalised lines (for is_rank_repeat).
inline void push_step(run_log& run, logged_step s, std::size_t index) {
  run.last_step_index = index;
  if (!run.steps.empty() && s.m.step <= run.steps.back().m.step) {
    std::size_t dropped = 0;
    while (!run.steps.empty() && run.steps.back().m.step >= s.m.step) {
      run.steps.pop_back();
      ++dropped;
    }
    for (auto& e : run.events)
      if (e.timed_in != log_event::not_timed && e.timed_in >= run.steps.size())
        e.timed_in = log_event::not_timed;
    run.warnings.push_back(run.source + ":" + std::to_string(s.line) + ": step " +
                           std::to_string(s.m.step) +
                           " again (a resumed run): " + std::to_string(dropped) +
                           " earlier line(s) replaced by the resumed ones");
  }
  run.steps.push_back(s);
}

}  // namespace detail

}  // namespace trainkit::report
