// train/recipes.hpp — `--recipe NAME`: a named set of training flags, each still overridable.
//
// `--recipe speedrun` is the modded-nanogpt-like configuration on the Llama family (docs/recipes.md
// says where each value comes from): the Llama block with ReLU² and QK-norm, the recipe's model
// parts (value embeddings, U-net skips, logit soft-cap, zero-initialised projections, short and
// long sliding windows growing over the run), Muon with its variants (Polar Express, NorMuon,
// cautious weight decay, momentum warm-up) for the matrices, Adam rates per role, a WSD schedule
// and, where --total-batch-tokens asks for accumulation, a batch that grows — the library's one
// definition, trainkit::recipe::speedrun (recipe/speedrun.hpp). The recipe sets only
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
#include <trainkit/recipe/speedrun.hpp>

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
  trainkit::model::llama_config shape;
  try {
    shape = trainkit::model::llama_config::preset(o.model);
  } catch (const trainkit::config_error&) {
    return set;  // an unknown --model: the family refuses it, naming --model, before anything runs
  }
  // The library's one definition of the recipe (recipe/speedrun.hpp), at this run's shape.
  const std::size_t round = std::size_t(std::max(o.batch, 1)) * std::size_t(std::max(o.seq, 1));
  const auto s = trainkit::recipe::speedrun(shape, o.seq, o.steps,
                                            given("--lr") ? o.lr : trainkit::recipe::speedrun_lr,
                                            o.total_batch_tokens, round);
  const auto& r = s.model.recipe;
  const auto& w = r.windows;

  // The model: ReLU², QK-norm and the recipe's parts.
  auto& llama = static_cast<flags_slot<llama_family>&>(model_flags).value;
  use("--mlp", llama.mlp, std::string(trainkit::model::llama_mlp_name(s.model.mlp)),
      std::string(trainkit::model::llama_mlp_name(s.model.mlp)));
  if (s.model.qk_norm) use("--qk-norm", llama.qk_norm, true, "");
  use("--value-embeds", llama.value_embeds, r.value_embeddings, std::to_string(r.value_embeddings));
  if (r.unet_skips) use("--unet", llama.unet, true, "");
  use("--logit-cap", llama.logit_cap, double(r.logit_cap), num(r.logit_cap));
  if (r.zero_init_projections) use("--zero-init-proj", llama.zero_init_proj, true, "");
  use("--window-short", llama.window_short, w.short_window, std::to_string(w.short_window));
  if (llama.window_short != 0) {
    use("--window-long", llama.window_long, w.long_window, std::to_string(w.long_window));
    const std::string grow = std::to_string(w.start) + ":" + std::to_string(w.grow_steps);
    use("--window-schedule", llama.window_schedule, grow, grow);
  }

  // Muon and its variants for the hidden matrices.
  const auto& m = s.muon;
  auto& muon = static_cast<flags_slot<muon_family>&>(optimizer_flags).value;
  use("--muon-lr", muon.lr, s.muon_lr, num(s.muon_lr));
  use("--muon-momentum", muon.momentum, double(m.momentum), num(m.momentum));
  use("--muon-ns", muon.orthogonalizer,
      std::string(trainkit::optim::muon_orthogonalizer_name(m.orthogonalizer)),
      std::string(trainkit::optim::muon_orthogonalizer_name(m.orthogonalizer)));
  if (m.normuon) use("--muon-normuon", muon.normuon, true, "");
  if (m.cautious_weight_decay) use("--muon-cautious-wd", muon.cautious_weight_decay, true, "");
  use("--muon-weight-decay", muon.weight_decay, double(m.weight_decay), num(m.weight_decay));
  use("--muon-momentum-warmup", muon.momentum_warmup_steps, m.momentum_warmup_steps,
      std::to_string(m.momentum_warmup_steps));
  use("--muon-momentum-start", muon.momentum_warmup_start, double(m.momentum_warmup_start),
      num(m.momentum_warmup_start));

  // Adam for the rest: --lr is the head's rate, the other roles multiples of it.
  const auto& a = m.adamw;
  use("--lr", o.lr, s.lr, num(s.lr));
  use("--lr-embedding-scale", o.lr_embedding_scale, double(a.lr_scales.embedding),
      num(a.lr_scales.embedding));
  use("--lr-head-scale", o.lr_head_scale, double(a.lr_scales.head), num(a.lr_scales.head));
  use("--lr-scalar-scale", o.lr_scalar_scale, double(a.lr_scales.norm), num(a.lr_scales.norm));
  use("--beta1", o.beta1, double(a.beta1), num(a.beta1));
  use("--beta2", o.beta2, double(a.beta2), num(a.beta2));
  use("--eps", o.eps, double(a.eps), "1e-10");
  use("--weight-decay", o.weight_decay, double(a.weight_decay), num(a.weight_decay));
  use("--schedule", o.schedule, std::string(trainkit::optim::schedule_kind_name(s.schedule)),
      std::string(trainkit::optim::schedule_kind_name(s.schedule)));
  use("--warmup", o.warmup, s.warmup_steps, std::to_string(s.warmup_steps));
  use("--final-lr-frac", o.final_lr_frac, double(s.final_lr_frac), num(s.final_lr_frac));

  // A batch that grows, where the step has micro-batches to grow through.
  if (s.batch_ramp.on()) {
    use("--batch-ramp-tokens", o.batch_ramp_tokens, s.batch_ramp.start_tokens,
        std::to_string(s.batch_ramp.start_tokens));
    use("--batch-ramp-steps", o.batch_ramp_steps, s.batch_ramp.steps,
        std::to_string(s.batch_ramp.steps));
  }
  return set;
}

}  // namespace gpt_fineweb
