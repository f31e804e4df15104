// train_cuda.hpp — gpt_fineweb's `--device cuda` entry point.
//
// The CUDA composition lives in train_cuda.cu (nvcc); main.cpp (g++) calls it through this
// declaration only.
#pragma once

#include <string>

#include "train_options.hpp"

namespace gpt_fineweb {

/// Trains with trainer<mmap_token_source, pinned<4>, gpt2_cuda, adamw_cuda, Checkpointer>
/// (checkpointer by --ckpt-mode: none, sync through host staging, async through the CUDA
/// stager). Throws config_error "--device cuda: no CUDA device found" on a machine without one.
int run_train_cuda(const train_options& o);

}  // namespace gpt_fineweb
