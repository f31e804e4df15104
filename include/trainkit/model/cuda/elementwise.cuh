// trainkit/model/cuda/elementwise.cuh — the element-wise kernels between GEMMs: GELU (for
// activation recomputation, when the forward's fused GELU output was not kept) and the add of a
// freshly computed gradient into an accumulated one (cuBLASLt's bias-gradient epilogue overwrites
// its output, while the model accumulates over micro-batches).
// CPU reference: gelu_forward in cpu/kernels.hpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "trainkit/core/cuda/bf16.cuh"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/gelu.cuh"
#include "trainkit/core/cuda/launch_checks.hpp"

namespace trainkit::model::kernels {

using namespace trainkit::cuda;  // bf16 packs, reductions, launch checks

template <class = void>
__global__ void gelu_forward_kernel(bf16_t* out, const bf16_t* inp, std::int64_t n) {
  const std::int64_t i = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * pack;
  if (i >= n) return;
  const bf16x8 x = load8(inp + i);
  bf16x8 o;
#pragma unroll
  for (int k = 0; k < pack; ++k) o.v[k] = __float2bfloat16(gelu(__bfloat162float(x.v[k])));
  store8(out + i, o);
}

/// out (n) = gelu(inp), n a multiple of 8.
inline void gelu_forward(bf16_t* out, const bf16_t* inp, std::int64_t n, cudaStream_t s) {
  require(n % pack == 0 && aligned_to(out, 16) && aligned_to(inp, 16), "gelu_forward",
          "n must be a multiple of 8 and buffers 16-byte aligned");
  constexpr int threads = 256;
  gelu_forward_kernel<><<<ceil_div(std::size_t(n) / pack, threads), threads, 0, s>>>(out, inp, n);
  TRAINKIT_CUDA_CHECK_LAUNCH("gelu_forward_kernel");
}

// dst[i..i+8) += src[i..i+8) with 16-byte loads and stores; the scalar kernel takes the rest.
template <class = void>
__global__ void accumulate8_kernel(bf16_t* dst, const bf16_t* src, std::int64_t vectors) {
  const std::int64_t v = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= vectors) return;
  const bf16x8 a = load8(src + v * pack);
  bf16x8 d = load8(dst + v * pack);
#pragma unroll
  for (int k = 0; k < pack; ++k)
    d.v[k] = __float2bfloat16(__bfloat162float(d.v[k]) + __bfloat162float(a.v[k]));
  store8(dst + v * pack, d);
}

template <class = void>
__global__ void accumulate_kernel(bf16_t* dst, const bf16_t* src, std::int64_t n) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  dst[i] = __float2bfloat16(__bfloat162float(dst[i]) + __bfloat162float(src[i]));
}

/// dst (n) += src (n): 8 elements per thread when both are 16-byte aligned (the arena's buffers
/// are), the tail and unaligned buffers one element per thread. Same result either way.
inline void accumulate(bf16_t* dst, const bf16_t* src, std::int64_t n, cudaStream_t s) {
  if (n == 0) return;
  constexpr int threads = 256;
  std::int64_t done = 0;
  if (aligned_to(dst, 16) && aligned_to(src, 16)) {
    const std::int64_t vectors = n / pack;
    if (vectors > 0) {
      accumulate8_kernel<>
          <<<ceil_div(std::size_t(vectors), threads), threads, 0, s>>>(dst, src, vectors);
      TRAINKIT_CUDA_CHECK_LAUNCH("accumulate8_kernel");
    }
    done = vectors * pack;
  }
  if (done == n) return;
  accumulate_kernel<><<<ceil_div(std::size_t(n - done), threads), threads, 0, s>>>(
      dst + done, src + done, n - done);
  TRAINKIT_CUDA_CHECK_LAUNCH("accumulate_kernel");
}

}  // namespace trainkit::model::kernels
