// commands/eval.hpp — `gpt_fineweb eval`: HellaSwag accuracy of an llm.c model file (trained by
// trainkit and written with --export, imported with import-hf, or llm.c's own), of a Hugging
// Face folder of any registered --arch family (--init-from-hf: what training's --export-hf
// writes), or of the newest checkpoint in a directory of any family (--ckpt-dir: training's, or
// what import-hf writes for a family without llm.c files; its shape from --model and the
// family's flags, as for --sample). The family's CPU model is loaded by commands/model_source.hpp
// as sampling and export-hf load theirs, and scored by hellaswag.hpp, in the --arch family's
// translation unit (train/entry.hpp: eval_model). Errors propagate as trainkit exceptions, which
// the program reports as one line and exit code 2 (command.hpp).
#pragma once

#include <CLI/CLI.hpp>

#include <ostream>
#include <string>
#include <string_view>

#include "../command.hpp"
#include "../families/registry.hpp"
#include "../hellaswag.hpp"
#include "../train/entry.hpp"
#include "../train/options.hpp"

namespace gpt_fineweb {

struct eval_args {
  std::string hellaswag;  // hellaswag_val.jsonl
  std::string model;      // llm.c model file
  std::string hf;         // or a Hugging Face folder of the --arch family
  std::string ckpt_dir;   // or the newest checkpoint in a directory of the --arch family
  std::string arch = "gpt2";
  std::string preset = "d2";  // --model: a checkpoint's shape, with the family's flags
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
  sub.add_option("--ckpt-dir", o.ckpt_dir,
                 "or the newest checkpoint in this directory, of the --arch family (training's "
                 "--ckpt-dir, or what import-hf writes)");
  sub.add_option("--arch", o.arch,
                 "model family of --init-from-hf / --ckpt-dir: " + model_families::describe())
      ->capture_default_str()
      ->check(CLI::IsMember(model_families::names()));
  sub.add_option("--model", o.preset,
                 "preset of a checkpoint's --arch, with its shape flags as in training (" +
                     presets_by_family() + ")")
      ->capture_default_str()
      ->check(CLI::IsMember(all_presets()));
  sub.add_option("--vocab", o.vocab,
                 "Directory with GPT-2 encoder.json + vocab.bpe (default: $TRAINKIT_GPT2_VOCAB, "
                 "else the bundled one)");
  sub.add_option("--limit", o.limit, "Score only the first N examples (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

inline int run_eval(const eval_args& o, const model_family_flags& flags, std::ostream& log) {
  if (int(!o.model.empty()) + int(!o.hf.empty()) + int(!o.ckpt_dir.empty()) != 1)
    throw trainkit::config_error(
        "eval needs one model: --init-from FILE (llm.c), --init-from-hf DIR or --ckpt-dir DIR "
        "(with --arch)");
  if (!o.model.empty() && o.arch != "gpt2")
    throw trainkit::config_error("--arch " + o.arch +
                                 ": llm.c model files (--init-from) hold GPT-2 only; give the "
                                 "family's Hugging Face folder with --init-from-hf or its "
                                 "checkpoint with --ckpt-dir");
  flags.refuse_others(o.arch, "--arch");
  const hellaswag_scorer score(o.hellaswag, o.vocab, o.limit);
  // The family's CPU model, as training's --init-from / --init-from-hf / --sample read it.
  train_options t;
  t.arch = o.arch;
  t.model = o.preset;
  t.init_from = o.model;
  t.init_from_hf = o.hf;
  t.ckpt_dir = o.ckpt_dir;
  return visit_family(model_families{}, o.arch, "--arch", [&]<class Family>() {
    return eval_model<Family>(t, flags.template of<Family>(), score, log);
  });
}

class eval_command final : public command {
 public:
  std::string_view name() const override { return "eval"; }
  std::string_view summary() const override {
    return "Score an llm.c model file, a Hugging Face folder or a checkpoint on HellaSwag";
  }
  void add_options(CLI::App& app) override {
    add_eval_options(app, o_);
    flags_.add_to(app);
  }
  int run(std::ostream& out) override { return run_eval(o_, flags_, out); }

 private:
  eval_args o_;
  model_family_flags flags_;
};

}  // namespace gpt_fineweb
