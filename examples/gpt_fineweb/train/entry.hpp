// train/entry.hpp — the per-family entry points of gpt_fineweb: declared here, defined once per
// (family, device) composition.
//
// Everything that instantiates a family's model (training, sampling, eval, the Hugging Face
// conversions on the CPU; training on CUDA) goes through these templates, and each family's
// files (families/<name>_cpu.cpp and families/<name>_cuda.cu, one line each:
// GPT_FINEWEB_HOST_COMPOSITION / GPT_FINEWEB_CUDA_COMPOSITION) hold their only explicit
// instantiations. On the CPU each family's composition is its own translation unit (and its hot
// code another one, families/<name>_cpu_model.cpp: train/host_hot_code.hpp), so an edit to one
// family's CPU model rebuilds that family's units and the link, not the other families' nor
// main.cpp (which defines GPT_FINEWEB_FRONT_END and sees the families' program-facing halves
// only: no model, no Eigen, no trainer). The CUDA compositions are built as one unit (most of
// each is shared; examples/gpt_fineweb/CMakeLists.txt). Definitions: train/host_entry.hpp
// (g++), train/cuda_entry.cuh (nvcc). docs/build_time.md has the figures.
#pragma once

#include <ostream>

#include "../families/registry.hpp"
#include "options.hpp"

namespace gpt_fineweb {

class hellaswag_scorer;
struct hf_export_args;
struct hf_import_args;

/// --device cpu training for ModelFamily and the --optimizer family (one process, or one rank of
/// `mpirun ... --reducer mpi|mpi-zero1`).
template <class ModelFamily>
int train_on_cpu(const train_options& o, const typename ModelFamily::flags& model_flags,
                 const optimizer_family_flags& optimizer_flags);

/// --device cuda training for ModelFamily and the --optimizer family (config_error naming --arch
/// or --optimizer for a family without a CUDA half).
template <class ModelFamily>
int train_on_cuda(const train_options& o, const typename ModelFamily::flags& model_flags,
                  const optimizer_family_flags& optimizer_flags);

/// --sample N alone: text from the family's CPU model (--init-from, --init-from-hf, --ckpt-dir).
template <class ModelFamily>
int sample_model(const train_options& o, const typename ModelFamily::flags& flags,
                 std::ostream& out);

/// eval: HellaSwag of the family's CPU model read from what `o` names.
template <class ModelFamily>
int eval_model(const train_options& o, const typename ModelFamily::flags& flags,
               const hellaswag_scorer& score, std::ostream& out);

/// export-hf: an llm.c file (a family that has them) or a checkpoint (`o.ckpt_dir`) of the family
/// to the Hugging Face folder `o.export_hf`.
template <class ModelFamily>
int export_hf_model(const hf_export_args& a, const train_options& o,
                    const typename ModelFamily::flags& flags, std::ostream& out);

/// import-hf: the family's Hugging Face folder to its model file (llm.c, or a checkpoint).
template <class ModelFamily>
int import_hf_model(const hf_import_args& a, std::ostream& out);

}  // namespace gpt_fineweb
