// commands/model_source.hpp — a trained model of any registered family, from what the commands
// name: an llm.c model file (--init-from, GPT-2), a Hugging Face folder (--init-from-hf, every
// family with an HF mapping) or the newest checkpoint in a directory (--ckpt-dir, every family:
// the shape from --arch, --model and the family's flags, as training gives it, checked against
// the checkpoint's recorded arch and shape before a tensor is read). One loader for `--sample`,
// `eval` and `export-hf`, so a family that training supports is supported by every command
// without a line here; and the model-only checkpoint `import-hf` writes for a family that has no
// llm.c file (Llama), which the same loader reads back.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <trainkit/checkpoint/read.hpp>
#include <trainkit/checkpoint/write.hpp>
#include <trainkit/core/error.hpp>

#include "../families/registry.hpp"
#include "../train/checkpoint_families.hpp"
#include "../train/options.hpp"

namespace gpt_fineweb {

/// The family's CPU model from `o.init_from`, `o.init_from_hf` or else the newest checkpoint in
/// `o.ckpt_dir` (its step into `*step_read` when given); `why` starts the messages ("--sample",
/// "eval", "export-hf"). Throws
/// config_error naming the flag when none is given, when the checkpoint was written by another
/// --arch or shape, or when it holds none.
template <model_family Family>
typename host_policies<Family>::model_type load_family_model(const train_options& o,
                                                             const typename Family::flags& flags,
                                                             std::string_view why,
                                                             std::uint64_t* step_read = nullptr) {
  if (o.init_from.empty() && o.init_from_hf.empty() && o.ckpt_dir.empty())
    throw trainkit::config_error(std::string(why) +
                                 " needs a trained model: --init-from FILE, --init-from-hf DIR "
                                 "or --ckpt-dir DIR");
  host_policies<Family> family(flags);
  const auto cfg = family.model_config(o);  // a model file's, or the --model preset's
  auto model = family.make_model(o, cfg);
  if (!o.init_from.empty() || !o.init_from_hf.empty()) return model;
  // Another --arch's checkpoint is refused by name before its tensors are read.
  refuse_foreign_checkpoint(o.ckpt_dir, {{"arch", o.arch}, {"model", cfg.to_string()}},
                            {"arch", "model"}, why);
  trainkit::checkpoint::checkpoint_state state;
  state.tensors = model.state();      // the model's tensors only: optimizer state is not needed
  std::vector<std::string> warnings;  // read only: a checkpointer would check it can write
  if (!trainkit::checkpoint::load_latest_checkpoint(o.ckpt_dir, state, warnings))
    throw trainkit::config_error("--ckpt-dir " + o.ckpt_dir + ": no valid checkpoint to read");
  for (const auto& w : warnings) std::cerr << "warning: " << w << "\n";
  const auto it = state.meta.find("model");
  if (it != state.meta.end() && it->second != cfg.to_string())
    throw trainkit::config_error("--ckpt-dir " + o.ckpt_dir + " holds model '" + it->second +
                                 "', not --model " + o.model);
  if (step_read) *step_read = state.step;
  return model;
}

/// Writes `model` as a model-only checkpoint (step 0: its tensors, no optimizer state; meta arch,
/// model, device cpu) in `dir`, which the loader above, `--sample --ckpt-dir` and `eval
/// --ckpt-dir` read back. `source` is recorded as meta "source".
template <model_family Family, class Model>
void write_model_checkpoint(const std::filesystem::path& dir, Model& model,
                            const std::string& source) {
  trainkit::checkpoint::checkpoint_state state;
  state.step = 0;
  state.tensors = model.state();
  state.meta = {{"arch", std::string(Family::name)},
                {"model", model.config().to_string()},
                {"device", "cpu"},
                {"source", source}};
  trainkit::checkpoint::write_checkpoint(dir, state, 0);
}

}  // namespace gpt_fineweb
