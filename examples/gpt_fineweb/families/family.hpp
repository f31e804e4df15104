// families/family.hpp — what a model family and an optimizer family bring to gpt_fineweb, and the
// lists they are registered in (families/registry.hpp).
//
// A family is a plain struct with what every build of the program may see — its `--arch` or
// `--optimizer` name, its config type and presets, its extra flags — plus its device policies as
// specialisations of `host_policies<Family>` (the CPU composition: Eigen) and
// `cuda_policies<Family>` (the CUDA one: nvcc). A family's file defines the host specialisation
// only outside nvcc and the CUDA one only under it, so the CUDA units see no Eigen and the g++
// units no CUDA model; each unit names only the specialisations it defined. The program's front
// end (main.cpp) defines GPT_FINEWEB_FRONT_END and sees neither half: it reaches a family's
// models only through train/entry.hpp's entry points, defined in the family's own translation
// units (families/<name>_cpu.cpp, families/<name>_cuda.cu). Those define GPT_FINEWEB_FAMILY_UNIT
// and GPT_FINEWEB_UNIT_<name>, and a model family's file compiles its device halves there only
// for its own unit (every optimizer family's halves are in every unit), so an edit to one family's
// model recompiles that family's units and nothing else. The training driver
// (train/driver.hpp) is a template on the model family and the optimizer family; `visit_family`
// turns the `--arch` / `--optimizer` string into that template argument. How to add one:
// docs/writing_a_policy.md.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <trainkit/core/error.hpp>

namespace gpt_fineweb {

struct train_options;

/// The CPU policies of a family (model: its Eigen model type and files; optimizer: its host
/// optimizer types). Specialised in the family's file outside nvcc; see gpt2.hpp and adamw.hpp.
template <class Family>
struct host_policies;

/// The CUDA policies of a family. Specialised in the family's file under nvcc only.
template <class Family>
struct cuda_policies;

/// A family with a CUDA half (a cuda_policies specialisation); train/cuda_entry.cuh refuses
/// --device cuda, naming --arch or --optimizer, for one without.
template <class Family>
concept has_cuda_policies = requires {
  typename cuda_policies<Family>::is_defined;
};

/// A model family: the program-facing half, compiled by every unit. Requires:
///  - `name`: its `--arch` value; `summary`: one line for `--help`;
///  - `config_type` with `max_seq_len`, `vocab_size` and `to_string()` (stored as the
///    checkpoints' meta["model"]);
///  - `presets`: the `--model` values it accepts; `config(preset, flags)`: the shape a preset and
///    the family's flags name (config_error naming --model for a preset it does not have);
///  - `flags` (a struct, default-constructible) and `add_flags(CLI::App&, flags&)`: its extra
///    flags, added to the training command (none: an empty struct and an empty function).
template <class F>
concept model_family = requires(const std::string& preset, const typename F::flags& flags,
                                CLI::App& app, typename F::flags& mutable_flags,
                                const typename F::config_type& cfg) {
  { F::name } -> std::convertible_to<std::string_view>;
  { F::summary } -> std::convertible_to<std::string_view>;
  { F::presets.size() } -> std::convertible_to<std::size_t>;
  { F::config(preset, flags) } -> std::same_as<typename F::config_type>;
  { F::add_flags(app, mutable_flags) } -> std::same_as<void>;
  { cfg.max_seq_len } -> std::convertible_to<int>;
  { cfg.vocab_size } -> std::convertible_to<int>;
  { cfg.to_string() } -> std::convertible_to<std::string>;
};

/// An optimizer family: the program-facing half. Requires:
///  - `name`: its `--optimizer` value; `summary`: one line for `--help`;
///  - `config_type` and `config(train_options, flags)`: its settings from the flags (the AdamW
///    flags --beta1 ... are the training command's own; a family adds what it needs), validated;
///  - `flags` and `add_flags(CLI::App&, flags&)`, as for a model family.
template <class F>
concept optimizer_family = requires(const train_options& o, const typename F::flags& flags,
                                    CLI::App& app, typename F::flags& mutable_flags) {
  { F::name } -> std::convertible_to<std::string_view>;
  { F::summary } -> std::convertible_to<std::string_view>;
  { F::config(o, flags) } -> std::same_as<typename F::config_type>;
  { F::add_flags(app, mutable_flags) } -> std::same_as<void>;
};

/// The registered families of one kind, in `--help` order (the first is the default).
template <class... Families>
struct family_list {
  static_assert(sizeof...(Families) > 0, "register at least one family");

  static std::vector<std::string> names() { return {std::string(Families::name)...}; }

  /// "gpt2 (GPT-2: ...), llama (...)" for --help.
  static std::string describe() {
    std::string text;
    ((text += (text.empty() ? "" : "; ") + std::string(Families::name) + ": " +
              std::string(Families::summary)),
     ...);
    return text;
  }
};

/// Calls `visit.template operator()<Family>()` for the family of `List` named `name` and returns
/// its exit code; config_error naming `flag` when none is (CLI11 checks the value first, so this
/// is the library-use path).
template <class... Families, class Visit>
int visit_family(family_list<Families...>, std::string_view name, std::string_view flag,
                 Visit&& visit) {
  int rc = 0;
  bool found = false;
  ((!found && Families::name == name ? (found = true, rc = visit.template operator()<Families>())
                                     : 0),
   ...);
  if (!found)
    throw trainkit::config_error(std::string(flag) + " " + std::string(name) +
                                 ": no such family in this program");
  return rc;
}

/// Throws config_error naming --model when `preset` is not one of Family's presets (the --model
/// values are every family's, so CLI11 lets another family's preset through).
template <class Family>
void require_preset(std::string_view preset) {
  if (std::find(Family::presets.begin(), Family::presets.end(), preset) != Family::presets.end())
    return;
  std::string message = "--model ";
  message.append(preset).append(" is not a preset of --arch ").append(Family::name);
  message += " (its presets:";
  for (std::string_view p : Family::presets) message.append(" ").append(p);
  throw trainkit::config_error(message + ")");
}

/// Every family's extra flags, one member per family (inherited, so an empty struct costs
/// nothing and two families may use the same flags type).
template <class Family>
struct flags_slot {
  typename Family::flags value{};
};

template <class List>
struct family_flags;

template <class... Families>
struct family_flags<family_list<Families...>> : flags_slot<Families>... {
  /// Adds every family's flags to `app` and remembers which family each option belongs to (the
  /// options stay owned by `app`, which must outlive this object's checks).
  void add_to(CLI::App& app) { (add_family<Families>(app), ...); }
  template <class Family>
  const typename Family::flags& of() const {
    return static_cast<const flags_slot<Family>&>(*this).value;
  }

  /// Throws config_error naming the first flag given on the command line that belongs to a
  /// family other than `selected` (`--kv-heads applies to --arch llama, not --arch gpt2`): a
  /// flag the run would ignore is refused, never dropped. `flag` is "--arch" or "--optimizer".
  void refuse_others(std::string_view selected, std::string_view flag) const {
    for (const owned_option& o : options_)
      if (o.family != selected && o.option->count() > 0)
        throw trainkit::config_error(o.option->get_name() + " applies to " + std::string(flag) +
                                     " " + std::string(o.family) + ", not " + std::string(flag) +
                                     " " + std::string(selected));
  }

 private:
  struct owned_option {
    std::string_view family;
    const CLI::Option* option;
  };

  template <class Family>
  void add_family(CLI::App& app) {
    const std::size_t before = app.get_options().size();
    Family::add_flags(app, static_cast<flags_slot<Family>&>(*this).value);
    const auto all = app.get_options();
    for (std::size_t i = before; i < all.size(); ++i) options_.push_back({Family::name, all[i]});
  }

  std::vector<owned_option> options_;
};

}  // namespace gpt_fineweb
