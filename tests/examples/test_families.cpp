// tests/examples/test_families.cpp — gpt_fineweb's family registry
// (examples/gpt_fineweb/families/).
//
// `--arch` / `--optimizer` pick a family by name and the training driver is instantiated for it:
// visit_family must call the family named (not the first, not another), refuse an unknown name
// naming the flag, and each family's own flags must reach that family's slot only. The shipped
// registry keeps the old command lines' meaning: gpt2 and adamw are the defaults. Every flag a
// shipped family adds is parsed the way the training command parses it and shown to set its own
// config field and no other (a flag wired to the wrong field fails here); a family's flag given
// with another family chosen is refused naming it.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "families/registry.hpp"

namespace {

namespace gf = gpt_fineweb;

struct alpha_family {
  static constexpr std::string_view name = "alpha";
  static constexpr std::string_view summary = "first";
  struct flags {
    int width = 1;
  };
  static void add_flags(CLI::App& app, flags& f) { app.add_option("--alpha-width", f.width); }
};

struct beta_family {
  static constexpr std::string_view name = "beta";
  static constexpr std::string_view summary = "second";
  struct flags {
    int width = 2;
  };
  static void add_flags(CLI::App& app, flags& f) { app.add_option("--beta-width", f.width); }
};

struct gamma_family {  // no flags of its own
  static constexpr std::string_view name = "gamma";
  static constexpr std::string_view summary = "third";
  struct flags {};
  static void add_flags(CLI::App&, flags&) {}
};

using test_families = gf::family_list<alpha_family, beta_family, gamma_family>;

template <class Family>
constexpr int index_of() {
  if constexpr (std::is_same_v<Family, alpha_family>) return 0;
  if constexpr (std::is_same_v<Family, beta_family>) return 1;
  return 2;
}

TEST(FamilyRegistry, VisitCallsTheFamilyNamed) {
  const auto visit = [](std::string_view name) {
    return gf::visit_family(test_families{}, name, "--arch",
                            []<class Family>() { return index_of<Family>(); });
  };
  EXPECT_EQ(visit("alpha"), 0);
  EXPECT_EQ(visit("beta"), 1);
  EXPECT_EQ(visit("gamma"), 2);
}

TEST(FamilyRegistry, UnknownNameNamesTheFlag) {
  try {
    gf::visit_family(test_families{}, "delta", "--optimizer", []<class>() { return 0; });
    FAIL() << "no config_error";
  } catch (const trainkit::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("--optimizer delta"), std::string::npos) << e.what();
  }
}

TEST(FamilyRegistry, NamesAndHelpInRegistrationOrder) {
  EXPECT_EQ(test_families::names(), (std::vector<std::string>{"alpha", "beta", "gamma"}));
  EXPECT_EQ(test_families::describe(), "alpha: first; beta: second; gamma: third");
}

TEST(FamilyRegistry, EachFamilysFlagsReachItsSlotOnly) {
  gf::family_flags<test_families> flags;
  CLI::App app;
  flags.add_to(app);
  const char* argv[] = {"prog", "--beta-width", "7"};
  app.parse(3, const_cast<char**>(argv));
  EXPECT_EQ(flags.of<alpha_family>().width, 1);  // untouched default
  EXPECT_EQ(flags.of<beta_family>().width, 7);
}

TEST(FamilyRegistry, ShippedDefaultsKeepTheOldCommandLines) {
  // A command line without --arch / --optimizer trains GPT-2 with AdamW, as before the registry.
  EXPECT_EQ(gf::model_families::names().front(), "gpt2");
  EXPECT_EQ(gf::optimizer_families::names().front(), "adamw");
  const gf::train_options defaults;
  EXPECT_EQ(defaults.arch, "gpt2");
  EXPECT_EQ(defaults.optimizer, "adamw");
  const auto presets = gf::all_presets();
  for (const char* p : {"d2", "d6", "d12", "d24", "d36", "d48"})
    EXPECT_NE(std::find(presets.begin(), presets.end(), p), presets.end()) << p;
  EXPECT_EQ(gf::gpt2_family::config("d12", {}), trainkit::model::gpt2_config::preset("d12"));
}

TEST(FamilyRegistry, AdamwFamilyReadsTheTrainingFlags) {
  gf::train_options o;
  o.beta1 = 0.8;
  o.beta2 = 0.99;
  o.eps = 1e-6;
  o.weight_decay = 0.05;
  const auto c = gf::adamw_family::config(o, {});
  EXPECT_FLOAT_EQ(c.beta1, 0.8f);
  EXPECT_FLOAT_EQ(c.beta2, 0.99f);
  EXPECT_FLOAT_EQ(c.eps, 1e-6f);
  EXPECT_FLOAT_EQ(c.weight_decay, 0.05f);
  o.beta1 = 1.5;  // out of range: the library's validate names the field
  EXPECT_THROW(gf::adamw_family::config(o, {}), trainkit::config_error);
}

// The shipped families' flags parsed from `args` as the training command parses them
// (commands/train.hpp adds both lists to its app).
struct shipped_flags {
  gf::model_family_flags model;
  gf::optimizer_family_flags optimizer;
  CLI::App app;

  explicit shipped_flags(const std::vector<std::string>& args) {
    model.add_to(app);
    optimizer.add_to(app);
    std::vector<const char*> argv{"gpt_fineweb"};
    for (const auto& a : args) argv.push_back(a.c_str());
    app.parse(int(argv.size()), const_cast<char**>(argv.data()));
  }
};

TEST(FamilyRegistry, ShippedFamiliesAreRegisteredWithDefaultsFirst) {
  EXPECT_EQ(gf::model_families::names(), (std::vector<std::string>{"gpt2", "llama"}));
  EXPECT_EQ(gf::optimizer_families::names(), (std::vector<std::string>{"adamw", "muon"}));
  const auto presets = gf::all_presets();
  for (const char* p : {"d20"})  // Llama's own preset is a --model value too
    EXPECT_NE(std::find(presets.begin(), presets.end(), p), presets.end()) << p;
}

TEST(FamilyRegistry, EveryLlamaFlagReachesItsFieldOnly) {
  namespace tm = trainkit::model;
  const tm::llama_config preset = tm::llama_config::preset("d6");  // H=6, KV=3, SwiGLU, untied
  const auto config_of = [](const std::vector<std::string>& args) {
    const auto parsed = std::make_unique<shipped_flags>(args);
    return gf::llama_family::config("d6", parsed->model.of<gf::llama_family>());
  };
  EXPECT_EQ(config_of({}), preset);
  EXPECT_EQ(config_of({"--mlp", "swiglu"}), preset);
  tm::llama_config want = preset;
  want.num_kv_heads = 6;
  EXPECT_EQ(config_of({"--kv-heads", "6"}), want);
  want = preset;
  want.num_kv_heads = 1;
  EXPECT_EQ(config_of({"--kv-heads", "1"}), want);
  want = preset;
  want.mlp = tm::llama_mlp::relu_squared;
  want.hidden_size = 4 * preset.channels;
  EXPECT_EQ(config_of({"--mlp", "relu2"}), want);
  want = preset;
  want.qk_norm = true;
  EXPECT_EQ(config_of({"--qk-norm"}), want);
  want = preset;
  want.tied_embeddings = true;
  EXPECT_EQ(config_of({"--tie-embeddings"}), want);
  // An impossible shape is the library's error, naming the field flag_names.hpp maps.
  EXPECT_THROW(config_of({"--kv-heads", "4"}), trainkit::config_error);
  // The Llama flags leave GPT-2's config alone (gpt2 takes no flags).
  EXPECT_EQ(gf::gpt2_family::config("d6", {}), tm::gpt2_config::preset("d6"));
}

TEST(FamilyRegistry, EveryMuonFlagReachesItsFieldOnly) {
  gf::train_options o;
  o.lr = 0.004;
  const auto config_of = [&](const std::vector<std::string>& args) {
    const auto parsed = std::make_unique<shipped_flags>(args);
    return gf::muon_family::config(o, parsed->optimizer.of<gf::muon_family>());
  };
  trainkit::optim::muon_config want;               // the flags' defaults are the library's
  want.lr_ratio = double(0.02f) / double(0.004f);  // --muon-lr 0.02 over --lr 0.004, set once
  want.adamw = gf::adamw_family::config(o, {});
  EXPECT_EQ(config_of({}), want);
  trainkit::optim::muon_config w = want;
  w.lr_ratio = double(0.03f) / double(0.004f);
  EXPECT_EQ(config_of({"--muon-lr", "0.03"}), w);
  // At the schedule's peak Muon moves at --muon-lr: the mapping docs/cli.md states.
  EXPECT_EQ(float(double(float(o.lr)) * config_of({"--muon-lr", "0.03"}).lr_ratio), 0.03f);
  EXPECT_THROW(config_of({"--muon-lr", "0"}), trainkit::config_error);
  EXPECT_THROW(config_of({"--muon-lr", "nan"}), trainkit::config_error);
  w = want;
  w.momentum = 0.9f;
  EXPECT_EQ(config_of({"--muon-momentum", "0.9"}), w);
  w = want;
  w.ns_steps = 3;
  EXPECT_EQ(config_of({"--muon-ns-steps", "3"}), w);
  EXPECT_THROW(config_of({"--muon-ns-steps", "0"}), trainkit::config_error);
  // The variants (issue 38): each flag its field only.
  w = want;
  w.orthogonalizer = trainkit::optim::muon_orthogonalizer::polar_express;
  EXPECT_EQ(config_of({"--muon-ns", "polar"}), w);
  EXPECT_THROW(config_of({"--muon-ns", "ns7"}), trainkit::config_error);
  EXPECT_THROW(config_of({"--muon-ns", "polar", "--muon-ns-steps", "6"}), trainkit::config_error);
  w = want;
  w.normuon = true;
  EXPECT_EQ(config_of({"--muon-normuon"}), w);
  w.normuon_beta2 = 0.9f;
  EXPECT_EQ(config_of({"--muon-normuon", "--muon-normuon-beta2", "0.9"}), w);
  w = want;
  w.weight_decay = 0.05f;
  EXPECT_EQ(config_of({"--muon-weight-decay", "0.05"}), w);
  w.cautious_weight_decay = true;
  EXPECT_EQ(config_of({"--muon-weight-decay", "0.05", "--muon-cautious-wd"}), w);
  w = want;
  w.momentum_warmup_steps = 300;
  w.momentum_warmup_start = 0.8f;
  EXPECT_EQ(config_of({"--muon-momentum-warmup", "300", "--muon-momentum-start", "0.8"}), w);
  for (const char* reducer : {"mpi", "nccl"}) {  // sharded Muon shards NorMuon's second moment
    o.reducer = reducer;
    w = want;
    w.normuon = true;
    EXPECT_EQ(config_of({"--muon-normuon"}), w) << reducer;
  }
}

TEST(FamilyRegistry, MuonsAdamwHalfIsTheAdamwFamilysConfig) {
  gf::train_options o;
  o.beta1 = 0.8;
  o.beta2 = 0.99;
  o.eps = 1e-6;
  o.weight_decay = 0.05;
  const auto m = gf::muon_family::config(o, {});
  EXPECT_EQ(m.adamw, gf::adamw_family::config(o, {}));
  EXPECT_FLOAT_EQ(m.adamw.beta1, 0.8f);
  EXPECT_FLOAT_EQ(m.adamw.weight_decay, 0.05f);
  o.eps = 0;  // AdamW's own check, naming --eps through adamw_config's field
  EXPECT_THROW(gf::muon_family::config(o, {}), trainkit::config_error);
}

TEST(FamilyRegistry, MuonRefusesAsyncCheckpointsOfItsShardedState) {
  gf::train_options o;
  o.reducer = "mpi";
  o.ckpt_mode = "async";
  try {
    (void)gf::muon_family::config(o, {});
    FAIL() << "no config_error";
  } catch (const trainkit::config_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--ckpt-mode async", 0), 0u) << e.what();
  }
  o.ckpt_mode = "sync";
  EXPECT_NO_THROW((void)gf::muon_family::config(o, {}));
  o.reducer = "single";
  o.ckpt_mode = "async";
  EXPECT_NO_THROW((void)gf::muon_family::config(o, {}));
}

TEST(FamilyRegistry, AnotherFamilysFlagIsRefusedNamingIt) {
  const auto message = [](const std::vector<std::string>& args, std::string_view arch,
                          std::string_view optimizer) -> std::string {
    const auto parsed = std::make_unique<shipped_flags>(args);
    try {
      parsed->model.refuse_others(arch, "--arch");
      parsed->optimizer.refuse_others(optimizer, "--optimizer");
    } catch (const trainkit::config_error& e) {
      return e.what();
    }
    return {};
  };
  EXPECT_EQ(message({"--kv-heads", "2"}, "gpt2", "adamw"),
            "--kv-heads applies to --arch llama, not --arch gpt2");
  EXPECT_EQ(message({"--tie-embeddings"}, "gpt2", "adamw"),
            "--tie-embeddings applies to --arch llama, not --arch gpt2");
  EXPECT_EQ(message({"--muon-ns-steps", "3"}, "llama", "adamw"),
            "--muon-ns-steps applies to --optimizer muon, not --optimizer adamw");
  EXPECT_EQ(message({"--kv-heads", "2", "--qk-norm", "--muon-lr", "0.1"}, "llama", "muon"), "");
  EXPECT_EQ(message({}, "gpt2", "adamw"), "");
}

TEST(FamilyRegistry, APresetOfAnotherFamilyNamesModel) {
  EXPECT_NO_THROW((void)gf::llama_family::config("d20", {}));
  try {
    (void)gf::gpt2_family::config("d20", {});
    FAIL() << "no config_error";
  } catch (const trainkit::config_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--model d20 is not a preset of --arch gpt2", 0), 0u)
        << e.what();
  }
  EXPECT_THROW((void)gf::llama_family::config("d48", {}), trainkit::config_error);
}

}  // namespace
