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

inline int run_eval(const eval_command& o, std::ostream& log) {
  namespace tk = trainkit;
  const auto tok =
      tk::tokenizer::gpt2_tokenizer::from_directory(tk::tokenizer::resolve_vocab_dir(o.vocab));
  const auto examples =
      tk::eval::read_hellaswag(o.hellaswag, [&](const std::string& s) { return tok.encode(s); });
  if (examples.empty()) throw tk::format_error("HellaSwag file '" + o.hellaswag + "' is empty");
  auto model = tk::model::load_llmc_gpt2_cpu<float>(o.model);
  const auto& cfg = model.config();
  auto logits = [&](std::span<const std::int32_t> in) {
    return model.forward_logits(in, 1, int(in.size()));
  };
  tk::eval::hellaswag_result r;
  const std::size_t n =
      o.limit > 0 ? std::min(examples.size(), std::size_t(o.limit)) : examples.size();
  for (std::size_t i = 0; i < n; ++i) {
    const auto s =
        tk::eval::score_hellaswag(examples[i], logits, cfg.vocab_size,
                                  std::size_t(cfg.padded_vocab_size), std::size_t(cfg.max_seq_len));
    tk::eval::accumulate(r, examples[i], s);
  }
  char line[160];
  std::snprintf(line, sizeof line, "hellaswag: %d examples, acc %.4f (%d), acc_norm %.4f (%d)\n",
                r.examples, r.acc(), r.correct, r.acc_norm(), r.correct_norm);
  log << line;
  return 0;
}

}  // namespace gpt_fineweb
