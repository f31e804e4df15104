// tests/cuda/llama_reference.hpp — the CPU side of the CUDA Llama tests, compiled by g++
// (llama_reference.cpp): llama_cpu (Eigen) behind plain vectors, so the .cu test never includes
// it. llama_cpu is the reference because it is held to transformers' LlamaForCausalLM to 1e-5
// (test_llama_golden); the committed fixtures themselves have head size 8, below what the CUDA
// kernels run (RoPE 16, flash 64), so the CUDA model is compared with llama_cpu at head size 64.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "trainkit/model/llama/config.hpp"

namespace trainkit::test_ref {

/// llama_cpu with the given parameters: the mean loss of one forward_backward(grad_scale = 1), the
/// gradients it produced and the logits (B·T, Vp) of a forward of the same inputs.
struct llama_result {
  double loss = 0.0;
  std::vector<float> grads, logits;
};
llama_result llama_forward_backward(const model::llama_config& cfg,
                                    const std::vector<float>& params,
                                    const std::vector<std::int32_t>& inputs,
                                    const std::vector<std::int32_t>& targets, int B, int T,
                                    std::int64_t step = std::numeric_limits<std::int64_t>::max());

/// basic_llama_cpu<float>(cfg, seed)'s parameters.
std::vector<float> llama_cpu_initial_parameters(const model::llama_config& cfg, std::uint64_t seed);

}  // namespace trainkit::test_ref
