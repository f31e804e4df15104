// commands/hf.hpp — gpt_fineweb's Hugging Face commands: `export-hf` turns an llm.c model file
// (what --export writes) into a GPT2LMHeadModel folder with GPT-2's tokenizer files; `import-hf`
// turns such a folder (a GPT-2 checkpoint from the Hub, or an export) into an llm.c model file that
// --init-from starts training from. The conversions are trainkit/model/gpt2/hf.hpp's; errors
// propagate as trainkit exceptions, which the program reports as one line and exit code 2
// (command.hpp). Training's --export-hf and --init-from-hf use the same conversions
// (families/gpt2.hpp).
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <trainkit/model/gpt2/hf.hpp>
#include <trainkit/model/gpt2/llmc_file.hpp>
#include <trainkit/tokenizer/vocab_files.hpp>

#include "../command.hpp"

namespace gpt_fineweb {

struct hf_export_args {
  std::string model;  // llm.c model file
  std::string out;    // folder to write
  std::string dtype = "f32";
  std::string vocab;  // GPT-2 vocabulary directory (default: $TRAINKIT_GPT2_VOCAB / bundled)
};

struct hf_import_args {
  std::string dir;  // Hugging Face folder
  std::string out;  // llm.c model file to write
  std::string dtype = "f32";
};

inline void add_hf_export_options(CLI::App& sub, hf_export_args& o) {
  sub.add_option("model", o.model, "llm.c model file (written by --export)")->required();
  sub.add_option("out", o.out, "Folder to write (model.safetensors, config.json, tokenizer)")
      ->required();
  sub.add_option("--dtype", o.dtype, "Stored weight type")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16"}));
  sub.add_option("--vocab", o.vocab,
                 "Directory with GPT-2 encoder.json + vocab.bpe copied as the tokenizer files "
                 "(default: $TRAINKIT_GPT2_VOCAB, else the bundled one)");
}

inline void add_hf_import_options(CLI::App& sub, hf_import_args& o) {
  sub.add_option("dir", o.dir, "Hugging Face GPT-2 folder (config.json + model.safetensors)")
      ->required();
  sub.add_option("out", o.out, "llm.c model file to write (for --init-from)")->required();
  sub.add_option("--dtype", o.dtype, "llm.c file type: f32 (version 3) or bf16 (version 5)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16"}));
}

/// What export-hf's and training's --dtype / --vocab flags ask of the writer.
inline trainkit::model::hf_export_options hf_export_options_of(const std::string& dtype,
                                                               const std::string& vocab) {
  trainkit::model::hf_export_options options;
  options.dtype = dtype == "bf16" ? trainkit::io::safetensors_dtype::bf16
                                  : trainkit::io::safetensors_dtype::f32;
  options.vocab_dir = trainkit::tokenizer::resolve_vocab_dir(vocab);
  return options;
}

inline int run_hf_export(const hf_export_args& o, std::ostream& log) {
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

inline int run_hf_import(const hf_import_args& o, std::ostream& log) {
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

class export_hf_command final : public command {
 public:
  std::string_view name() const override { return "export-hf"; }
  std::string_view summary() const override {
    return "Write an llm.c model file as a Hugging Face GPT-2 folder";
  }
  void add_options(CLI::App& app) override { add_hf_export_options(app, o_); }
  int run(std::ostream& out) override { return run_hf_export(o_, out); }

 private:
  hf_export_args o_;
};

class import_hf_command final : public command {
 public:
  std::string_view name() const override { return "import-hf"; }
  std::string_view summary() const override {
    return "Read a Hugging Face GPT-2 folder into an llm.c model file";
  }
  void add_options(CLI::App& app) override { add_hf_import_options(app, o_); }
  int run(std::ostream& out) override { return run_hf_import(o_, out); }

 private:
  hf_import_args o_;
};

}  // namespace gpt_fineweb
