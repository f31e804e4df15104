// commands/hf_commands.hpp — `export-hf` and `import-hf` for every registered model family.
//
//   export-hf MODEL OUT [--dtype f32|bf16] [--vocab DIR] [--arch A --model P <A's shape flags>]
//     MODEL an llm.c model file (GPT-2, commands/hf.hpp's conversion, byte for byte what it
//     always wrote), or a checkpoint directory of any family: training's --ckpt-dir, or what
//     import-hf writes. A checkpoint's family is its recorded --arch unless --arch says it; its
//     shape is --model with the family's flags, as for `--sample --ckpt-dir` (checked against
//     the checkpoint's recorded shape before a tensor is read). The folder is the one the
//     family's training --export-hf writes (families/*.hpp: host_policies::export_model).
//   import-hf DIR OUT [--arch A] [--dtype f32|bf16]
//     DIR the family's Hugging Face folder. A family with llm.c model files (GPT-2) writes OUT as
//     one (--init-from starts training from it); one without (Llama) writes OUT as a model-only
//     checkpoint directory (its tensors at step 0, meta arch/model), which `--sample --ckpt-dir`,
//     `eval --ckpt-dir` and `export-hf` read.
// Both go through the family registry (families/registry.hpp) to the --arch family's entry points
// (train/entry.hpp: export_hf_model, import_hf_model, defined in train/host_entry.hpp with
// commands/model_source.hpp's loader and run in that family's translation unit), so a family
// registered there gets both commands; nothing here names one.
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <ostream>
#include <string>
#include <string_view>

#include <trainkit/checkpoint/format.hpp>
#include <trainkit/checkpoint/list.hpp>
#include <trainkit/core/error.hpp>

#include "../command.hpp"
#include "../families/registry.hpp"
#include "../train/checkpoint_families.hpp"
#include "../train/entry.hpp"
#include "../train/options.hpp"
#include "hf_args.hpp"

namespace gpt_fineweb {

/// The --arch the newest readable checkpoint in `dir` records ("gpt2" for one written before
/// families were recorded; empty when none reads).
inline std::string checkpoint_arch(const std::filesystem::path& dir) {
  namespace ck = trainkit::checkpoint;
  const auto all = ck::list_checkpoints(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      return checkpoint_meta_or_default(ck::read_manifest(it->path / ck::manifest_file_name).meta,
                                        "arch");
    } catch (const trainkit::format_error&) {
    } catch (const trainkit::io_error&) {
    }
  }
  return {};
}

inline int run_hf_export(const hf_export_args& o, const model_family_flags& flags,
                         std::ostream& log) {
  train_options t;
  t.model = o.preset;
  t.export_hf = o.out;  // the family checks, before reading, that it can write this shape
  t.export_hf_dtype = o.dtype;
  t.vocab = o.vocab;
  if (std::filesystem::is_directory(o.model)) {
    t.ckpt_dir = o.model;
    t.arch = o.arch.empty() ? checkpoint_arch(o.model) : o.arch;
    if (t.arch.empty()) throw trainkit::config_error(o.model + ": no valid checkpoint to export");
  } else {
    t.arch = o.arch.empty() ? "gpt2" : o.arch;  // llm.c model files hold GPT-2
  }
  flags.refuse_others(t.arch, "--arch");
  return visit_family(model_families{}, t.arch, "--arch", [&]<class Family>() {
    return export_hf_model<Family>(o, t, flags.template of<Family>(), log);
  });
}

inline int run_hf_import(const hf_import_args& o, std::ostream& log) {
  return visit_family(model_families{}, o.arch, "--arch",
                      [&]<class Family>() { return import_hf_model<Family>(o, log); });
}

class export_hf_command final : public command {
 public:
  std::string_view name() const override { return "export-hf"; }
  std::string_view summary() const override {
    return "Write an llm.c model file or a checkpoint of any --arch as a Hugging Face folder";
  }
  void add_options(CLI::App& app) override {
    add_hf_export_options(app, o_);
    app.add_option("--arch", o_.arch,
                   "model family of a checkpoint (default: the one it records): " +
                       model_families::describe())
        ->check(CLI::IsMember(model_families::names()));
    app.add_option("--model", o_.preset,
                   "preset of a checkpoint's --arch, with its shape flags as in training (" +
                       presets_by_family() + ")")
        ->capture_default_str()
        ->check(CLI::IsMember(all_presets()));
    flags_.add_to(app);
  }
  int run(std::ostream& out) override { return run_hf_export(o_, flags_, out); }

 private:
  hf_export_args o_;
  model_family_flags flags_;
};

class import_hf_command final : public command {
 public:
  std::string_view name() const override { return "import-hf"; }
  std::string_view summary() const override {
    return "Read a Hugging Face folder of any --arch into its model file (GPT-2: llm.c file; "
           "Llama: checkpoint)";
  }
  void add_options(CLI::App& app) override {
    add_hf_import_options(app, o_);
    app.add_option("--arch", o_.arch, "model family of the folder: " + model_families::describe())
        ->capture_default_str()
        ->check(CLI::IsMember(model_families::names()));
  }
  int run(std::ostream& out) override { return run_hf_import(o_, out); }

 private:
  hf_import_args o_;
};

}  // namespace gpt_fineweb
