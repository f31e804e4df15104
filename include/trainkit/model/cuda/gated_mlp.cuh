// trainkit/model/cuda/gated_mlp.cuh — the Llama family's MLP nonlinearities between the two MLP
// GEMMs: SwiGLU on the fused [gate | up] output, and ReLU².
//
// SwiGLU: the first MLP GEMM writes fc (N, 2F) with gate in the first F columns of a row and up in
// the last F (llama_cpu's layout, and the fused GEMM's), out (N, F) = silu(gate)·up; backward
// assigns dfc = [dout·u·σ(g)·(1 + g·(1 − σ(g))) | dout·silu(g)]. ReLU²: out = max(x, 0)²,
// dinp = dout·2·max(x, 0) (dinp may alias dout). bf16 in and out, fp32 math, one rounding per
// stored value, 8 elements per thread (16-byte loads). The point-wise math is shared with the CPU
// twins (swiglu_value & co. in detail/llama_cuda_twins.hpp), so a slip in it fails the CPU test.
// Memory-bound: 3 bf16 per output forward, 5 backward, as GPT-2's GELU is fused into its GEMM's
// epilogue and these are not (yet).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "trainkit/core/cuda/bf16.cuh"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/launch_checks.hpp"
#include "trainkit/model/detail/llama_cuda_twins.hpp"

namespace trainkit::model::kernels {

using namespace trainkit::cuda;  // bf16 packs, launch checks

inline constexpr int gated_mlp_threads = 256;

// Thread = 8 consecutive outputs of one row: (row, column i) with i a multiple of 8.
template <class = void>
__global__ void swiglu_forward_kernel(bf16_t* out, const bf16_t* fc, int N, int F) {
  const std::int64_t item = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int groups = F / pack;
  if (item >= std::int64_t(N) * groups) return;
  const std::int64_t row = item / groups;
  const int i = int(item % groups) * pack;
  const bf16x8 g = load8(fc + row * 2 * F + i), u = load8(fc + row * 2 * F + F + i);
  bf16x8 o;
#pragma unroll
  for (int k = 0; k < pack; ++k)
    o.v[k] =
        __float2bfloat16(detail::swiglu_value(__bfloat162float(g.v[k]), __bfloat162float(u.v[k])));
  store8(out + row * F + i, o);
}

template <class = void>
__global__ void swiglu_backward_kernel(bf16_t* dfc, const bf16_t* fc, const bf16_t* dout, int N,
                                       int F) {
  const std::int64_t item = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int groups = F / pack;
  if (item >= std::int64_t(N) * groups) return;
  const std::int64_t row = item / groups;
  const int i = int(item % groups) * pack;
  const bf16x8 g = load8(fc + row * 2 * F + i), u = load8(fc + row * 2 * F + F + i);
  const bf16x8 dy = load8(dout + row * F + i);
  bf16x8 dg, du;
#pragma unroll
  for (int k = 0; k < pack; ++k) {
    const float gf = __bfloat162float(g.v[k]), uf = __bfloat162float(u.v[k]),
                d = __bfloat162float(dy.v[k]);
    dg.v[k] = __float2bfloat16(detail::swiglu_dgate(gf, uf, d));
    du.v[k] = __float2bfloat16(detail::swiglu_dup(gf, d));
  }
  store8(dfc + row * 2 * F + i, dg);
  store8(dfc + row * 2 * F + F + i, du);
}

inline void swiglu_check(const char* who, int F, const void* a, const void* b, const void* c) {
  require(F % pack == 0, who, "F must be a multiple of 8");
  require(aligned_to(a, 16) && aligned_to(b, 16) && (!c || aligned_to(c, 16)), who,
          "buffers must be 16-byte aligned");
}

/// out (N, F) = silu(fc[:, :F])·fc[:, F:] for fc (N, 2F).
inline void swiglu_forward(bf16_t* out, const bf16_t* fc, int N, int F, cudaStream_t s) {
  swiglu_check("swiglu_forward", F, out, fc, nullptr);
  if (N == 0 || F == 0) return;
  const std::size_t items = std::size_t(N) * std::size_t(F / pack);
  swiglu_forward_kernel<>
      <<<ceil_div(items, gated_mlp_threads), gated_mlp_threads, 0, s>>>(out, fc, N, F);
  TRAINKIT_CUDA_CHECK_LAUNCH("swiglu_forward_kernel");
}

/// dfc (N, 2F) = [dgate | dup] assigned from dout (N, F); dfc must not alias fc or dout.
inline void swiglu_backward(bf16_t* dfc, const bf16_t* fc, const bf16_t* dout, int N, int F,
                            cudaStream_t s) {
  swiglu_check("swiglu_backward", F, dfc, fc, dout);
  if (N == 0 || F == 0) return;
  const std::size_t items = std::size_t(N) * std::size_t(F / pack);
  swiglu_backward_kernel<>
      <<<ceil_div(items, gated_mlp_threads), gated_mlp_threads, 0, s>>>(dfc, fc, dout, N, F);
  TRAINKIT_CUDA_CHECK_LAUNCH("swiglu_backward_kernel");
}

template <class = void>
__global__ void relu_squared_forward_kernel(bf16_t* out, const bf16_t* inp, std::int64_t n) {
  const std::int64_t i = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * pack;
  if (i >= n) return;
  const bf16x8 x = load8(inp + i);
  bf16x8 o;
#pragma unroll
  for (int k = 0; k < pack; ++k)
    o.v[k] = __float2bfloat16(detail::relu_squared_value(__bfloat162float(x.v[k])));
  store8(out + i, o);
}

template <class = void>
__global__ void relu_squared_backward_kernel(bf16_t* dinp, const bf16_t* inp, const bf16_t* dout,
                                             std::int64_t n) {
  const std::int64_t i = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * pack;
  if (i >= n) return;
  const bf16x8 x = load8(inp + i), dy = load8(dout + i);  // both read before dinp is written
  bf16x8 o;
#pragma unroll
  for (int k = 0; k < pack; ++k)
    o.v[k] = __float2bfloat16(
        detail::relu_squared_grad(__bfloat162float(x.v[k]), __bfloat162float(dy.v[k])));
  store8(dinp + i, o);
}

/// out (n) = max(inp, 0)², n a multiple of 8.
inline void relu_squared_forward(bf16_t* out, const bf16_t* inp, std::int64_t n, cudaStream_t s) {
  require(n % pack == 0 && aligned_to(out, 16) && aligned_to(inp, 16), "relu_squared_forward",
          "n must be a multiple of 8 and buffers 16-byte aligned");
  if (n == 0) return;
  relu_squared_forward_kernel<>
      <<<ceil_div(std::size_t(n) / pack, gated_mlp_threads), gated_mlp_threads, 0, s>>>(out, inp,
                                                                                        n);
  TRAINKIT_CUDA_CHECK_LAUNCH("relu_squared_forward_kernel");
}

/// dinp (n) = dout·2·max(inp, 0), assigned; dinp may alias dout (each thread reads its 8 before
/// writing them).
inline void relu_squared_backward(bf16_t* dinp, const bf16_t* inp, const bf16_t* dout,
                                  std::int64_t n, cudaStream_t s) {
  require(n % pack == 0 && aligned_to(dinp, 16) && aligned_to(inp, 16) && aligned_to(dout, 16),
          "relu_squared_backward", "n must be a multiple of 8 and buffers 16-byte aligned");
  if (n == 0) return;
  relu_squared_backward_kernel<>
      <<<ceil_div(std::size_t(n) / pack, gated_mlp_threads), gated_mlp_threads, 0, s>>>(dinp, inp,
                                                                                        dout, n);
  TRAINKIT_CUDA_CHECK_LAUNCH("relu_squared_backward_kernel");
}

}  // namespace trainkit::model::kernels
