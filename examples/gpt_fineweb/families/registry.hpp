// families/registry.hpp — the model and optimizer families gpt_fineweb offers (--arch,
// --optimizer). A new family is its own file in this folder (see gpt2.hpp, adamw.hpp and
// docs/writing_a_policy.md), registered here: its #include, and its name in its list. The first
// family of each list is the flag's default. Nothing else in the program names a family: --help,
// the flag checks, the training driver's instantiations for both devices and sampling all go
// through these lists.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "family.hpp"

#include "adamw.hpp"
#include "gpt2.hpp"
#include "llama.hpp"
#include "muon.hpp"

namespace gpt_fineweb {

// ---- registration: the families, in --help order (the first is the default) ----
using model_families = family_list<gpt2_family, llama_family>;
using optimizer_families = family_list<adamw_family, muon_family>;
// ---- end registration ----

/// The flags of every registered family, filled by the training command.
using model_family_flags = family_flags<model_families>;
using optimizer_family_flags = family_flags<optimizer_families>;

/// Every --model value some registered family accepts (CLI11's check; the family then refuses a
/// preset it does not have, naming --model).
inline std::vector<std::string> all_presets() {
  std::vector<std::string> names;
  auto add = [&]<class... Families>(family_list<Families...>) {
    (
        [&] {
          for (std::string_view p : Families::presets)
            if (std::find(names.begin(), names.end(), p) == names.end()) names.emplace_back(p);
        }(),
        ...);
  };
  add(model_families{});
  return names;
}

/// "gpt2: d2 d6 ...; llama: ..." for --model's help.
inline std::string presets_by_family() {
  std::string text;
  auto add = [&]<class... Families>(family_list<Families...>) {
    (
        [&] {
          text += (text.empty() ? "" : "; ") + std::string(Families::name) + ":";
          for (std::string_view p : Families::presets) text += " " + std::string(p);
        }(),
        ...);
  };
  add(model_families{});
  return text;
}

}  // namespace gpt_fineweb
