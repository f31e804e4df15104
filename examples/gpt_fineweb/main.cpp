// gpt_fineweb — the flagship example: a program of commands. This file only lists them and hands
// the command line to the one that is named (command.hpp: one interface, one error path).
//
//   (none)     train a model of a registered family (commands/train.hpp; families/registry.hpp)
//   prepare    tokenize text / JSONL into llm.c shards (commands/prepare.hpp)
//   report     explain a run: metrics file or nanoGPT/llm.c/torchtitan log (commands/report.hpp)
//   eval       HellaSwag accuracy of a model file (commands/eval.hpp)
//   export-hf  llm.c model file or checkpoint -> Hugging Face folder (commands/hf_commands.hpp)
//   import-hf  Hugging Face folder -> llm.c model file or checkpoint (commands/hf_commands.hpp)
//   verify     check every checkpoint in a directory (commands/verify.hpp)
// Sampling (`--sample N` without training) is the training command's (commands/sample.hpp).
// The front end: the families' program-facing halves only (families/family.hpp); their models are
// compiled in their own translation units (families/*_cpu.cpp, families/*_cuda.cu).
#define GPT_FINEWEB_FRONT_END 1

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "command.hpp"
#include "commands/eval.hpp"
#include "commands/hf_commands.hpp"
#include "commands/prepare.hpp"
#include "commands/report.hpp"
#include "commands/train.hpp"
#include "commands/verify.hpp"

int main(int argc, char** argv) {
  using namespace gpt_fineweb;
  CLI::App app{
      "gpt_fineweb — train transformer language models with trainkit (CPU reference "
      "composition, or --device cuda)\n"
      "With no subcommand it trains; with no --data it trains on an embedded corpus."};
  app.set_version_flag("--version", std::string("trainkit ") + TRAINKIT_VERSION_STRING);
  std::vector<std::unique_ptr<command>> commands;
  commands.push_back(std::make_unique<train_command>());
  commands.push_back(std::make_unique<prepare_command>());
  commands.push_back(std::make_unique<report_command>());
  commands.push_back(std::make_unique<export_hf_command>());
  commands.push_back(std::make_unique<import_hf_command>());
  commands.push_back(std::make_unique<eval_command>());
  commands.push_back(std::make_unique<verify_command>());
  return run_program(argc, argv, app, commands);
}
