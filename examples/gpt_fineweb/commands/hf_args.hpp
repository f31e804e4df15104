// commands/hf_args.hpp — the arguments of `export-hf` and `import-hf` and their options: what
// the program's front end (main.cpp: no model, no Eigen) needs to parse them. The conversions are
// commands/hf.hpp's, run in the families' own translation units (train/entry.hpp).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace gpt_fineweb {

struct hf_export_args {
  std::string model;  // llm.c model file, or a checkpoint directory (any --arch)
  std::string out;    // folder to write
  std::string dtype = "f32";
  std::string vocab;  // GPT-2 vocabulary directory (default: $TRAINKIT_GPT2_VOCAB / bundled)
  std::string arch;   // empty: gpt2 for a file, the checkpoint's recorded --arch for a directory
  std::string preset = "d2";  // --model: a checkpoint's shape, with the family's flags
};

struct hf_import_args {
  std::string dir;  // Hugging Face folder
  std::string out;  // llm.c model file (gpt2) or checkpoint directory (llama) to write
  std::string dtype = "f32";
  std::string arch = "gpt2";
};

inline void add_hf_export_options(CLI::App& sub, hf_export_args& o) {
  sub.add_option("model", o.model,
                 "llm.c model file (written by --export), or a checkpoint directory of any "
                 "--arch (--ckpt-dir of training, or import-hf's output)")
      ->required();
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
  sub.add_option("dir", o.dir,
                 "Hugging Face folder of the --arch family (config.json + model.safetensors)")
      ->required();
  sub.add_option("out", o.out,
                 "What to write: --arch gpt2 an llm.c model file (for --init-from); a family "
                 "without llm.c files (llama) a model-only checkpoint directory (for --sample "
                 "--ckpt-dir, eval --ckpt-dir, export-hf)")
      ->required();
  sub.add_option("--dtype", o.dtype, "llm.c file type: f32 (version 3) or bf16 (version 5)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16"}));
}

}  // namespace gpt_fineweb
