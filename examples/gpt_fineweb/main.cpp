// gpt_fineweb — the flagship example: a program of commands. This file only lists them and hands
// the command line to the one that is named (command.hpp: one interface, one error path).
//
//   (none)     train a model of a registered family (commands/train.hpp; families/registry.hpp)
//   prepare    tokenize text / JSONL into llm.c shards (commands/prepare.hpp)
//   report     summarise a metrics file (commands/report.hpp)
//   eval       HellaSwag accuracy of a model file (commands/eval.hpp)
//   export-hf  llm.c model file -> Hugging Face folder (commands/hf.hpp)
//   import-hf  Hugging Face folder -> llm.c model file (commands/hf.hpp)
//   verify     check every checkpoint in a directory (commands/verify.hpp)
// Sampling (`--sample N` without training) is the training command's (commands/sample.hpp).
#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "command.hpp"
#include "commands/eval.hpp"
#include "commands/hf.hpp"
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
