// tests/examples/test_recipe_flags.cpp — gpt_fineweb's speedrun-recipe flags
// (examples/gpt_fineweb/families/llama.hpp, train/recipes.hpp).
//
// The command line is parsed as the training command parses it (train options, --arch,
// --optimizer, every family's flags, --recipe), then:
//   - each Llama recipe flag sets its own llama_config::recipe field and no other;
//   - --recipe speedrun sets what it promises, only where the flag was not given (an explicit
//     flag wins, also one that turns a part off), and refuses an explicit --arch gpt2;
//   - the library's messages about the recipe's fields name the flags (flag_names.hpp).
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "families/registry.hpp"
#include "flag_names.hpp"
#include "train/options.hpp"
#include "train/recipes.hpp"
#include "trainkit/recipe/speedrun.hpp"

namespace {

namespace gf = gpt_fineweb;
namespace tk = trainkit;

struct parsed {
  gf::train_options o;
  gf::model_family_flags model;
  gf::optimizer_family_flags optimizer;
  std::vector<std::string> set;  // what the recipe set
};

// Parses `args` as commands/train.hpp does and applies the recipe.
void parse(parsed& p, std::vector<std::string> args) {
  CLI::App app;
  gf::add_train_options(app, p.o);
  app.add_option("--arch", p.o.arch);
  app.add_option("--model", p.o.model);
  app.add_option("--optimizer", p.o.optimizer);
  app.add_option("--recipe", p.o.recipe)->check(CLI::IsMember(gf::recipe_names()));
  p.model.add_to(app);
  p.optimizer.add_to(app);
  args.insert(args.begin(), "gpt_fineweb");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  app.parse(int(argv.size()), argv.data());
  p.set = gf::apply_recipe(app, p.o, p.model, p.optimizer);
}

tk::model::llama_config llama_of(const parsed& p) {
  return gf::llama_family::config(p.o.model, p.model.of<gf::llama_family>());
}

TEST(RecipeFlags, EachLlamaFlagSetsItsField) {
  const tk::model::llama_config base = tk::model::llama_config::preset("d6");
  struct one {
    std::vector<std::string> args;
    void (*expect)(tk::model::llama_config&);  // undoes the field the flag set, or fails
  };
  const std::vector<one> cases{
      {{"--value-embeds", "2"},
       [](tk::model::llama_config& c) {
         EXPECT_EQ(c.recipe.value_embeddings, 2);
         c.recipe.value_embeddings = 0;
       }},
      {{"--unet"},
       [](tk::model::llama_config& c) {
         EXPECT_TRUE(c.recipe.unet_skips);
         c.recipe.unet_skips = false;
       }},
      {{"--logit-cap", "30"},
       [](tk::model::llama_config& c) {
         EXPECT_EQ(c.recipe.logit_cap, 30.0f);
         c.recipe.logit_cap = 0;
       }},
      {{"--zero-init-proj"},
       [](tk::model::llama_config& c) {
         EXPECT_TRUE(c.recipe.zero_init_projections);
         c.recipe.zero_init_projections = false;
       }},
      {{"--window-short", "128"},
       [](tk::model::llama_config& c) {
         EXPECT_EQ(c.recipe.windows.short_window, 128);
         EXPECT_EQ(c.recipe.windows.long_window, c.max_seq_len);  // the default long window
         c.recipe.windows = {};
       }},
      {{"--window-short", "64", "--window-long", "512", "--window-pattern", "SSL",
        "--window-schedule", "128:300"},
       [](tk::model::llama_config& c) {
         const auto& w = c.recipe.windows;
         EXPECT_EQ(w.short_window, 64);
         EXPECT_EQ(w.long_window, 512);
         EXPECT_EQ(w.pattern, "SSL");
         EXPECT_EQ(w.start, 128);
         EXPECT_EQ(w.grow_steps, 300);
         c.recipe.windows = {};
       }},
  };
  for (const one& k : cases) {
    parsed p;
    std::vector<std::string> args{"--arch", "llama", "--model", "d6"};
    args.insert(args.end(), k.args.begin(), k.args.end());
    parse(p, args);
    tk::model::llama_config c = llama_of(p);
    k.expect(c);
    EXPECT_EQ(c, base) << k.args.front() << " set another field";
  }
}

TEST(RecipeFlags, BadWindowFlagsNameTheFlag) {
  auto message = [](std::vector<std::string> args) -> std::string {
    parsed p;
    args.insert(args.begin(), {"--arch", "llama"});
    parse(p, args);
    try {
      llama_of(p);
    } catch (const tk::config_error& e) {
      return gf::name_flags(e.what());
    }
    return "";
  };
  EXPECT_NE(message({"--window-long", "64"}).find("--window-long needs --window-short"),
            std::string::npos);
  EXPECT_NE(message({"--window-short", "8", "--window-schedule", "12"}).find("--window-schedule"),
            std::string::npos);
  EXPECT_NE(message({"--window-short", "8", "--window-schedule", "a:3"}).find("--window-schedule"),
            std::string::npos);
  EXPECT_NE(message({"--window-short", "64", "--window-long", "32"})
                .find("--window-long must be >= --window-short"),
            std::string::npos);
  EXPECT_NE(message({"--window-short", "8", "--window-pattern", "SXL"}).find("--window-pattern"),
            std::string::npos);
  EXPECT_NE(message({"--value-embeds", "2"}).find("--value-embeds must be in [0, num_layers/2]"),
            std::string::npos);  // d2: 2 layers
  EXPECT_NE(message({"--logit-cap", "-1"}).find("--logit-cap must be finite"), std::string::npos);
}

TEST(RecipeFlags, SpeedrunSetsTheRecipe) {
  parsed p;
  parse(p, {"--recipe", "speedrun", "--model", "d6", "--seq", "256", "--steps", "600", "--batch",
            "4", "--total-batch-tokens", "4096"});
  EXPECT_EQ(p.o.arch, "llama");
  EXPECT_EQ(p.o.optimizer, "muon");
  const tk::model::llama_config c = llama_of(p);
  EXPECT_EQ(c.mlp, tk::model::llama_mlp::relu_squared);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.recipe.value_embeddings, 3);
  EXPECT_TRUE(c.recipe.unet_skips);
  EXPECT_EQ(c.recipe.logit_cap, 15.0f);
  EXPECT_TRUE(c.recipe.zero_init_projections);
  EXPECT_EQ(c.recipe.windows.short_window, 128);
  EXPECT_EQ(c.recipe.windows.long_window, 256);
  EXPECT_EQ(c.recipe.windows.start, 128);
  EXPECT_EQ(c.recipe.windows.grow_steps, 600);
  const auto m = gf::muon_family::config(p.o, p.optimizer.of<gf::muon_family>());
  EXPECT_EQ(m.orthogonalizer, tk::optim::muon_orthogonalizer::polar_express);
  EXPECT_TRUE(m.normuon);
  EXPECT_TRUE(m.cautious_weight_decay);
  EXPECT_EQ(m.momentum_warmup_steps, 300);
  EXPECT_FLOAT_EQ(m.momentum_warmup_start, 0.85f);
  EXPECT_DOUBLE_EQ(m.lr_ratio, double(0.05f) / double(0.008f));
  EXPECT_FLOAT_EQ(m.adamw.beta1, 0.8f);
  EXPECT_FLOAT_EQ(m.adamw.eps, 1e-10f);
  EXPECT_FLOAT_EQ(m.adamw.weight_decay, 0.0f);
  EXPECT_FLOAT_EQ(m.adamw.lr_scales.embedding, 75.0f);
  EXPECT_FLOAT_EQ(m.adamw.lr_scales.norm, 5.0f);
  EXPECT_EQ(p.o.schedule, "wsd");
  EXPECT_EQ(p.o.warmup, 0);
  EXPECT_EQ(p.o.batch_ramp_tokens, 4u * 256u);
  EXPECT_EQ(p.o.batch_ramp_steps, 200);
  // What it set is printed as flags.
  EXPECT_NE(std::find(p.set.begin(), p.set.end(), "--logit-cap 15"), p.set.end());
  // d2 has room for one table; without accumulation there is no ramp.
  parsed small;
  parse(small, {"--recipe", "speedrun"});
  EXPECT_EQ(llama_of(small).recipe.value_embeddings, 1);
  EXPECT_EQ(small.o.batch_ramp_tokens, 0u);
}

// The program's --recipe speedrun is the library's trainkit::recipe::speedrun, field for field
// (the model, Muon with its AdamW half, the schedule, the batch ramp), at the default rate and at
// an explicit --lr (the rates per role follow it).
TEST(RecipeFlags, ProgramIsTheLibrarysDefinition) {
  for (const char* lr : {"", "0.002"}) {
    parsed p;
    std::vector<std::string> args{"--recipe",
                                  "speedrun",
                                  "--model",
                                  "d6",
                                  "--seq",
                                  "256",
                                  "--steps",
                                  "600",
                                  "--batch",
                                  "4",
                                  "--total-batch-tokens",
                                  "4096"};
    if (*lr) args.insert(args.end(), {"--lr", lr});
    parse(p, args);
    const double peak = *lr ? 0.002 : tk::recipe::speedrun_lr;
    const auto s =
        tk::recipe::speedrun(tk::model::llama_config::preset("d6"), 256, 600, peak, 4096, 4 * 256);
    EXPECT_EQ(llama_of(p), s.model) << lr;
    EXPECT_EQ(gf::muon_family::config(p.o, p.optimizer.of<gf::muon_family>()), s.muon) << lr;
    EXPECT_EQ(p.o.lr, s.lr);
    EXPECT_EQ(p.o.schedule, tk::optim::schedule_kind_name(s.schedule));
    EXPECT_EQ(p.o.warmup, s.warmup_steps);
    EXPECT_EQ(float(p.o.final_lr_frac), s.final_lr_frac);
    EXPECT_EQ(p.o.batch_ramp_tokens, s.batch_ramp.start_tokens);
    EXPECT_EQ(p.o.batch_ramp_steps, s.batch_ramp.steps);
  }
}

TEST(RecipeFlags, AnExplicitFlagWins) {
  parsed p;
  parse(p, {"--recipe", "speedrun", "--logit-cap", "0", "--window-short", "0", "--mlp", "swiglu",
            "--lr", "0.001", "--muon-ns", "ns5", "--optimizer", "adamw", "--arch", "llama"});
  const tk::model::llama_config c = llama_of(p);
  EXPECT_EQ(c.recipe.logit_cap, 0.0f);
  EXPECT_FALSE(c.recipe.windows.on());
  EXPECT_EQ(c.mlp, tk::model::llama_mlp::swiglu);
  EXPECT_TRUE(c.recipe.unet_skips);  // the rest of the recipe stays
  EXPECT_DOUBLE_EQ(p.o.lr, 0.001);
  EXPECT_EQ(p.o.optimizer, "adamw");
  for (const std::string& s : p.set) {
    EXPECT_EQ(s.rfind("--logit-cap", 0), std::string::npos) << s;
    EXPECT_EQ(s.rfind("--window", 0), std::string::npos) << s;
    EXPECT_EQ(s.rfind("--lr ", 0), std::string::npos) << s;
  }
}

TEST(RecipeFlags, SpeedrunRefusesGpt2) {
  parsed p;
  try {
    parse(p, {"--recipe", "speedrun", "--arch", "gpt2"});
    FAIL() << "no config_error";
  } catch (const tk::config_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--recipe speedrun"), std::string::npos) << what;
    EXPECT_NE(what.find("--arch gpt2"), std::string::npos) << what;
  }
  parsed none;
  parse(none, {"--arch", "gpt2"});  // no recipe: nothing set
  EXPECT_TRUE(none.set.empty());
  EXPECT_EQ(none.o.arch, "gpt2");
}

}  // namespace
