// hellaswag.hpp — HellaSwag in gpt_fineweb, in one place: the examples tokenized once and scored
// against any model with logits (model::logit_model; the library's eval/hellaswag.hpp does the
// per-example arithmetic), the figures llm.c prints, the record of scores during training
// (`<metrics stem>.hellaswag.jsonl`, one line {"step", "examples", "acc", "acc_norm"} per
// evaluation, read back by `report`; the same figures go to TensorBoard as eval/hellaswag_acc and
// eval/hellaswag_acc_norm in the run's `hellaswag/` subfolder, and to the end-of-run report), and
// the scorer training runs every --hellaswag-every steps. `eval` (commands/eval.hpp) scores a
// model file with it. It names no model type, so the training driver (also compiled by nvcc)
// includes it without pulling Eigen.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <trainkit/core/error.hpp>
#include <trainkit/eval/hellaswag.hpp>
#include <trainkit/model/sampling.hpp>
#include <trainkit/tokenizer/gpt2_tokenizer.hpp>
#include <trainkit/tokenizer/vocab_files.hpp>
#include <trainkit/trainer/tensorboard.hpp>

namespace gpt_fineweb {

class hellaswag_scorer {
 public:
  /// Reads FILE (HellaSwag JSONL) with the GPT-2 vocabulary in VOCAB (empty: the default lookup);
  /// LIMIT > 0 keeps only the first LIMIT examples.
  hellaswag_scorer(const std::string& file, const std::string& vocab, int limit) {
    namespace tk = trainkit;
    const auto tok =
        tk::tokenizer::gpt2_tokenizer::from_directory(tk::tokenizer::resolve_vocab_dir(vocab));
    examples_ = tk::eval::read_hellaswag(file, [&](const std::string& s) { return tok.encode(s); });
    if (examples_.empty()) throw tk::format_error("HellaSwag file '" + file + "' is empty");
    if (limit > 0 && examples_.size() > std::size_t(limit)) examples_.resize(std::size_t(limit));
  }

  template <trainkit::model::logit_model Model>
  trainkit::eval::hellaswag_result operator()(Model& model) const {
    const auto& cfg = model.config();
    auto logits = [&](std::span<const std::int32_t> in) {
      return model.forward_logits(in, 1, int(in.size()));
    };
    trainkit::eval::hellaswag_result r;
    for (const auto& ex : examples_) {
      const auto s = trainkit::eval::score_hellaswag(ex, logits, cfg.vocab_size,
                                                     std::size_t(cfg.padded_vocab_size),
                                                     std::size_t(cfg.max_seq_len));
      trainkit::eval::accumulate(r, ex, s);
    }
    return r;
  }

 private:
  std::vector<trainkit::eval::hellaswag_example> examples_;
};

/// "N examples, acc A (k), acc_norm B (k)", the figures llm.c prints.
inline std::string format_hellaswag(const trainkit::eval::hellaswag_result& r) {
  char line[160];
  std::snprintf(line, sizeof line, "%d examples, acc %.4f (%d), acc_norm %.4f (%d)", r.examples,
                r.acc(), r.correct, r.acc_norm(), r.correct_norm);
  return line;
}

// ---- the record of scores during training ----

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

/// HellaSwag during training (--hellaswag FILE --hellaswag-every K), on rank 0: the score every
/// K steps and after the last, printed, appended to the log beside `metrics` (when a metrics file
/// is written) and to TensorBoard (when `tensorboard` is set); `report` gives this run's scores.
class hellaswag_during_training {
 public:
  hellaswag_during_training(const std::string& file, const std::string& vocab, int limit, int every,
                            const std::string& metrics, const std::string& tensorboard)
      : scorer_(file, vocab, limit), every_(std::uint64_t(every)), metrics_(metrics) {
    if (!metrics.empty()) {
      const std::filesystem::path path = hellaswag_log_path(metrics);
      log_.emplace(path, std::ios::app);
      if (!*log_) throw trainkit::io_error("cannot open " + path.string() + " for writing");
    }
    // A folder of its own: TensorBoard shows it as a run beside the training run's scalars, and
    // its reader never has two event files of one run growing at once.
    if (!tensorboard.empty())
      tensorboard_.emplace(std::filesystem::path(tensorboard) / "hellaswag");
  }

  /// After step `step`: a score when it is a multiple of K.
  template <trainkit::model::logit_model Model>
  void after_step(Model& model, std::uint64_t step) {
    if (step % every_ == 0) score(model, step);
  }

  /// After the run: the last step is scored too (after_step did when it is a multiple of K).
  template <trainkit::model::logit_model Model>
  void after_run(Model& model, std::uint64_t last_step, bool any_steps) {
    if (any_steps && last_step % every_ != 0) score(model, last_step);
  }

  /// This run's scores, for the end-of-run report.
  void report(std::ostream& out) const {
    if (!points_.empty()) out << format_hellaswag_log(points_);
  }

 private:
  template <trainkit::model::logit_model Model>
  void score(Model& model, std::uint64_t step) {
    const auto r = scorer_(model);
    std::cout << "hellaswag at step " << step << ": " << format_hellaswag(r) << "\n";
    const hellaswag_point p = hellaswag_point_of(step, r);
    points_.push_back(p);
    if (log_) {
      *log_ << hellaswag_log_line(p) << "\n" << std::flush;
      if (!*log_) throw trainkit::io_error("writing the HellaSwag log beside " + metrics_);
    }
    if (tensorboard_)
      tensorboard_->write_scalars(
          std::int64_t(step),
          {{"eval/hellaswag_acc", float(p.acc)}, {"eval/hellaswag_acc_norm", float(p.acc_norm)}});
  }

  hellaswag_scorer scorer_;
  std::uint64_t every_;
  std::string metrics_;
  std::optional<std::ofstream> log_;                         // <metrics stem>.hellaswag.jsonl
  std::optional<trainkit::tensorboard_writer> tensorboard_;  // <--tensorboard>/hellaswag/
  std::vector<hellaswag_point> points_;
};

}  // namespace gpt_fineweb
