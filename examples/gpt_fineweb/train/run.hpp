// train/run.hpp — what `gpt_fineweb` (no command word) does with its flags: the cross-flag
// checks, --threads, then sampling (--sample N alone, commands/sample.hpp), CUDA training
// (train/cuda_entry.cuh) or CPU training (train/cpu.hpp) for the --arch and --optimizer families,
// each through the --arch family's entry point (train/entry.hpp), which that family's own
// translation units define.
#pragma once

#include <ostream>

#include <trainkit/core/error.hpp>

#include "../families/registry.hpp"
#include "entry.hpp"
#include "options.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace gpt_fineweb {

inline int run_train(const train_options& o, const model_family_flags& model_flags,
                     const optimizer_family_flags& optimizer_flags, std::ostream& out) {
  o.validate();
  // A family's flag with another family selected would be ignored: refused by name instead.
  model_flags.refuse_others(o.arch, "--arch");
  optimizer_flags.refuse_others(o.optimizer, "--optimizer");
#if defined(_OPENMP)
  if (o.threads > 0) omp_set_num_threads(o.threads);
#endif
  // Sampling runs the CPU model (the CUDA models have no forward_logits yet), also after a CUDA
  // run.
  if (o.sample > 0 && o.sample_every == 0)
    return visit_family(model_families{}, o.arch, "--arch", [&]<class Family>() {
      return sample_model<Family>(o, model_flags.template of<Family>(), out);
    });
  if (o.device == "cuda") {
#if defined(TRAINKIT_HAS_CUDA)
    return visit_family(model_families{}, o.arch, "--arch", [&]<class Family>() {
      return train_on_cuda<Family>(o, model_flags.template of<Family>(), optimizer_flags);
    });
#else
    throw trainkit::config_error(
        "--device cuda: this build has no CUDA support (nvcc was not found "
        "when it was configured)");
#endif
  }
  return visit_family(model_families{}, o.arch, "--arch", [&]<class Family>() {
    return train_on_cpu<Family>(o, model_flags.template of<Family>(), optimizer_flags);
  });
}

}  // namespace gpt_fineweb
