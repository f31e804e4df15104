// commands/hf.hpp — the GPT-2 halves of gpt_fineweb's Hugging Face commands and what the
// families' --export-hf shares with them: `export-hf` of an llm.c model file (what --export
// writes) into a GPT2LMHeadModel folder with GPT-2's tokenizer files; `import-hf` of such a folder
// (a GPT-2 checkpoint from the Hub, or an export) into an llm.c model file that --init-from
// starts training from. The conversions are trainkit/model/gpt2/hf.hpp's; errors propagate as
// trainkit exceptions, which the program reports as one line and exit code 2 (command.hpp).
// Training's --export-hf and --init-from-hf use the same conversions (families/gpt2.hpp). The
// commands themselves, for every registered family (checkpoints of any --arch), are
// commands/hf_commands.hpp: this header is included by the family files and so names no family.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <trainkit/model/gpt2/hf.hpp>
#include <trainkit/model/gpt2/llmc_file.hpp>
#include <trainkit/tokenizer/vocab_files.hpp>

#include "hf_args.hpp"

namespace gpt_fineweb {

/// What export-hf's and training's --dtype / --vocab flags ask of the writer.
inline trainkit::model::hf_export_options hf_export_options_of(const std::string& dtype,
                                                               const std::string& vocab) {
  trainkit::model::hf_export_options options;
  options.dtype = dtype == "bf16" ? trainkit::io::safetensors_dtype::bf16
                                  : trainkit::io::safetensors_dtype::f32;
  options.vocab_dir = trainkit::tokenizer::resolve_vocab_dir(vocab);
  return options;
}

/// export-hf of an llm.c model file (GPT-2).
inline int run_hf_export_llmc(const hf_export_args& o, std::ostream& log) {
  namespace tk = trainkit;
  const tk::model::gpt2_config cfg = tk::model::read_llmc_header(o.model);
  std::vector<float> params(cfg.num_parameters());
  tk::model::read_llmc_parameters<float>(o.model, cfg, params);
  tk::model::write_hf_gpt2<float>(o.out, cfg, params, hf_export_options_of(o.dtype, o.vocab));
  log << "wrote " << o.out << " (GPT2LMHeadModel " << cfg.to_string() << ", " << o.dtype << ")\n";
  return 0;
}

/// Training's --export-hf DIR [--export-hf-dtype]: the trained CPU model as a Hugging Face folder.
template <class Model>
void export_hf_after_training(const std::string& dir, const std::string& dtype,
                              const std::string& vocab, const Model& model, std::ostream& log) {
  trainkit::model::save_hf_gpt2(dir, model, hf_export_options_of(dtype, vocab));
  log << "exported Hugging Face folder " << dir << " (GPT2LMHeadModel "
      << model.config().to_string() << ", " << dtype << ")\n";
}

/// import-hf of a GPT-2 folder into an llm.c model file.
inline int run_hf_import_llmc(const hf_import_args& o, std::ostream& log) {
  namespace tk = trainkit;
  const tk::model::gpt2_config cfg = tk::model::read_hf_gpt2_config(o.dir);
  std::vector<float> params(cfg.num_parameters());
  tk::model::read_hf_gpt2_parameters<float>(o.dir, cfg, params);
  tk::model::write_llmc_parameters<float>(
      o.out, cfg, params,
      o.dtype == "bf16" ? tk::model::llmc_version_bf16 : tk::model::llmc_version_fp32);
  log << "wrote " << o.out << " (" << cfg.to_string() << ")\n";
  return 0;
}

}  // namespace gpt_fineweb
