// trainkit/model/cuda/layernorm.cuh — LayerNorm forward with the residual add fused, and backward.
//
// Forward, one warp per row of (N, C): optionally res = a + b first (the residual stream after an
// attention or MLP projection, written out because backward needs it), then
// out = (x − mean)·rstd·w + bias with mean and rstd kept in fp32. Statistics are taken on the
// bf16-rounded residual, the value backward will see. CPU reference: layernorm_forward (plus
// add_bias_residual for the residual) in cpu/kernels.hpp.
// Backward, one pass over the rows: dinp += rstd·(dnorm − mean(dnorm) − norm·mean(dnorm·norm)),
// one warp per row (the residual stream's gradient is accumulated in place: that is the fused
// residual backward), and in the same pass each warp sums its rows' weight and bias gradients in
// its own fp32 slice of shared memory; the block adds its warps' slices in warp order into one
// partial per chunk of rows (layernorm_chunks.hpp), and a second kernel adds the chunks in order.
// No atomics, so the results are bit-identical run to run. CPU reference: layernorm_backward.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "trainkit/core/cuda/bf16.cuh"
#include "trainkit/core/cuda/block_reduce.cuh"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/launch_checks.hpp"
#include "trainkit/model/cuda/layernorm_chunks.hpp"

namespace trainkit::model::kernels {

using namespace trainkit::cuda;  // bf16 packs, reductions, launch checks

inline constexpr int layernorm_threads = 256;  // 8 rows (warps) per block
inline constexpr float layernorm_eps = 1e-5f;  // GPT-2's, as the CPU reference
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

// Block = chunk of layernorm_rows_per_chunk rows; warp w takes rows w·R .. w·R + R − 1 of it.
// Shared memory: per warp, Σ dout·norm then Σ dout over its rows, each `padded` floats. A lane
// owns the same channels in every row, so a warp's slice needs no atomics; the channel
// c = 256·j + 8·lane + k is kept at 256·j + 32·k + lane, so the 32 lanes' adds for one (j, k)
// hit 32 consecutive floats (no bank conflicts).
inline constexpr int layernorm_channels_per_pass = warp_size * pack;  // 256

__host__ __device__ inline int layernorm_padded_channels(int C) {
  return (C + layernorm_channels_per_pass - 1) / layernorm_channels_per_pass *
         layernorm_channels_per_pass;
}

template <class = void>
__global__ void __launch_bounds__(layernorm_backward_warps* warp_size)
    layernorm_backward_kernel(bf16_t* dinp, float* partial, const bf16_t* dout, const bf16_t* x,
                              const bf16_t* w, const float* mean, const float* rstd, int N, int C) {
  extern __shared__ float slices[];  // (warps, 2, padded)
  const int padded = layernorm_padded_channels(C);
  const int lane = threadIdx.x % warp_size, warp = threadIdx.x / warp_size;
  float* dw_sum = slices + std::int64_t(warp) * 2 * padded;
  float* db_sum = dw_sum + padded;
  for (int i = lane; i < 2 * padded; i += warp_size) dw_sum[i] = 0.0f;
  __syncwarp();
  const std::int64_t first =
      std::int64_t(blockIdx.x) * layernorm_rows_per_chunk + warp * layernorm_rows_per_warp;
  for (int r = 0; r < layernorm_rows_per_warp; ++r) {
    const std::int64_t row = first + r;
    if (row >= N) break;  // the same for the whole warp
    const std::int64_t base = row * C;
    const float m = mean[row], s = rstd[row];
    float dsum = 0.0f, dnsum = 0.0f;
    for (int c = lane * pack; c < C; c += layernorm_channels_per_pass) {
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
    // The row was just read by this warp: the second reads come from L1.
    for (int c = lane * pack, j = 0; c < C; c += layernorm_channels_per_pass, ++j) {
      const bf16x8 vx = load8(x + base + c), vd = load8(dout + base + c), vw = load8(w + c);
      bf16x8 g = load8(dinp + base + c);
      const int slot = j * layernorm_channels_per_pass + lane;
#pragma unroll
      for (int k = 0; k < pack; ++k) {
        const float norm = (__bfloat162float(vx.v[k]) - m) * s;
        const float d = __bfloat162float(vd.v[k]);
        const float dnorm = __bfloat162float(vw.v[k]) * d;
        g.v[k] = __float2bfloat16(__bfloat162float(g.v[k]) +
                                  s * (dnorm - dnorm_mean - norm * dnorm_norm_mean));
        dw_sum[slot + k * warp_size] += d * norm;
        db_sum[slot + k * warp_size] += d;
      }
      store8(dinp + base + c, g);
    }
  }
  __syncthreads();
  // The chunk's partial: warps' slices added in warp order, written at the true channel.
  float* out = partial + std::int64_t(blockIdx.x) * 2 * C;
  for (int i = threadIdx.x; i < 2 * padded; i += blockDim.x) {
    const int half = i / padded, q = i % padded;
    const int c = q / layernorm_channels_per_pass * layernorm_channels_per_pass +
                  (q % warp_size) * pack + (q % layernorm_channels_per_pass) / warp_size;
    if (c >= C) continue;
    float sum = slices[i];
    for (int v = 1; v < layernorm_backward_warps; ++v)
      sum += slices[std::int64_t(v) * 2 * padded + i];
    out[half * C + c] = sum;
  }
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

/// Shared memory of one layernorm_backward_kernel block for width C.
inline std::size_t layernorm_backward_smem(int C) {
  return std::size_t(layernorm_backward_warps) * 2 * std::size_t(layernorm_padded_channels(C)) *
         sizeof(float);
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
  if (N == 0) return;
  const std::size_t smem = layernorm_backward_smem(C);  // 57,344 bytes at C = 1600
  if (smem > 48 * 1024)  // the default limit; Hopper allows up to 227 KiB per block on request
    TRAINKIT_CUDA_CHECK(cudaFuncSetAttribute(
        layernorm_backward_kernel<>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const unsigned chunks = unsigned(layernorm_chunks(std::size_t(N)));
  layernorm_backward_kernel<><<<chunks, layernorm_backward_warps * warp_size, smem, s>>>(
      dinp, partial, dout, x, w, mean, rstd, N, C);
  TRAINKIT_CUDA_CHECK_LAUNCH("layernorm_backward_kernel");
  constexpr int threads = 128;
  layernorm_backward_reduce_kernel<>
      <<<ceil_div(2 * std::size_t(C), threads), threads, 0, s>>>(dw, db, partial, int(chunks), C);
  TRAINKIT_CUDA_CHECK_LAUNCH("layernorm_backward_reduce_kernel");
}

}  // namespace trainkit::model::kernels
