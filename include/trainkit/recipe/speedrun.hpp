// trainkit/recipe/speedrun.hpp — the speedrun recipe as one definition: the model, optimizer,
// schedule and batch settings that make up "train like the GPT-2 speedrun records" on the Llama
// family, for a given shape, sequence length and run length.
//
// Every part is a setting of its own component (llama_config::recipe, muon_config, the
// schedule, batch_ramp_config), each off by default there; this function is the one place that
// says which values the recipe picks, so gpt_fineweb's `--recipe speedrun`
// (examples/gpt_fineweb/train/recipes.hpp, where a flag given on the command line wins) and
// bench_muon_learning's `--suite recipe` run the same configuration. docs/recipes.md says where
// each value comes from (modded-nanogpt's records, nanochat, the papers). It sits above model/,
// optim/ and trainer/ because it composes them; no Eigen, no CUDA.
#pragma once

#include <algorithm>
#include <cstddef>

#include "trainkit/model/llama/config.hpp"
#include "trainkit/optim/muon_config.hpp"
#include "trainkit/optim/schedule.hpp"
#include "trainkit/trainer/batch_ramp.hpp"

namespace trainkit::recipe {

/// The schedule's peak the recipe runs at by default: the AdamW half's base rate, which is the
/// head's (modded-nanogpt's Adam head rate).
inline constexpr double speedrun_lr = 0.008;

/// What the speedrun recipe sets.
struct speedrun_settings {
  model::llama_config model;  // the shape given, with ReLU², QK-norm and every model part
  double lr = speedrun_lr;    // the schedule's peak (the AdamW half's base rate)
  double muon_lr = 0.05;      // Muon's peak; muon.lr_ratio = muon_lr / lr
  optim::muon_config muon;    // Muon's variants, and the AdamW half (betas, eps, rates per role)
  optim::schedule_kind schedule = optim::schedule_kind::wsd;
  int warmup_steps = 0;
  float final_lr_frac = 0.1f;
  batch_ramp_config batch_ramp;  // off unless a step has more than one round of micro-batches
};

/// The recipe for a model of `shape` (its preset and shape), sequences of `seq_len` tokens, a run
/// of `steps` optimizer steps at schedule peak `peak_lr`. With `step_tokens` > `round_tokens`
/// (tokens per optimizer step over all ranks > one micro-batch on every rank) the batch grows from
/// one round over the first third of the run. The AdamW half's rates per role are the record's
/// absolute rates (embeddings 0.6, head 0.008, scalars 0.04) as multiples of `peak_lr`.
inline speedrun_settings speedrun(const model::llama_config& shape, int seq_len, int steps,
                                  double peak_lr = speedrun_lr, std::size_t step_tokens = 0,
                                  std::size_t round_tokens = 0) {
  speedrun_settings s;
  const int T = std::max(seq_len, 1);
  model::llama_config& c = s.model;
  c = shape;
  if (c.mlp != model::llama_mlp::relu_squared) {
    c.mlp = model::llama_mlp::relu_squared;
    c.hidden_size = 4 * c.channels;  // nanochat's ReLU² width
  }
  c.qk_norm = true;
  model::llama_recipe& r = c.recipe;
  r.value_embeddings = std::clamp(c.num_layers / 2, 0, 3);  // 3 tables where the depth allows
  r.unet_skips = c.num_layers >= 2;
  r.logit_cap = 15.0f;
  r.zero_init_projections = true;
  r.windows.short_window = std::max(1, T / 2);
  r.windows.long_window = T;
  r.windows.start = std::min(128, T);
  r.windows.grow_steps = std::max(steps, 0);

  s.lr = peak_lr;
  optim::muon_config& m = s.muon;
  m.lr_ratio = double(float(s.muon_lr)) / double(float(peak_lr));  // as gpt_fineweb rounds flags
  m.orthogonalizer = optim::muon_orthogonalizer::polar_express;
  m.normuon = true;
  m.cautious_weight_decay = true;
  m.weight_decay = 0.025f;
  m.momentum = 0.95f;
  m.momentum_warmup_steps = std::min(300, std::max(steps, 0));
  m.momentum_warmup_start = 0.85f;
  optim::adamw_config& a = m.adamw;
  a.beta1 = 0.8f;
  a.beta2 = 0.95f;
  a.eps = 1e-10f;
  a.weight_decay = 0.0f;
  a.lr_scales.embedding = float(0.6 / peak_lr);
  a.lr_scales.head = float(0.008 / peak_lr);
  a.lr_scales.norm = a.lr_scales.bias = float(0.04 / peak_lr);

  if (round_tokens > 0 && step_tokens > round_tokens)
    s.batch_ramp = {.start_tokens = round_tokens, .steps = std::max(1, steps / 3)};
  return s;
}

}  // namespace trainkit::recipe
