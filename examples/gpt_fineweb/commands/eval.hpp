// commands/eval.hpp — `gpt_fineweb eval`: HellaSwag accuracy of an llm.c model file (trained by
// trainkit and written with --export, imported with import-hf, or llm.c's own) or of a Hugging
// Face folder of any registered --arch family (--init-from-hf: what training's --export-hf
// writes; the family's CPU model reads it, as training's --init-from-hf does), scored by
// hellaswag.hpp on the CPU model. Errors propagate as trainkit exceptions, which the
// program reports as one line and exit code 2 (command.hpp).
#pragma once

#include <CLI/CLI.hpp>

#include <ostream>
#include <string>
#include <string_view>

#include <trainkit/model/gpt2/cpu.hpp>
#include <trainkit/model/gpt2/llmc_file.hpp>

#include "../command.hpp"
#include "../families/registry.hpp"
#include "../hellaswag.hpp"
#include "../train/options.hpp"

namespace gpt_fineweb {

struct eval_args {
  std::string hellaswag;  // hellaswag_val.jsonl
  std::string model;      // llm.c model file
  std::string hf;         // or a Hugging Face folder of the --arch family
  std::string arch = "gpt2";
  std::string vocab;
  int limit = 0;  // first N examples; 0: all
};

inline void add_eval_options(CLI::App& sub, eval_args& o) {
  sub.add_option("--hellaswag", o.hellaswag, "HellaSwag JSONL (e.g. hellaswag_val.jsonl) to score")
      ->required();
  sub.add_option("--init-from", o.model, "llm.c model file to evaluate (GPT-2)");
  sub.add_option("--init-from-hf", o.hf,
                 "Hugging Face folder to evaluate instead, of the --arch family (what training's "
                 "--export-hf writes)");
  sub.add_option("--arch", o.arch, "model family of --init-from-hf: " + model_families::describe())
      ->capture_default_str()
      ->check(CLI::IsMember(model_families::names()));
  sub.add_option("--vocab", o.vocab,
                 "Directory with GPT-2 encoder.json + vocab.bpe (default: $TRAINKIT_GPT2_VOCAB, "
                 "else the bundled one)");
  sub.add_option("--limit", o.limit, "Score only the first N examples (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

inline int run_eval(const eval_args& o, std::ostream& log) {
  if (o.model.empty() == o.hf.empty())
    throw trainkit::config_error(
        "eval needs one model: --init-from FILE (llm.c) or --init-from-hf DIR (with --arch)");
  const hellaswag_scorer score(o.hellaswag, o.vocab, o.limit);
  if (!o.model.empty()) {
    if (o.arch != "gpt2")
      throw trainkit::config_error("--arch " + o.arch +
                                   ": llm.c model files (--init-from) hold GPT-2 only; give the "
                                   "family's Hugging Face folder with --init-from-hf");
    auto model = trainkit::model::load_llmc_gpt2_cpu<float>(o.model);
    log << "hellaswag: " << format_hellaswag(score(model)) << "\n";
    return 0;
  }
  // The family's CPU model from the folder, as training's --init-from-hf reads it.
  train_options t;
  t.arch = o.arch;
  t.init_from_hf = o.hf;
  return visit_family(model_families{}, o.arch, "--arch", [&]<class Family>() {
    host_policies<Family> family(typename Family::flags{});
    const auto cfg = family.model_config(t);
    auto model = family.make_model(t, cfg);
    log << "hellaswag: " << format_hellaswag(score(model)) << "\n";
    return 0;
  });
}

class eval_command final : public command {
 public:
  std::string_view name() const override { return "eval"; }
  std::string_view summary() const override {
    return "Score an llm.c model file or a Hugging Face folder on HellaSwag";
  }
  void add_options(CLI::App& app) override { add_eval_options(app, o_); }
  int run(std::ostream& out) override { return run_eval(o_, out); }

 private:
  eval_args o_;
};

}  // namespace gpt_fineweb
