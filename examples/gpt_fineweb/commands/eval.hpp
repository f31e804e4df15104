// commands/eval.hpp — `gpt_fineweb eval`: HellaSwag accuracy of an llm.c model file (trained by
// trainkit and written with --export, imported with import-hf, or llm.c's own), scored by
// hellaswag.hpp on the CPU model. Errors propagate as trainkit exceptions, which the
// program reports as one line and exit code 2 (command.hpp).
#pragma once

#include <CLI/CLI.hpp>

#include <ostream>
#include <string>
#include <string_view>

#include <trainkit/model/gpt2_cpu.hpp>
#include <trainkit/model/llmc_file.hpp>

#include "../command.hpp"
#include "../hellaswag.hpp"

namespace gpt_fineweb {

struct eval_args {
  std::string hellaswag;  // hellaswag_val.jsonl
  std::string model;      // llm.c model file
  std::string vocab;
  int limit = 0;  // first N examples; 0: all
};

inline void add_eval_options(CLI::App& sub, eval_args& o) {
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

inline int run_eval(const eval_args& o, std::ostream& log) {
  const hellaswag_scorer score(o.hellaswag, o.vocab, o.limit);
  auto model = trainkit::model::load_llmc_gpt2_cpu<float>(o.model);
  log << "hellaswag: " << format_hellaswag(score(model)) << "\n";
  return 0;
}

class eval_command final : public command {
 public:
  std::string_view name() const override { return "eval"; }
  std::string_view summary() const override { return "Score an llm.c model file on HellaSwag"; }
  void add_options(CLI::App& app) override { add_eval_options(app, o_); }
  int run(std::ostream& out) override { return run_eval(o_, out); }

 private:
  eval_args o_;
};

}  // namespace gpt_fineweb
