// trainkit/model/cuda/recipe.cuh — the speedrun recipe's point-wise CUDA kernels: the
// value-embedding mix (modded-nanogpt's value embeddings, model/recipe/value_embeddings.hpp) and
// the U-net skip add (model/recipe/unet_skips.hpp), each with its backward.
//
// What each computes, and the CPU twin that a GPU test holds it to, is in
// detail/recipe_cuda_twins.hpp (the point-wise math is shared from there). In short:
//   value_mix_forward:  v_saved ← v; v ← λ₀·v + λ₁·E[token]   (v in place in the QKV rows)
//   value_mix_backward: dv ← λ₀·dv; scaled ← λ₁·dv (then summed per token into dE by
//                       encoder_backward_buckets, deterministic); dλ₀, dλ₁ += Σ v·dv, Σ E·dv
//   skip_add_forward:   x ← x + w·skip
//   skip_add_backward:  dskip ← dskip + w·dx; dw += Σ dx·skip
// λ and w are bf16 parameters read by the kernels from device memory (no host round trip, CUDA
// graph safe); their gradients are bf16 too. Scalar gradients are summed without atomics: one fp32
// partial per block of recipe_block 8-element chunks (the block's warps in index order), then one
// warp adds the partials in block order: the same bits run to run. 256 threads a block, 8 bf16 per
// thread (16-byte loads): C must be a multiple of 8 and rows 16-byte aligned.
// **None of these kernels has run on a GPU**: they compile (sm_90a), their GPU tests
// (CudaRecipeKernels.*, in test_cuda_llama_kernels) compile and skip without a device.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "trainkit/core/cuda/bf16.cuh"
#include "trainkit/core/cuda/block_reduce.cuh"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/launch_checks.hpp"
#include "trainkit/model/detail/recipe_cuda_twins.hpp"

namespace trainkit::model::kernels {

using namespace trainkit::cuda;  // bf16 packs, reductions, launch checks

namespace recipe_detail {
inline constexpr int threads = detail::recipe_block;  // one 8-element chunk per thread
static_assert(detail::recipe_pack == pack);
}  // namespace recipe_detail

// Chunk i of an (N, C) view: row i / (C/8), columns 8·(i % (C/8)) ..
template <class = void>
__global__ void __launch_bounds__(recipe_detail::threads)
    value_mix_forward_kernel(bf16_t* v, std::int64_t ld_v, bf16_t* v_saved, const bf16_t* table,
                             const std::int32_t* tokens, int N, int C, int V,
                             const bf16_t* lambda) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int per_row = C / pack;
  if (i >= std::int64_t(N) * per_row) return;
  const std::int64_t n = i / per_row;
  const int c = int(i % per_row) * pack;
  const float l0 = __bfloat162float(lambda[0]), l1 = __bfloat162float(lambda[1]);
  bf16x8 x = load8(v + n * ld_v + c);
  const std::int32_t t = tokens[n];  // out of range: flagged by the embedding, read as zeros here
  const bf16x8 e = t >= 0 && t < V ? load8(table + std::int64_t(t) * C + c) : bf16x8{};
  store8(v_saved + n * C + c, x);
#pragma unroll
  for (int k = 0; k < pack; ++k)
    x.v[k] = __float2bfloat16(
        detail::value_mix(__bfloat162float(x.v[k]), __bfloat162float(e.v[k]), l0, l1));
  store8(v + n * ld_v + c, x);
}

template <class = void>
__global__ void __launch_bounds__(recipe_detail::threads)
    value_mix_backward_kernel(bf16_t* dv, std::int64_t ld_dv, bf16_t* scaled, float* partials,
                              const bf16_t* v_saved, const bf16_t* table,
                              const std::int32_t* tokens, int N, int C, int V,
                              const bf16_t* lambda) {
  __shared__ float scratch[warp_size];
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int per_row = C / pack;
  float p0 = 0.0f, p1 = 0.0f;
  if (i < std::int64_t(N) * per_row) {
    const std::int64_t n = i / per_row;
    const int c = int(i % per_row) * pack;
    const float l0 = __bfloat162float(lambda[0]), l1 = __bfloat162float(lambda[1]);
    bf16x8 g = load8(dv + n * ld_dv + c), s;
    const bf16x8 x = load8(v_saved + n * C + c);
    const std::int32_t t = tokens[n];
    const bf16x8 e = t >= 0 && t < V ? load8(table + std::int64_t(t) * C + c) : bf16x8{};
#pragma unroll
    for (int k = 0; k < pack; ++k) {
      const float d = __bfloat162float(g.v[k]);
      p0 += __bfloat162float(x.v[k]) * d;
      p1 += __bfloat162float(e.v[k]) * d;
      s.v[k] = __float2bfloat16(l1 * d);
      g.v[k] = __float2bfloat16(l0 * d);
    }
    store8(scaled + n * C + c, s);
    store8(dv + n * ld_dv + c, g);
  }
  p0 = block_sum(p0, scratch);  // every thread reaches both: no early return above
  p1 = block_sum(p1, scratch);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = p0;
    partials[gridDim.x + blockIdx.x] = p1;
  }
}

template <class = void>
__global__ void __launch_bounds__(recipe_detail::threads)
    skip_add_forward_kernel(bf16_t* x, const bf16_t* skip, std::int64_t n, const bf16_t* w) {
  const std::int64_t i = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * pack;
  if (i >= n) return;
  const float wf = __bfloat162float(*w);
  bf16x8 a = load8(x + i);
  const bf16x8 s = load8(skip + i);
#pragma unroll
  for (int k = 0; k < pack; ++k)
    a.v[k] =
        __float2bfloat16(detail::skip_add(__bfloat162float(a.v[k]), __bfloat162float(s.v[k]), wf));
  store8(x + i, a);
}

template <class = void>
__global__ void __launch_bounds__(recipe_detail::threads)
    skip_add_backward_kernel(bf16_t* dskip, float* partials, const bf16_t* dx, const bf16_t* skip,
                             std::int64_t n, const bf16_t* w) {
  __shared__ float scratch[warp_size];
  const std::int64_t i = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * pack;
  float p = 0.0f;
  if (i < n) {
    const float wf = __bfloat162float(*w);
    const bf16x8 g = load8(dx + i), s = load8(skip + i);
    bf16x8 a = load8(dskip + i);
#pragma unroll
    for (int k = 0; k < pack; ++k) {
      const float d = __bfloat162float(g.v[k]);
      p += d * __bfloat162float(s.v[k]);
      a.v[k] = __float2bfloat16(detail::skip_add(__bfloat162float(a.v[k]), d, wf));
    }
    store8(dskip + i, a);
  }
  p = block_sum(p, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = p;
}

// grad[j] ← bf16(grad[j] + Σ_b partials[j·blocks + b]), j < count: one thread per j, the partials
// in block order (detail::add_partials_twin).
template <class = void>
__global__ void add_partials_kernel(bf16_t* grad, const float* partials, int blocks, int count) {
  const int j = threadIdx.x;
  if (j >= count) return;
  float sum = 0.0f;
  for (int b = 0; b < blocks; ++b) sum += partials[std::int64_t(j) * blocks + b];
  grad[j] = __float2bfloat16(__bfloat162float(grad[j]) + sum);
}

namespace recipe_detail {
inline void check(const char* name, int C, std::int64_t ld, const void* a, const void* b) {
  require(C > 0 && C % pack == 0, name,
          [&] { return "C = " + std::to_string(C) + " must be a positive multiple of 8"; });
  require(ld % pack == 0 && aligned_to(a, 16) && aligned_to(b, 16), name,
          "rows must be 16-byte aligned (leading dimension a multiple of 8)");
}
}  // namespace recipe_detail

/// Floats of scratch value_mix_backward needs for its partials (N rows of C values).
inline std::size_t value_mix_partial_floats(int N, int C) {
  return 2 * detail::recipe_blocks(std::size_t(N) * std::size_t(C));
}
/// Floats of scratch skip_add_backward needs for n elements.
inline std::size_t skip_add_partial_floats(std::size_t n) {
  return detail::recipe_blocks(n);
}

/// v (N rows of C, ld_v apart) ← λ₀·v + λ₁·table[tokens] in place; v_saved (N, C) ← v first.
/// table (V or more rows of C); lambda: 2 bf16 on the device. A token outside [0, V) reads a zero
/// row (the embedding forward flags it and the step reports it).
inline void value_mix_forward(bf16_t* v, std::int64_t ld_v, bf16_t* v_saved, const bf16_t* table,
                              const std::int32_t* tokens, int N, int C, int V, const bf16_t* lambda,
                              cudaStream_t s) {
  recipe_detail::check("value_mix_forward", C, ld_v, v, v_saved);
  const std::size_t chunks = std::size_t(N) * std::size_t(C / pack);
  if (chunks == 0) return;
  value_mix_forward_kernel<>
      <<<ceil_div(chunks, std::size_t(recipe_detail::threads)), recipe_detail::threads, 0, s>>>(
          v, ld_v, v_saved, table, tokens, N, C, V, lambda);
  TRAINKIT_CUDA_CHECK_LAUNCH("value_mix_forward_kernel");
}

/// dv (the mixed values' gradient, rows ld_dv apart) ← λ₀·dv in place; scaled (N, C) ← λ₁·dv
/// (sum it per token into the table's gradient: encoder_backward_buckets or _atomic); dlambda (2
/// bf16) += (Σ v_saved·dv, Σ table[tokens]·dv). partials: value_mix_partial_floats(N, C) floats.
inline void value_mix_backward(bf16_t* dv, std::int64_t ld_dv, bf16_t* scaled, bf16_t* dlambda,
                               float* partials, const bf16_t* v_saved, const bf16_t* table,
                               const std::int32_t* tokens, int N, int C, int V,
                               const bf16_t* lambda, cudaStream_t s) {
  recipe_detail::check("value_mix_backward", C, ld_dv, dv, scaled);
  const std::size_t blocks = detail::recipe_blocks(std::size_t(N) * std::size_t(C));
  if (blocks == 0) return;
  value_mix_backward_kernel<><<<blocks, recipe_detail::threads, 0, s>>>(
      dv, ld_dv, scaled, partials, v_saved, table, tokens, N, C, V, lambda);
  TRAINKIT_CUDA_CHECK_LAUNCH("value_mix_backward_kernel");
  add_partials_kernel<><<<1, warp_size, 0, s>>>(dlambda, partials, int(blocks), 2);
  TRAINKIT_CUDA_CHECK_LAUNCH("add_partials_kernel");
}

/// x (n) ← x + w·skip; w: one bf16 on the device.
inline void skip_add_forward(bf16_t* x, const bf16_t* skip, std::size_t n, const bf16_t* w,
                             cudaStream_t s) {
  require(n % pack == 0, "skip_add_forward", "n must be a multiple of 8");
  require(aligned_to(x, 16) && aligned_to(skip, 16), "skip_add_forward",
          "x and skip must be 16-byte aligned");
  if (n == 0) return;
  skip_add_forward_kernel<>
      <<<ceil_div(n / pack, std::size_t(recipe_detail::threads)), recipe_detail::threads, 0, s>>>(
          x, skip, std::int64_t(n), w);
  TRAINKIT_CUDA_CHECK_LAUNCH("skip_add_forward_kernel");
}

/// dskip (n) ← dskip + w·dx; dw (one bf16) += Σ dx·skip. partials: skip_add_partial_floats(n).
inline void skip_add_backward(bf16_t* dskip, bf16_t* dw, float* partials, const bf16_t* dx,
                              const bf16_t* skip, std::size_t n, const bf16_t* w, cudaStream_t s) {
  require(n % pack == 0, "skip_add_backward", "n must be a multiple of 8");
  require(aligned_to(dskip, 16) && aligned_to(dx, 16) && aligned_to(skip, 16), "skip_add_backward",
          "dskip, dx and skip must be 16-byte aligned");
  const std::size_t blocks = detail::recipe_blocks(n);
  if (blocks == 0) return;
  skip_add_backward_kernel<>
      <<<blocks, recipe_detail::threads, 0, s>>>(dskip, partials, dx, skip, std::int64_t(n), w);
  TRAINKIT_CUDA_CHECK_LAUNCH("skip_add_backward_kernel");
  add_partials_kernel<><<<1, warp_size, 0, s>>>(dw, partials, int(blocks), 1);
  TRAINKIT_CUDA_CHECK_LAUNCH("add_partials_kernel");
}

}  // namespace trainkit::model::kernels
