// train/recipes.hpp — `--recipe NAME`: a named set of training flags, each still overridable.
//
// `--recipe speedrun` is the modded-nanogpt-like configuration on the Llama family (docs/recipes.md
// says where each value comes from): the Llama block with ReLU² and QK-norm, the recipe's model
// parts (value embeddings, U-net skips, logit soft-cap, zero-initialised projections, short and
// long sliding windows growing over the run), Muon with its variants (Polar Express, NorMuon,
// cautious weight decay, momentum warm-up) for the matrices, Adam rates per role, a WSD schedule
// and, where --total-batch-tokens asks for accumulation, a batch that grows. The recipe sets only
// what the command line did not give: an explicit flag always wins (`--recipe speedrun
// --logit-cap 0` is the recipe without the cap), and the program prints what the recipe set.
// Refused with an explicit `--arch` other than llama (one line naming both flags, exit 2).
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include <trainkit/core/error.hpp>
#include <trainkit/model/llama/config.hpp>

#include "../families/registry.hpp"
#include "options.hpp"

namespace gpt_fineweb {

/// The recipes --recipe accepts.
inline const std::vector<std::string>& recipe_names() {
  static const std::vector<std::string> names{"speedrun"};
  return names;
}

/// Applies `o.recipe` (nothing when empty) to every setting whose flag `app` did not parse;
/// returns the settings it set, as flags ("--arch llama", "--unet", ...), for the run to print.
/// Throws config_error naming the flag for a combination the recipe cannot run with.
inline std::vector<std::string> apply_recipe(const CLI::App& app, train_options& o,
                                             model_family_flags& model_flags,
                                             optimizer_family_flags& optimizer_flags) {
  std::vector<std::string> set;
  if (o.recipe.empty()) return set;
  if (o.recipe != "speedrun")
    throw trainkit::config_error("--recipe " + o.recipe + " is not a recipe (valid: speedrun)");
  auto given = [&](const char* flag) { return app.count(flag) > 0; };
  // Sets `field` to `value` unless `flag` was given; records it.
  auto use = [&](const char* flag, auto& field, auto value, const std::string& text) {
    if (given(flag)) return;
    field = value;
    set.push_back(text.empty() ? std::string(flag) : std::string(flag) + " " + text);
  };
  auto num = [](double x) {
    std::string s = std::to_string(x);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  };
  if (given("--arch") && o.arch != "llama")
    throw trainkit::config_error(
        "--recipe speedrun is for --arch llama (the Llama block); it "
        "cannot run with --arch " +
        o.arch);
  use("--arch", o.arch, std::string("llama"), "llama");
  use("--optimizer", o.optimizer, std::string("muon"), "muon");

  // The model: ReLU², QK-norm and the recipe's parts.
  auto& llama = static_cast<flags_slot<llama_family>&>(model_flags).value;
  use("--mlp", llama.mlp, std::string("relu2"), "relu2");
  use("--qk-norm", llama.qk_norm, true, "");
  // Three tables where the depth allows (at most L/2; d2 has room for one).
  int layers = 0;
  try {
    layers = trainkit::model::llama_config::preset(o.model).num_layers;
  } catch (const trainkit::config_error&) {
    // an unknown --model is refused by the family, naming --model
  }
  const int tables = std::max(0, std::min(3, layers / 2));
  use("--value-embeds", llama.value_embeds, tables, std::to_string(tables));
  use("--unet", llama.unet, true, "");
  use("--logit-cap", llama.logit_cap, 15.0, "15");
  use("--zero-init-proj", llama.zero_init_proj, true, "");
  // Windows: long layers see the whole sequence, short ones half of it; both grow over the run
  // from 128 tokens (or the sequence, if shorter).
  const int T = std::max(o.seq, 1);
  use("--window-short", llama.window_short, std::max(1, T / 2), std::to_string(std::max(1, T / 2)));
  if (llama.window_short != 0) {
    use("--window-long", llama.window_long, T, std::to_string(T));
    const std::string grow = std::to_string(std::min(128, T)) + ":" + std::to_string(o.steps);
    use("--window-schedule", llama.window_schedule, grow, grow);
  }

  // Muon and its variants for the hidden matrices.
  auto& muon = static_cast<flags_slot<muon_family>&>(optimizer_flags).value;
  use("--muon-lr", muon.lr, 0.05, "0.05");
  use("--muon-ns", muon.orthogonalizer, std::string("polar"), "polar");
  use("--muon-normuon", muon.normuon, true, "");
  use("--muon-cautious-wd", muon.cautious_weight_decay, true, "");
  use("--muon-weight-decay", muon.weight_decay, 0.025, "0.025");
  const int warm = std::min(300, std::max(o.steps, 0));
  use("--muon-momentum-warmup", muon.momentum_warmup_steps, warm, std::to_string(warm));
  use("--muon-momentum-start", muon.momentum_warmup_start, 0.85, "0.85");

  // Adam for the rest: --lr is the head's rate, the other roles multiples of it.
  use("--lr", o.lr, 0.008, "0.008");
  const double embedding = 0.6 / 0.008, scalars = 0.04 / 0.008;
  use("--lr-embedding-scale", o.lr_embedding_scale, embedding, num(embedding));
  use("--lr-scalar-scale", o.lr_scalar_scale, scalars, num(scalars));
  use("--beta1", o.beta1, 0.8, "0.8");
  use("--beta2", o.beta2, 0.95, "0.95");
  use("--eps", o.eps, 1e-10, "1e-10");
  use("--weight-decay", o.weight_decay, 0.0, "0");
  use("--schedule", o.schedule, std::string("wsd"), "wsd");
  use("--warmup", o.warmup, 0, "0");

  // A batch that grows, where the step has micro-batches to grow through.
  const std::size_t round = std::size_t(std::max(o.batch, 1)) * std::size_t(T);
  if (o.total_batch_tokens > round) {
    use("--batch-ramp-tokens", o.batch_ramp_tokens, round, std::to_string(round));
    const int ramp = std::max(1, o.steps / 3);
    use("--batch-ramp-steps", o.batch_ramp_steps, ramp, std::to_string(ramp));
  }
  return set;
}

}  // namespace gpt_fineweb
