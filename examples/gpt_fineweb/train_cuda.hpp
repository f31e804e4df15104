// train_cuda.hpp — gpt_fineweb's `--device cuda` entry point.
//
// The CUDA device policy lives in train_cuda.cu (nvcc), which runs train_driver.hpp's driver with
// it; main.cpp (g++) calls it through this declaration only, so Eigen never reaches nvcc.
#pragma once

#include "train_options.hpp"

namespace gpt_fineweb {

/// Trains with trainer<mmap_token_source, pinned<4>, gpt2_cuda, adamw_cuda, Checkpointer>
/// (checkpointer by --ckpt-mode: none, sync through host staging, async through the CUDA
/// stager); with --reducer nccl, as one rank of an mpirun job (one rank per GPU); with
/// --reducer nccl-zero1 the same with zero1_adamw_cuda and nccl_zero1 (ZeRO-1). Every flag is
/// checked before the device is touched; then, on a machine without a GPU, it throws
/// config_error "--device cuda: no CUDA device found".
int run_train_cuda(const train_options& o);

}  // namespace gpt_fineweb
