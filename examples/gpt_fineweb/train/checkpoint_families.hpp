// train/checkpoint_families.hpp — a checkpoint says which families wrote it, and a run that
// loads it must be of the same ones.
//
// The training driver stores `--arch` and `--optimizer` in every checkpoint's metadata (meta
// "arch", "optimizer"; "model" is the shape, the family's config_type::to_string(), so GPT-2's
// preset or Llama's --kv-heads/--mlp/--qk-norm/--tie-embeddings are in it). Before a resume (or a
// sample from --ckpt-dir) reads any tensor, the newest checkpoint whose manifest reads is compared
// with the run's flags, and a difference is one line naming the flag: the library's own checks
// would stop later, at a tensor that does not fit, or not at all where the tensors happen to fit
// (an AdamW checkpoint's moments are not Muon's, but a GPT-2 and a Llama layout share names).
// Checkpoints written before the families were recorded are GPT-2 trained with AdamW, the only
// families there were. The device is compared too (meta "device"): a CPU checkpoint holds fp32
// parameters, a CUDA one bf16 parameters with fp32 master weights (optim.master; Muon's
// optim.muon.master and optim.adamw.master), so neither resumes the other.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>

#include <trainkit/checkpoint/format.hpp>
#include <trainkit/checkpoint/list.hpp>
#include <trainkit/core/error.hpp>

namespace gpt_fineweb {

/// What a checkpoint without the key was written by (before the families were recorded).
inline std::string checkpoint_meta_or_default(const std::map<std::string, std::string>& meta,
                                              const std::string& key) {
  if (const auto it = meta.find(key); it != meta.end()) return it->second;
  if (key == "arch") return "gpt2";
  if (key == "optimizer") return "adamw";
  return {};
}

/// Throws config_error naming the flag when the newest readable checkpoint in `dir` was written
/// by another `--arch`, `--optimizer`, model shape or `--device` than `run` (this run's meta)
/// names (a checkpoint without "device" is not compared on it); `keys`
/// are those compared ("model" only when both record it). `why` starts the line ("--resume").
/// Nothing to compare (no checkpoint, none readable) is left to the loader to report.
inline void refuse_foreign_checkpoint(
    const std::string& dir, const std::map<std::string, std::string>& run,
    std::initializer_list<std::string_view> keys = {"arch", "optimizer", "model", "device"},
    std::string_view why = "--resume") {
  namespace ck = trainkit::checkpoint;
  const auto all = ck::list_checkpoints(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    ck::manifest m;
    try {
      m = ck::read_manifest(it->path / ck::manifest_file_name);
    } catch (const trainkit::format_error&) {
      continue;  // a corrupt one is skipped by the loader too, with its warning
    } catch (const trainkit::io_error&) {
      continue;
    }
    const std::string where =
        std::string(why) + ": the checkpoint of step " + std::to_string(m.step) + " in " + dir;
    for (std::string_view k : keys) {
      const std::string key(k);
      const std::string theirs = checkpoint_meta_or_default(m.meta, key);
      const auto mine = run.find(key);
      if (mine == run.end() || theirs.empty() || theirs == mine->second) continue;
      if (key == "model")
        throw trainkit::config_error(where + " holds model '" + theirs + "', but --arch " +
                                     checkpoint_meta_or_default(run, "arch") +
                                     " with this --model and its shape flags makes '" +
                                     mine->second + "'");
      if (key == "device")
        throw trainkit::config_error(
            where + " was written by --device " + theirs + ", not --device " + mine->second +
            ": its model.* tensors are " + (theirs == "cuda" ? "bf16" : "fp32") + " and it has " +
            (theirs == "cuda" ? "" : "no ") +
            "fp32 master weights (optim.*master), so CPU and CUDA checkpoints do not interchange");
      throw trainkit::config_error(where + " was written by --" + key + " " + theirs + ", not --" +
                                   key + " " + mine->second);
    }
    return;
  }
}

}  // namespace gpt_fineweb
