// gpt_fineweb's `eval` subcommand: HellaSwag accuracy of an llm.c model file (trained by
// trainkit and written with --export, imported with import-hf, or llm.c's own), scored by
// trainkit/eval/hellaswag.hpp on the CPU model. Errors propagate as trainkit exceptions, which
// main() reports as one line and exit code 2.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include <trainkit/eval/hellaswag.hpp>
#include <trainkit/model/gpt2_cpu.hpp>
#include <trainkit/model/llmc_file.hpp>
#include <trainkit/tokenizer/gpt2_tokenizer.hpp>
#include <trainkit/tokenizer/vocab_files.hpp>

namespace gpt_fineweb {

struct eval_command {
  std::string hellaswag;  // hellaswag_val.jsonl
  std::string model;      // llm.c model file
  std::string vocab;
  int limit = 0;  // first N examples; 0: all
};

inline void add_eval_options(CLI::App& sub, eval_command& o) {
  sub.add_option("--hellaswag", o.hellaswag, "HellaSwag JSONL (e.g. hellaswag_val.jsonl) to score")
      ->required();
  sub.add_option("--init-from", o.model, "llm.c model file to evaluate")->required();
  sub.add_option("--vocab", o.vocab,
                 "Directory with GPT-2 encoder.json + vocab.bpe (default: $TRAINKIT_GPT2_VOCAB, "
                 "else the bundled one)");
  sub.add_option("--limit", o.limit, "Score only the first N examples (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

/// HellaSwag examples tokenized once and scored against a CPU model: the `eval` subcommand and
/// training's --hellaswag-every share it.
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

  trainkit::eval::hellaswag_result operator()(trainkit::model::gpt2_cpu& model) const {
    const auto& cfg = model.config();
    auto logits = [&](std::span<const std::int32_t> in) {
      return model.forward_logits(in, 1, int(in.size()));
    };
    trainkit::eval::hellaswag_result r;
    for (const auto& ex : examples_) {
      const auto s =
          trainkit::eval::score_hellaswag(ex, logits, cfg.vocab_size,
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

inline int run_eval(const eval_command& o, std::ostream& log) {
  const hellaswag_scorer score(o.hellaswag, o.vocab, o.limit);
  auto model = trainkit::model::load_llmc_gpt2_cpu<float>(o.model);
  log << "hellaswag: " << format_hellaswag(score(model)) << "\n";
  return 0;
}

}  // namespace gpt_fineweb
