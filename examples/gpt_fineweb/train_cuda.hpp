// train_cuda.hpp — gpt_fineweb's `--device cuda` entry point and the g++-side helpers it needs.
//
// The CUDA composition lives in train_cuda.cu (nvcc). llm.c model files are read and written by
// llmc_file.hpp, which pulls in Eigen through gpt2_cpu.hpp; nvcc floods warnings on Eigen, so that
// work sits in train_cuda_host.cpp (g++) behind the plain functions declared here.
#pragma once

#include <span>
#include <string>
#include <vector>

#include <trainkit/model/gpt2_config.hpp>

#include "train_options.hpp"

namespace gpt_fineweb {

/// Trains with trainer<mmap_token_source, pinned<4>, gpt2_cuda, adamw_cuda, Checkpointer>
/// (checkpointer by --ckpt-mode: none, sync through host staging, async through the CUDA
/// stager). Throws config_error "--device cuda: no CUDA device found" on a machine without one.
int run_train_cuda(const train_options& o);

/// An llm.c model file's shape and its parameters as floats (fp32 or bf16 files).
struct llmc_weights {
  trainkit::model::gpt2_config config;
  std::vector<float> params;
};
llmc_weights read_llmc_weights(const std::string& path);

/// Writes `params` (gpt2_parameter_layout order) as an llm.c model file (fp32, version 3).
void write_llmc_weights(const std::string& path, const trainkit::model::gpt2_config& config,
                        std::span<const float> params);

}  // namespace gpt_fineweb
