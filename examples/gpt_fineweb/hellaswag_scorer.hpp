// hellaswag_scorer.hpp — HellaSwag examples tokenized once and scored against any model with
// logits (model::logit_model: gpt2_cpu today). The `eval` subcommand and training's
// --hellaswag-every share it; it names no model type, so the training driver (train_driver.hpp,
// also compiled by nvcc) can include it without pulling Eigen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include <trainkit/core/error.hpp>
#include <trainkit/eval/hellaswag.hpp>
#include <trainkit/model/sampling.hpp>
#include <trainkit/tokenizer/gpt2_tokenizer.hpp>
#include <trainkit/tokenizer/vocab_files.hpp>

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

}  // namespace gpt_fineweb
