// commands/sample.hpp — text sampled from a trained model without training: `gpt_fineweb
// --sample N` with --init-from FILE, --init-from-hf DIR or the newest checkpoint in --ckpt-dir
// (the model's shape from --arch/--model). The training command runs it when --sample is given
// without --sample-every (so the flags are the training command's: --prompt, --temperature,
// --top-k, --seed, --vocab); samples during training are train/sampler.hpp's too. It runs the
// model family's CPU model, also after a CUDA run (the CUDA models have no forward_logits yet),
// loaded by commands/model_source.hpp as `eval` and `export-hf` load theirs. The --arch family's
// entry point (train/entry.hpp: sample_model, in that family's translation unit) runs it.
#pragma once

#include <cstdint>
#include <ostream>

#include "../families/registry.hpp"
#include "../train/options.hpp"
#include "../train/sampler.hpp"
#include "model_source.hpp"

namespace gpt_fineweb {

template <model_family ModelFamily>
int sample_from(const train_options& o, const typename ModelFamily::flags& flags,
                std::ostream& out) {
  std::uint64_t step = 0;
  auto model = load_family_model<ModelFamily>(o, flags, "--sample", &step);
  const auto s = sampler::from_options(o);
  if (o.init_from.empty() && o.init_from_hf.empty())
    out << "sampling from the checkpoint of step " << step << "\n";
  out << s(model) << "\n";
  return 0;
}

}  // namespace gpt_fineweb
