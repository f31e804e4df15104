// trainkit/model/llama/cuda_kernels.cuh — the kernels the Llama family adds to GPT-2's on CUDA,
// in one include: RMSNorm with the residual add fused and its backward, QK-norm (rmsnorm.cuh),
// rotate-half RoPE on the fused QKV output (rope.cuh), SwiGLU and ReLU² (gated_mlp.cuh). GEMMs,
// attention, the classifier and the embedding are GPT-2's (a future llama_cuda policy reuses
// them). Each kernel has a CPU twin in detail/llama_cuda_twins.hpp; docs/cuda.md ("Llama
// kernels") says what is proven where.
#pragma once

#include "trainkit/model/cuda/gated_mlp.cuh"
#include "trainkit/model/cuda/rmsnorm.cuh"
#include "trainkit/model/cuda/rope.cuh"
