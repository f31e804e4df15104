// train/cuda.hpp — gpt_fineweb's `--device cuda` entry point.
//
// The CUDA device policy lives in train/cuda.cu (nvcc), which runs the training driver with it
// for the --arch and --optimizer families; train/run.hpp (g++) calls it through this declaration
// only, so Eigen never reaches nvcc. The family flags' types are the families' common halves,
// the same in both compilers.
#pragma once

#include "../families/registry.hpp"
#include "options.hpp"

namespace gpt_fineweb {

/// Trains with trainer<mmap_token_source, pinned<4>, cuda model, cuda optimizer, Checkpointer>
/// (checkpointer by --ckpt-mode: none, sync through host staging, async through the CUDA
/// stager); with --reducer nccl, as one rank of an mpirun job (one rank per GPU); with
/// --reducer nccl-zero1 the same with the optimizer family's sharded form and nccl_zero1
/// (ZeRO-1). Every flag is checked before the device is touched; then, on a machine without a
/// GPU, it throws config_error "--device cuda: no CUDA device found".
int run_train_cuda(const train_options& o, const model_family_flags& model_flags,
                   const optimizer_family_flags& optimizer_flags);

}  // namespace gpt_fineweb
