// commands/train.hpp — training, gpt_fineweb's default command (no command word): the flags of
// docs/cli.md (train/options.hpp), --arch and --optimizer with every registered family's own
// flags (families/registry.hpp), then train/run.hpp's run_train (or, for --sample N alone, the
// sample command's sampling).
#pragma once

#include <CLI/CLI.hpp>

#include <ostream>
#include <string>
#include <string_view>

#include "../command.hpp"
#include "../families/registry.hpp"
#include "../train/options.hpp"
#include "../train/run.hpp"

namespace gpt_fineweb {

class train_command final : public command {
 public:
  std::string_view name() const override { return {}; }
  std::string_view summary() const override {
    return "Train a model (the default: no command word)";
  }
  void add_options(CLI::App& app) override {
    add_train_options(app, o_);
    app.add_option("--arch", o_.arch,
                   "model family: " + model_families::describe() + " (default " +
                       model_families::names().front() + ")")
        ->check(CLI::IsMember(model_families::names()));
    app.add_option("--model", o_.model, "preset of the --arch family (" + presets_by_family() + ")")
        ->check(CLI::IsMember(all_presets()));
    app.add_option("--optimizer", o_.optimizer,
                   "optimizer family: " + optimizer_families::describe() + " (default " +
                       optimizer_families::names().front() + ")")
        ->check(CLI::IsMember(optimizer_families::names()));
    model_flags_.add_to(app);
    optimizer_flags_.add_to(app);
  }
  int run(std::ostream& out) override { return run_train(o_, model_flags_, optimizer_flags_, out); }

 private:
  train_options o_;
  model_family_flags model_flags_;
  optimizer_family_flags optimizer_flags_;
};

}  // namespace gpt_fineweb
