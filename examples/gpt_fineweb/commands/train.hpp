// commands/train.hpp — training, gpt_fineweb's default command (no command word): the flags of
// docs/cli.md (train/options.hpp), --arch and --optimizer with every registered family's own
// flags (families/registry.hpp), --recipe (train/recipes.hpp: fills the flags not given), then
// train/run.hpp's run_train (or, for --sample N alone, the sample command's sampling).
#pragma once

#include <CLI/CLI.hpp>

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "../command.hpp"
#include "../families/registry.hpp"
#include "../train/options.hpp"
#include "../train/recipes.hpp"
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
    app.add_option("--recipe", o_.recipe,
                   "a named configuration, every part overridable by its own flag: speedrun "
                   "(modded-nanogpt-like on --arch llama: Muon and its variants, rates per role, "
                   "value embeddings, U-net skips, logit cap, sliding windows; docs/recipes.md)")
        ->check(CLI::IsMember(recipe_names()));
    model_flags_.add_to(app);
    optimizer_flags_.add_to(app);
    app_ = &app;
  }
  int run(std::ostream& out) override {
    if (app_ && !o_.recipe.empty()) {
      const auto set = apply_recipe(*app_, o_, model_flags_, optimizer_flags_);
      out << "recipe " << o_.recipe << ":";
      for (const std::string& s : set) out << " " << s;
      out << " (flags given on the command line kept)\n";
    }
    return run_train(o_, model_flags_, optimizer_flags_, out);
  }

 private:
  train_options o_;
  model_family_flags model_flags_;
  optimizer_family_flags optimizer_flags_;
  const CLI::App* app_ = nullptr;  // the parsed command line (--recipe asks what was given)
};

}  // namespace gpt_fineweb
