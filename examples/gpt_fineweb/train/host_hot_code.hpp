// train/host_hot_code.hpp — which CPU code of gpt_fineweb runs every step, and where it is
// compiled.
//
// A family's CPU composition (families/<name>_cpu.cpp) is mostly code that runs once per step or
// once per run: the training driver, the trainer's loop, checkpointing, the commands, the Hugging
// Face conversions. At -O3 its inlining and code generation cost most of the unit's build time
// (docs/build_time.md: the back end is 93% of it), for no run-time gain, so that unit is compiled
// at -Og (examples/gpt_fineweb/CMakeLists.txt). What does run every step, the model's forward and
// backward (and its kernels, Eigen's GEMMs) and the optimizers' updates, is compiled at -O3 in
// the family's model unit (families/<name>_cpu_model.cpp) and the shared optimizer unit
// (train/cpu_optimizers.cpp) by explicit instantiation, and declared `extern template` here for
// the composition, which then calls those instances instead of compiling its own:
//
//   GPT_FINEWEB_HOST_HOT_CODE(extern, Model, Block)  in the composition (via
//                                                    GPT_FINEWEB_HOST_COMPOSITION)
//   GPT_FINEWEB_HOST_HOT_CODE(, Model, Block)        in the family's model unit
//
// where Model is the family's CPU model template (basic_gpt2_cpu) and Block its block policy
// (gpt2_cpu_block): the model, its transformer_cpu base and its block, at float, and every
// optimizer's update for that model. A family without a model unit does not link (the
// composition's calls have no definition), so none can fall back to -Og model code unnoticed.
// The model units are linked first, so where an inline function (a kernel, an Eigen routine) is
// emitted by both kinds of unit the linker keeps the -O3 copy (the first one it sees).
#pragma once

#include <cstddef>
#include <span>

#include <trainkit/core/execution_context.hpp>
#include <trainkit/model/transformer/cpu.hpp>
#include <trainkit/optim/adamw_cpu.hpp>
#include <trainkit/optim/clip_scale.hpp>
#include <trainkit/optim/grad_clip.hpp>
#include <trainkit/optim/muon_cpu.hpp>
#if defined(TRAINKIT_HAS_MPI)
#include <trainkit/optim/sharded_muon_cpu.hpp>
#include <trainkit/optim/zero1_adamw_cpu.hpp>
#endif

/// One optimizer's update for model type M (explicit instantiation `kw` = extern, or nothing).
#define GPT_FINEWEB_HOST_UPDATE(kw, Optimizer, M)                                                  \
  kw template void Optimizer::update<M>(M&, float,                                                 \
                                        const trainkit::optim::clip_scale<trainkit::host_memory>&, \
                                        trainkit::host_context&);

#if defined(TRAINKIT_HAS_MPI)
#define GPT_FINEWEB_HOST_SHARDED_UPDATES(kw, M)                                 \
  GPT_FINEWEB_HOST_UPDATE(kw, trainkit::optim::basic_zero1_adamw_cpu<float>, M) \
  GPT_FINEWEB_HOST_UPDATE(kw, trainkit::optim::basic_sharded_muon_cpu<float>, M)
#else
#define GPT_FINEWEB_HOST_SHARDED_UPDATES(kw, M)
#endif

/// The hot code of one model family on the CPU (see above).
#define GPT_FINEWEB_HOST_HOT_CODE(kw, Model, Block)                                  \
  kw template class Block<float>;                                                    \
  kw template class trainkit::model::transformer_cpu<Block<float>>;                  \
  kw template class Model<float>;                                                    \
  GPT_FINEWEB_HOST_UPDATE(kw, trainkit::optim::basic_adamw_cpu<float>, Model<float>) \
  GPT_FINEWEB_HOST_UPDATE(kw, trainkit::optim::basic_muon_cpu<float>, Model<float>)  \
  GPT_FINEWEB_HOST_SHARDED_UPDATES(kw, Model<float>)

/// The optimizers' model-independent members (their state, the Newton–Schulz iteration, AdamW's
/// loops), compiled once for every family in train/cpu_optimizers.cpp.
#if defined(TRAINKIT_HAS_MPI)
#define GPT_FINEWEB_HOST_SHARDED_OPTIMIZERS(kw)                    \
  kw template class trainkit::optim::basic_zero1_adamw_cpu<float>; \
  kw template class trainkit::optim::basic_sharded_muon_cpu<float>;
#else
#define GPT_FINEWEB_HOST_SHARDED_OPTIMIZERS(kw)
#endif
/// With them the trainer's gradient-norm sums (optim/grad_clip.hpp: every gradient, every step;
/// compiled at -O1 they made a d6 step 4% slower: docs/build_time.md), which are function
/// templates, not inline: `extern` keeps the compositions from compiling their own.
#define GPT_FINEWEB_HOST_OPTIMIZERS(kw)                                                          \
  kw template class trainkit::optim::basic_adamw_cpu<float>;                                     \
  kw template class trainkit::optim::basic_muon_cpu<float>;                                      \
  kw template double trainkit::optim::detail::chunk_sum_of_squares<float>(                       \
      const float*, std::size_t, std::size_t);                                                   \
  kw template void trainkit::optim::detail::piece_sums_of_squares<float>(                        \
      const float*, std::span<const trainkit::optim::detail::norm_piece>, std::span<const char>, \
      std::span<double>);                                                                        \
  GPT_FINEWEB_HOST_SHARDED_OPTIMIZERS(kw)
