// tests/examples/test_families.cpp — gpt_fineweb's family registry
// (examples/gpt_fineweb/families/).
//
// `--arch` / `--optimizer` pick a family by name and the training driver is instantiated for it:
// visit_family must call the family named (not the first, not another), refuse an unknown name
// naming the flag, and each family's own flags must reach that family's slot only. The shipped
// registry keeps the old command lines' meaning: gpt2 and adamw are the defaults.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <algorithm>
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

}  // namespace
