// trainkit/model/cuda/layernorm.cuh — LayerNorm forward with the residual add fused, and backward.
//
// Forward, one warp per row of (N, C): optionally res = a + b first (the residual stream after an
// attention or MLP projection, written out because backward needs it), then
// out = (x − mean)·rstd·w + bias with mean and rstd kept in fp32. Statistics are taken on the
// bf16-rounded residual, the value backward will see. CPU reference: layernorm_forward (plus
// add_bias_residual for the residual) in detail/gpt2_cpu_kernels.hpp.
// Backward: dinp += rstd·(dnorm − mean(dnorm) − norm·mean(dnorm·norm)), one warp per row (the
// residual stream's gradient is accumulated in place: that is the fused residual backward); the
// weight and bias gradients are summed without atomics — per chunk of rows into fp32 partials,
// then chunks in order — so they are bit-identical run to run. CPU reference: layernorm_backward.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "trainkit/core/cuda/check.hpp"
#include "trainkit/model/cuda/common.cuh"

namespace trainkit::model::kernels {

inline constexpr int layernorm_threads = 256;  // 8 rows (warps) per block
inline constexpr float layernorm_eps = 1e-5f;  // GPT-2's, as the CPU reference
// Rows per fp32 partial of the parameter gradients: 256 keeps the partials small (N/256 × 2C
// floats) while each thread still loops long enough to hide its load latency. Not tuned on a GPU.
inline constexpr int layernorm_rows_per_chunk = 256;

inline std::size_t layernorm_partial_floats(std::size_t N, int C) {
  return std::size_t(ceil_div(N, layernorm_rows_per_chunk)) * 2 * std::size_t(C);
}

// x[i..i+8) of one row: a + b rounded to bf16 (the stored residual), or a alone.
__device__ inline void residual_at(const bf16_t* a, const bf16_t* b, std::int64_t i, float* x) {
  const bf16x8 va = load8(a + i);
  if (b) {
    const bf16x8 vb = load8(b + i);
#pragma unroll
    for (int k = 0; k < pack; ++k)
      x[k] =
          __bfloat162float(__float2bfloat16(__bfloat162float(va.v[k]) + __bfloat162float(vb.v[k])));
  } else {
#pragma unroll
    for (int k = 0; k < pack; ++k) x[k] = __bfloat162float(va.v[k]);
  }
}

template <class = void>
__global__ void layernorm_forward_kernel(bf16_t* res_out, bf16_t* out, float* mean, float* rstd,
                                         const bf16_t* a, const bf16_t* b, const bf16_t* w,
                                         const bf16_t* bias, int N, int C) {
  const int lane = threadIdx.x % warp_size;
  const std::int64_t row =
      std::int64_t(blockIdx.x) * (blockDim.x / warp_size) + threadIdx.x / warp_size;
  if (row >= N) return;
  const std::int64_t base = row * C;
  float x[pack];
  float sum = 0.0f;
  for (int c = lane * pack; c < C; c += warp_size * pack) {
    residual_at(a, b, base + c, x);
#pragma unroll
    for (int k = 0; k < pack; ++k) sum += x[k];
  }
  const float m = warp_sum(sum) / float(C);
  float sq = 0.0f;
  for (int c = lane * pack; c < C; c += warp_size * pack) {
    residual_at(a, b, base + c, x);
#pragma unroll
    for (int k = 0; k < pack; ++k) sq += (x[k] - m) * (x[k] - m);
  }
  const float s = rsqrtf(warp_sum(sq) / float(C) + layernorm_eps);
  for (int c = lane * pack; c < C; c += warp_size * pack) {
    residual_at(a, b, base + c, x);
    const bf16x8 vw = load8(w + c), vb = load8(bias + c);
    bf16x8 o, r;
#pragma unroll
    for (int k = 0; k < pack; ++k) {
      o.v[k] =
          __float2bfloat16((x[k] - m) * s * __bfloat162float(vw.v[k]) + __bfloat162float(vb.v[k]));
      r.v[k] = __float2bfloat16(x[k]);
    }
    store8(out + base + c, o);
    if (res_out) store8(res_out + base + c, r);
  }
  if (lane == 0 && mean) mean[row] = m;
  if (lane == 0 && rstd) rstd[row] = s;
}

/// out (N, C) = LayerNorm(a [+ b]); with b, the sum is also written to res_out (N, C).
/// mean and rstd (N) may be null (recomputation needs only out).
inline void layernorm_forward(bf16_t* res_out, bf16_t* out, float* mean, float* rstd,
                              const bf16_t* a, const bf16_t* b, const bf16_t* w, const bf16_t* bias,
                              int N, int C, cudaStream_t s) {
  constexpr const char* who = "layernorm_forward";
  require(C % pack == 0, who, "C must be a multiple of 8");
  require(aligned_to(out, 16) && aligned_to(a, 16) && aligned_to(w, 16) && aligned_to(bias, 16) &&
              (!b || aligned_to(b, 16)) && (!res_out || aligned_to(res_out, 16)),
          who, "buffers must be 16-byte aligned");
  require(!b || res_out, who, "a residual add needs res_out");
  const unsigned rows_per_block = layernorm_threads / warp_size;
  layernorm_forward_kernel<><<<ceil_div(std::size_t(N), rows_per_block), layernorm_threads, 0, s>>>(
      res_out, out, mean, rstd, a, b, w, bias, N, C);
  TRAINKIT_CUDA_CHECK_LAUNCH("layernorm_forward_kernel");
}

template <class = void>
__global__ void layernorm_backward_input_kernel(bf16_t* dinp, const bf16_t* dout, const bf16_t* x,
                                                const bf16_t* w, const float* mean,
                                                const float* rstd, int N, int C) {
  const int lane = threadIdx.x % warp_size;
  const std::int64_t row =
      std::int64_t(blockIdx.x) * (blockDim.x / warp_size) + threadIdx.x / warp_size;
  if (row >= N) return;
  const std::int64_t base = row * C;
  const float m = mean[row], s = rstd[row];
  float dsum = 0.0f, dnsum = 0.0f;
  for (int c = lane * pack; c < C; c += warp_size * pack) {
    const bf16x8 vx = load8(x + base + c), vd = load8(dout + base + c), vw = load8(w + c);
#pragma unroll
    for (int k = 0; k < pack; ++k) {
      const float dnorm = __bfloat162float(vw.v[k]) * __bfloat162float(vd.v[k]);
      dsum += dnorm;
      dnsum += dnorm * (__bfloat162float(vx.v[k]) - m) * s;
    }
  }
  const float dnorm_mean = warp_sum(dsum) / float(C);
  const float dnorm_norm_mean = warp_sum(dnsum) / float(C);
  for (int c = lane * pack; c < C; c += warp_size * pack) {
    const bf16x8 vx = load8(x + base + c), vd = load8(dout + base + c), vw = load8(w + c);
    bf16x8 g = load8(dinp + base + c);
#pragma unroll
    for (int k = 0; k < pack; ++k) {
      const float norm = (__bfloat162float(vx.v[k]) - m) * s;
      const float dnorm = __bfloat162float(vw.v[k]) * __bfloat162float(vd.v[k]);
      g.v[k] = __float2bfloat16(__bfloat162float(g.v[k]) +
                                s * (dnorm - dnorm_mean - norm * dnorm_norm_mean));
    }
    store8(dinp + base + c, g);
  }
}

// partial[chunk] = (Σ_rows dout·norm, Σ_rows dout) over the chunk's rows, one thread per channel.
template <class = void>
__global__ void layernorm_backward_partial_kernel(float* partial, const bf16_t* dout,
                                                  const bf16_t* x, const float* mean,
                                                  const float* rstd, int N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int chunk = blockIdx.y;
  const int r0 = chunk * layernorm_rows_per_chunk;
  const int r1 = min(N, r0 + layernorm_rows_per_chunk);
  float dw = 0.0f, db = 0.0f;
  for (int r = r0; r < r1; ++r) {
    const std::int64_t i = std::int64_t(r) * C + c;
    const float d = __bfloat162float(dout[i]);
    dw += d * (__bfloat162float(x[i]) - mean[r]) * rstd[r];
    db += d;
  }
  partial[std::int64_t(chunk) * 2 * C + c] = dw;
  partial[std::int64_t(chunk) * 2 * C + C + c] = db;
}

// dw[c] += Σ_chunks partial[chunk, c]; db[c] += Σ_chunks partial[chunk, C + c]; chunks in order.
template <class = void>
__global__ void layernorm_backward_reduce_kernel(bf16_t* dw, bf16_t* db, const float* partial,
                                                 int chunks, int C) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= 2 * C) return;
  float s = 0.0f;
  for (int j = 0; j < chunks; ++j) s += partial[std::int64_t(j) * 2 * C + i];
  bf16_t* g = i < C ? dw + i : db + (i - C);
  *g = __float2bfloat16(__bfloat162float(*g) + s);
}

/// dinp (N, C) += ∂loss/∂x; dw, db (C) += parameter gradients. `partial` holds
/// layernorm_partial_floats(N, C) floats of scratch.
inline void layernorm_backward(bf16_t* dinp, bf16_t* dw, bf16_t* db, float* partial,
                               const bf16_t* dout, const bf16_t* x, const bf16_t* w,
                               const float* mean, const float* rstd, int N, int C, cudaStream_t s) {
  constexpr const char* who = "layernorm_backward";
  require(C % pack == 0, who, "C must be a multiple of 8");
  require(aligned_to(dinp, 16) && aligned_to(dout, 16) && aligned_to(x, 16) && aligned_to(w, 16),
          who, "buffers must be 16-byte aligned");
  const unsigned rows_per_block = layernorm_threads / warp_size;
  layernorm_backward_input_kernel<>
      <<<ceil_div(std::size_t(N), rows_per_block), layernorm_threads, 0, s>>>(dinp, dout, x, w,
                                                                              mean, rstd, N, C);
  TRAINKIT_CUDA_CHECK_LAUNCH("layernorm_backward_input_kernel");
  const unsigned chunks = ceil_div(std::size_t(N), layernorm_rows_per_chunk);
  constexpr int threads = 128;
  const dim3 grid(ceil_div(std::size_t(C), threads), chunks);
  layernorm_backward_partial_kernel<><<<grid, threads, 0, s>>>(partial, dout, x, mean, rstd, N, C);
  TRAINKIT_CUDA_CHECK_LAUNCH("layernorm_backward_partial_kernel");
  layernorm_backward_reduce_kernel<>
      <<<ceil_div(2 * std::size_t(C), threads), threads, 0, s>>>(dw, db, partial, int(chunks), C);
  TRAINKIT_CUDA_CHECK_LAUNCH("layernorm_backward_reduce_kernel");
}

}  // namespace trainkit::model::kernels
