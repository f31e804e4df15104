// train/host_entry.hpp — the definitions of the CPU entry points of train/entry.hpp, and
// GPT_FINEWEB_HOST_COMPOSITION(Family), which instantiates all of them for one model family. Each
// family's CPU translation unit (families/<name>_cpu.cpp) includes this header and expands the
// macro once: that unit is the family's whole CPU composition (every optimizer family, reducer
// and checkpointer of train/cpu.hpp, sampling, eval and the Hugging Face conversions), compiled
// apart from the other families' and from main.cpp.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>

#include <trainkit/core/error.hpp>
#include <trainkit/model/gpt2/llmc_file.hpp>

#include "../commands/hf.hpp"
#include "../commands/model_source.hpp"
#include "../commands/sample.hpp"
#include "../families/registry.hpp"
#include "../hellaswag.hpp"
#include "cpu.hpp"
#include "entry.hpp"
#include "host_hot_code.hpp"
#include "options.hpp"

namespace gpt_fineweb {

/// Whether the family's CPU model is written as an llm.c model file (GPT-2's layout).
template <class Family>
concept has_llmc_files = requires(const typename host_policies<Family>::model_type& m,
                                  const std::filesystem::path& p) {
  trainkit::model::save_llmc_model(p, m);
};

template <class ModelFamily>
int train_on_cpu(const train_options& o, const typename ModelFamily::flags& model_flags,
                 const optimizer_family_flags& optimizer_flags) {
  return visit_family(optimizer_families{}, o.optimizer, "--optimizer",
                      [&]<class OptimizerFamily>() {
                        return run_train_cpu<ModelFamily, OptimizerFamily>(
                            o, model_flags, optimizer_flags.template of<OptimizerFamily>());
                      });
}

template <class ModelFamily>
int sample_model(const train_options& o, const typename ModelFamily::flags& flags,
                 std::ostream& out) {
  return sample_from<ModelFamily>(o, flags, out);
}

template <class ModelFamily>
int eval_model(const train_options& o, const typename ModelFamily::flags& flags,
               const hellaswag_scorer& score, std::ostream& out) {
  auto model = load_family_model<ModelFamily>(o, flags, "eval");
  out << "hellaswag: " << format_hellaswag(score(model)) << "\n";
  return 0;
}

template <class ModelFamily>
int export_hf_model(const hf_export_args& a, const train_options& o,
                    const typename ModelFamily::flags& flags, std::ostream& out) {
  if (o.ckpt_dir.empty()) {  // an llm.c model file
    if constexpr (has_llmc_files<ModelFamily>) {
      return run_hf_export_llmc(a, out);
    } else {
      throw trainkit::config_error("--arch " + o.arch + ": " + a.model +
                                   " is an llm.c model file, which holds GPT-2 only; give the "
                                   "family's checkpoint directory");
    }
  }
  auto model = load_family_model<ModelFamily>(o, flags, "export-hf");
  host_policies<ModelFamily>(flags).export_model(o, model, out);
  return 0;
}

template <class ModelFamily>
int import_hf_model(const hf_import_args& a, std::ostream& out) {
  if constexpr (has_llmc_files<ModelFamily>) {
    return run_hf_import_llmc(a, out);
  } else {
    if (a.dtype != "f32")
      throw trainkit::config_error("--dtype " + a.dtype + ": --arch " + a.arch +
                                   " is imported as a checkpoint of the CPU model's fp32 "
                                   "tensors; leave --dtype out");
    train_options t;
    t.arch = a.arch;
    t.init_from_hf = a.dir;
    auto model = load_family_model<ModelFamily>(t, typename ModelFamily::flags{}, "import-hf");
    write_model_checkpoint<ModelFamily>(a.out, model, "import-hf " + a.dir);
    out << "wrote " << a.out << " (model-only checkpoint of --arch " << a.arch << " "
        << model.config().to_string()
        << "; --sample --ckpt-dir, eval --ckpt-dir and export-hf read it with the --model and "
           "shape flags that make this shape)\n";
    return 0;
  }
}

}  // namespace gpt_fineweb

/// Every CPU entry point of train/entry.hpp for `Family` (a model family registered in
/// families/registry.hpp), instantiated here: one line in the family's CPU translation unit.
/// Model and Block name the family's CPU model template and block policy, whose hot code the
/// family's model unit compiles (train/host_hot_code.hpp): declared extern here.
#define GPT_FINEWEB_HOST_COMPOSITION(Family, Model, Block)                                      \
  GPT_FINEWEB_HOST_HOT_CODE(extern, Model, Block)                                               \
  GPT_FINEWEB_HOST_OPTIMIZERS(extern)                                                           \
  namespace gpt_fineweb {                                                                       \
  template int train_on_cpu<Family>(const train_options&, const Family::flags&,                 \
                                    const optimizer_family_flags&);                             \
  template int sample_model<Family>(const train_options&, const Family::flags&, std::ostream&); \
  template int eval_model<Family>(const train_options&, const Family::flags&,                   \
                                  const hellaswag_scorer&, std::ostream&);                      \
  template int export_hf_model<Family>(const hf_export_args&, const train_options&,             \
                                       const Family::flags&, std::ostream&);                    \
  template int import_hf_model<Family>(const hf_import_args&, std::ostream&);                   \
  }
