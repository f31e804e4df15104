// tests/cuda/reference.hpp — the CPU side of the GPU tests, compiled by g++ (reference.cpp).
//
// nvcc floods warnings on Eigen, so the .cu test files never include gpt2/cpu.hpp or
// cpu/kernels.hpp; they call these plain-vector wrappers around the same CPU kernels
// and the CPU GPT-2 instead. All buffers are float and row-major, shapes as in gpt2_cpu_kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "trainkit/model/gpt2/config.hpp"

namespace trainkit::test_ref {

using fvec = std::vector<float>;
using ivec = std::vector<std::int32_t>;

void encoder_forward(fvec& out, const ivec& tokens, const fvec& wte, const fvec& wpe, int B, int T,
                     int C);
void encoder_backward(fvec& dwte, fvec& dwpe, const fvec& dout, const ivec& tokens, int B, int T,
                      int C);
void layernorm_forward(fvec& out, fvec& mean, fvec& rstd, const fvec& inp, const fvec& w,
                       const fvec& b, int N, int C);
void layernorm_backward(fvec& dinp, fvec& dw, fvec& db, const fvec& dout, const fvec& inp,
                        const fvec& w, const fvec& mean, const fvec& rstd, int N, int C);
/// out (N, OC) = inp · wᵀ (+ bias when not empty).
void linear_forward(fvec& out, const fvec& inp, const fvec& w, const fvec& bias, int N, int IC,
                    int OC);
/// dinp = dout · w; dw += doutᵀ · inp; db += Σ dout (db may be empty).
void linear_backward(fvec& dinp, fvec& dw, fvec& db, const fvec& dout, const fvec& inp,
                     const fvec& w, int N, int IC, int OC);
void gelu_forward(fvec& out, const fvec& inp);
void gelu_backward(fvec& dinp, const fvec& inp, const fvec& dout);
void attention_forward(fvec& out, fvec& att, const fvec& qkv, int B, int T, int C, int H);
void attention_backward(fvec& dqkv, const fvec& dout, const fvec& qkv, const fvec& att, int B,
                        int T, int C, int H);
/// losses (rows); with backward, logits become dloss·(softmax − onehot), padded columns 0.
void softmax_crossentropy(fvec& logits, std::vector<double>& losses, const ivec& targets, int rows,
                          int V, int Vp, bool backward, float dloss);

/// The CPU GPT-2 with the given parameters: mean loss of one forward_backward(grad_scale = 1)
/// and the gradients it produced.
struct model_result {
  double loss = 0.0;
  fvec grads;
};
model_result gpt2_forward_backward(const model::gpt2_config& cfg, const fvec& params,
                                   const ivec& inputs, const ivec& targets, int B, int T);

/// basic_gpt2_cpu<float>(cfg, seed)'s parameters.
fvec gpt2_cpu_initial_parameters(const model::gpt2_config& cfg, std::uint64_t seed);

}  // namespace trainkit::test_ref
