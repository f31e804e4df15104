// commands/sample.hpp — text sampled from a trained model without training: `gpt_fineweb
// --sample N` with --init-from FILE, --init-from-hf DIR or the newest checkpoint in --ckpt-dir
// (the model's shape from --arch/--model). The training command runs it when --sample is given
// without --sample-every (so the flags are the training command's: --prompt, --temperature,
// --top-k, --seed, --vocab); samples during training are train/sampler.hpp's too. It runs the
// model family's CPU model, also after a CUDA run (the CUDA models have no forward_logits yet).
#pragma once

#include <iostream>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <trainkit/checkpoint/read.hpp>
#include <trainkit/core/error.hpp>

#include "../families/registry.hpp"
#include "../train/checkpoint_families.hpp"
#include "../train/options.hpp"
#include "../train/sampler.hpp"

namespace gpt_fineweb {

template <model_family ModelFamily>
int sample_from(const train_options& o, const typename ModelFamily::flags& flags,
                std::ostream& out) {
  if (o.init_from.empty() && o.init_from_hf.empty() && o.ckpt_dir.empty())
    throw trainkit::config_error(
        "--sample needs a trained model: --init-from FILE, --init-from-hf DIR or --ckpt-dir DIR");
  const auto s = sampler::from_options(o);
  host_policies<ModelFamily> family(flags);
  const auto cfg = family.model_config(o);  // a model file's, or the --model preset's
  auto model = family.make_model(o, cfg);
  if (o.init_from.empty() && o.init_from_hf.empty()) {
    // Another --arch's checkpoint is refused by name before its tensors are read.
    refuse_foreign_checkpoint(o.ckpt_dir, {{"arch", o.arch}, {"model", cfg.to_string()}},
                              {"arch", "model"}, "--sample");
    trainkit::checkpoint::checkpoint_state state;
    state.tensors = model.state();      // the model's tensors only: optimizer state is not needed
    std::vector<std::string> warnings;  // read only: a checkpointer would check it can write
    if (!trainkit::checkpoint::load_latest_checkpoint(o.ckpt_dir, state, warnings))
      throw trainkit::config_error("--ckpt-dir " + o.ckpt_dir +
                                   ": no valid checkpoint to sample from");
    for (const auto& w : warnings) std::cerr << "warning: " << w << "\n";
    const auto it = state.meta.find("model");
    if (it != state.meta.end() && it->second != cfg.to_string())
      throw trainkit::config_error("--ckpt-dir " + o.ckpt_dir + " holds model '" + it->second +
                                   "', not --model " + o.model);
    out << "sampling from the checkpoint of step " << state.step << "\n";
  }
  out << s(model) << "\n";
  return 0;
}

/// --sample N alone, for the --arch family.
inline int run_sample(const train_options& o, const model_family_flags& flags, std::ostream& out) {
  return visit_family(model_families{}, o.arch, "--arch", [&]<class Family>() {
    return sample_from<Family>(o, flags.template of<Family>(), out);
  });
}

}  // namespace gpt_fineweb
