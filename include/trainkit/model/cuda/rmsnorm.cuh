// trainkit/model/cuda/rmsnorm.cuh — RMSNorm forward with the residual add fused, its backward, and
// QK-norm (the parameter-free RMSNorm of each q and k head), for the Llama family.
//
// Forward, one warp per row of (N, C): optionally x = a + b first, rounded to bf16 and written to
// res_out (the residual stream, which backward reads), then rstd = 1/√(mean(x²) + ε) — ε inside
// the root, as transformers' LlamaRMSNorm — kept in fp32 per row, and out = x·rstd·w (w null: no
// gain). Statistics come from the bf16-rounded residual, the value backward sees.
// Backward, the shape of layernorm.cuh's: one warp per row writes
// dinp += rstd·(w·dy − x̂·mean(w·dy·x̂)) (accumulated in place: the residual stream's gradient,
// so the residual backward is fused), and sums its rows' dy·x̂ into its own fp32 slice of shared
// memory; the block adds its warps' slices in warp order into one partial per chunk of 32 rows,
// and a second kernel adds the chunks in order into dw. No atomics: dw and dinp are bit-identical
// run to run. QK-norm: one warp per (row, head), in place on the first `heads` heads of rows
// `stride` apart (q then k of the fused QKV output), rstd (N, heads) kept; its backward takes the
// normalised output y (after RoPE, which commutes with a parameter-free RMSNorm; see llama_cpu).
// CPU twins: rmsnorm_*_twin, head_rmsnorm_*_twin in detail/llama_cuda_twins.hpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "trainkit/core/cuda/bf16.cuh"
#include "trainkit/core/cuda/block_reduce.cuh"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/launch_checks.hpp"
#include "trainkit/model/detail/llama_cuda_twins.hpp"

namespace trainkit::model::kernels {

using namespace trainkit::cuda;  // bf16 packs, reductions, launch checks

inline constexpr int rmsnorm_threads = 256;        // forward: 8 rows (warps) per block
inline constexpr int rmsnorm_backward_warps = 4;   // backward: warps per block (one chunk)
inline constexpr int rmsnorm_rows_per_chunk = 32;  // as layernorm_chunks.hpp, for the same reason
inline constexpr int rmsnorm_rows_per_warp = rmsnorm_rows_per_chunk / rmsnorm_backward_warps;
inline constexpr int rmsnorm_channels_per_pass = warp_size * pack;  // 256
static_assert(rmsnorm_rows_per_chunk % rmsnorm_backward_warps == 0);
static_assert(warp_size == detail::llama_kernel_warp && pack == detail::llama_kernel_pack &&
                  rmsnorm_channels_per_pass == detail::rmsnorm_pass,
              "the slot maps in llama_cuda_twins.hpp assume 32 lanes of 8 channels");

inline std::size_t rmsnorm_chunks(std::size_t N) {
  return (N + rmsnorm_rows_per_chunk - 1) / rmsnorm_rows_per_chunk;
}
/// fp32 scratch of rmsnorm_backward with a gain: one C-vector of Σ dy·x̂ per chunk of rows.
inline std::size_t rmsnorm_partial_floats(std::size_t N, int C) {
  return rmsnorm_chunks(N) * std::size_t(C);
}

// x[i..i+8) of one row: bf16(a + b), the stored residual, or a alone.
__device__ inline void rmsnorm_input8(const bf16_t* a, const bf16_t* b, std::int64_t i, float* x) {
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
__global__ void rmsnorm_forward_kernel(bf16_t* res_out, bf16_t* out, float* rstd, const bf16_t* a,
                                       const bf16_t* b, const bf16_t* w, int N, int C, float eps) {
  const int lane = threadIdx.x % warp_size;
  const std::int64_t row =
      std::int64_t(blockIdx.x) * (blockDim.x / warp_size) + threadIdx.x / warp_size;
  if (row >= N) return;
  const std::int64_t base = row * C;
  float x[pack];
  float sq = 0.0f;
  for (int c = lane * pack; c < C; c += rmsnorm_channels_per_pass) {
    rmsnorm_input8(a, b, base + c, x);
#pragma unroll
    for (int k = 0; k < pack; ++k) sq += x[k] * x[k];
  }
  const float s = rsqrtf(warp_sum(sq) / float(C) + eps);
  for (int c = lane * pack; c < C; c += rmsnorm_channels_per_pass) {
    rmsnorm_input8(a, b, base + c, x);  // second read from L1
    bf16x8 o, r;
    if (w) {
      const bf16x8 vw = load8(w + c);
#pragma unroll
      for (int k = 0; k < pack; ++k)
        o.v[k] = __float2bfloat16(x[k] * s * __bfloat162float(vw.v[k]));
    } else {
#pragma unroll
      for (int k = 0; k < pack; ++k) o.v[k] = __float2bfloat16(x[k] * s);
    }
    store8(out + base + c, o);
    if (b) {
#pragma unroll
      for (int k = 0; k < pack; ++k) r.v[k] = __float2bfloat16(x[k]);
      store8(res_out + base + c, r);
    }
  }
  if (lane == 0 && rstd) rstd[row] = s;
}

/// out (N, C) = RMSNorm(a [+ b])·w; with b, the sum is also written to res_out (N, C). w null: no
/// gain; rstd (N) may be null (recomputation needs only out).
inline void rmsnorm_forward(bf16_t* res_out, bf16_t* out, float* rstd, const bf16_t* a,
                            const bf16_t* b, const bf16_t* w, int N, int C, float eps,
                            cudaStream_t s) {
  constexpr const char* who = "rmsnorm_forward";
  require(C % pack == 0, who, "C must be a multiple of 8");
  require(aligned_to(out, 16) && aligned_to(a, 16) && (!w || aligned_to(w, 16)) &&
              (!b || aligned_to(b, 16)) && (!res_out || aligned_to(res_out, 16)),
          who, "buffers must be 16-byte aligned");
  require(!b || res_out, who, "a residual add needs res_out");
  if (N == 0) return;
  const unsigned rows_per_block = rmsnorm_threads / warp_size;
  rmsnorm_forward_kernel<><<<ceil_div(std::size_t(N), rows_per_block), rmsnorm_threads, 0, s>>>(
      res_out, out, rstd, a, b, w, N, C, eps);
  TRAINKIT_CUDA_CHECK_LAUNCH("rmsnorm_forward_kernel");
}

__host__ __device__ inline int rmsnorm_padded_channels(int C) {
  return (C + rmsnorm_channels_per_pass - 1) / rmsnorm_channels_per_pass *
         rmsnorm_channels_per_pass;
}

// Block = chunk of rmsnorm_rows_per_chunk rows; warp v takes rows v·R .. v·R + R − 1 of it.
// Shared memory (with a gain): per warp, Σ dy·x̂ over its rows, `padded` floats, channel
// c = 256·j + 8·lane + k kept at slot 256·j + 32·k + lane (no bank conflicts), as layernorm.cuh;
// rmsnorm_channel_slot and its inverse rmsnorm_slot_channel (llama_cuda_twins.hpp) are walked
// over whole widths by the CPU test.
template <class = void>
__global__ void __launch_bounds__(rmsnorm_backward_warps* warp_size)
    rmsnorm_backward_kernel(bf16_t* dinp, float* partial, const bf16_t* dout, const bf16_t* x,
                            const bf16_t* w, const float* rstd, int N, int C) {
  extern __shared__ float slices[];  // (warps, padded), only with a gain
  const int padded = rmsnorm_padded_channels(C);
  const int lane = threadIdx.x % warp_size, warp = threadIdx.x / warp_size;
  float* dw_sum = slices + std::int64_t(warp) * padded;
  if (w) {
    for (int i = lane; i < padded; i += warp_size) dw_sum[i] = 0.0f;
    __syncwarp();
  }
  const std::int64_t first =
      std::int64_t(blockIdx.x) * rmsnorm_rows_per_chunk + warp * rmsnorm_rows_per_warp;
  for (int r = 0; r < rmsnorm_rows_per_warp; ++r) {
    const std::int64_t row = first + r;
    if (row >= N) break;  // the same for the whole warp
    const std::int64_t base = row * C;
    const float s = rstd[row];
    float dot = 0.0f;
    for (int c = lane * pack; c < C; c += rmsnorm_channels_per_pass) {
      const bf16x8 vx = load8(x + base + c), vd = load8(dout + base + c);
      const bf16x8 vw = w ? load8(w + c) : bf16x8{};
#pragma unroll
      for (int k = 0; k < pack; ++k) {
        const float d = __bfloat162float(vd.v[k]);
        const float dnorm = w ? __bfloat162float(vw.v[k]) * d : d;
        dot += dnorm * __bfloat162float(vx.v[k]) * s;
      }
    }
    const float dnorm_norm_mean = warp_sum(dot) / float(C);
    for (int c = lane * pack, j = 0; c < C; c += rmsnorm_channels_per_pass, ++j) {
      const bf16x8 vx = load8(x + base + c), vd = load8(dout + base + c);
      const bf16x8 vw = w ? load8(w + c) : bf16x8{};
      bf16x8 g = load8(dinp + base + c);
#pragma unroll
      for (int k = 0; k < pack; ++k) {
        const float norm = __bfloat162float(vx.v[k]) * s;
        const float d = __bfloat162float(vd.v[k]);
        const float dnorm = w ? __bfloat162float(vw.v[k]) * d : d;
        g.v[k] = __float2bfloat16(__bfloat162float(g.v[k]) + s * (dnorm - norm * dnorm_norm_mean));
        if (w) dw_sum[detail::rmsnorm_channel_slot(j, lane, k)] += d * norm;
      }
      store8(dinp + base + c, g);
    }
  }
  if (!w) return;  // uniform over the block: no thread is left waiting at the barrier
  __syncthreads();
  // The chunk's partial: the warps' slices added in warp order, written at the true channel.
  float* out = partial + std::int64_t(blockIdx.x) * C;
  for (int q = threadIdx.x; q < padded; q += blockDim.x) {
    const int c = detail::rmsnorm_slot_channel(q);
    if (c >= C) continue;
    float sum = slices[q];
    for (int v = 1; v < rmsnorm_backward_warps; ++v) sum += slices[std::int64_t(v) * padded + q];
    out[c] = sum;
  }
}

// dw[c] += Σ_chunks partial[chunk, c]: 32 channels × 16 chunk lanes a block, the lanes' sums
// added in lane order (detail::rmsnorm_reduce_*, whose CPU twin rmsnorm_dw_reduce_twin adds in
// the same order: the same sums bit for bit).
template <class = void>
__global__ void __launch_bounds__(detail::rmsnorm_reduce_channels* detail::rmsnorm_reduce_lanes)
    rmsnorm_backward_reduce_kernel(bf16_t* dw, const float* partial, int chunks, int C) {
  __shared__ float lanes[detail::rmsnorm_reduce_lanes][detail::rmsnorm_reduce_channels];
  const int x = threadIdx.x % detail::rmsnorm_reduce_channels;
  const int y = threadIdx.x / detail::rmsnorm_reduce_channels;
  const int c = detail::rmsnorm_reduce_channel(blockIdx.x, x);
  float s = 0.0f;
  if (c < C)
    for (int j = y; j < chunks; j += detail::rmsnorm_reduce_lanes)
      s += partial[std::int64_t(j) * C + c];
  lanes[y][x] = s;
  __syncthreads();
  if (y != 0 || c >= C) return;
  float total = 0.0f;
  for (int v = 0; v < detail::rmsnorm_reduce_lanes; ++v) total += lanes[v][x];
  dw[c] = __float2bfloat16(__bfloat162float(dw[c]) + total);
}

/// Shared memory of one rmsnorm_backward_kernel block for width C (with a gain).
inline std::size_t rmsnorm_backward_smem(int C) {
  return std::size_t(rmsnorm_backward_warps) * std::size_t(rmsnorm_padded_channels(C)) *
         sizeof(float);
}

/// dinp (N, C) += ∂loss/∂x; dw (C) += Σ_rows dy·x̂. `partial` holds rmsnorm_partial_floats(N, C)
/// floats of scratch. w, dw and partial all null: no gain (the gradient of x only).
inline void rmsnorm_backward(bf16_t* dinp, bf16_t* dw, float* partial, const bf16_t* dout,
                             const bf16_t* x, const bf16_t* w, const float* rstd, int N, int C,
                             cudaStream_t s) {
  constexpr const char* who = "rmsnorm_backward";
  require(C % pack == 0, who, "C must be a multiple of 8");
  require(aligned_to(dinp, 16) && aligned_to(dout, 16) && aligned_to(x, 16) &&
              (!w || aligned_to(w, 16)),
          who, "buffers must be 16-byte aligned");
  require((w != nullptr) == (dw != nullptr) && (w != nullptr) == (partial != nullptr), who,
          "w, dw and partial go together (all null: no gain)");
  if (N == 0) return;
  const std::size_t smem = w ? rmsnorm_backward_smem(C) : 0;  // 8 KiB at C = 512, 12 KiB at 768
  if (smem > 48 * 1024)  // the default limit; Hopper allows up to 227 KiB per block on request
    TRAINKIT_CUDA_CHECK(cudaFuncSetAttribute(
        rmsnorm_backward_kernel<>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const unsigned chunks = unsigned(rmsnorm_chunks(std::size_t(N)));
  rmsnorm_backward_kernel<><<<chunks, rmsnorm_backward_warps * warp_size, smem, s>>>(
      dinp, partial, dout, x, w, rstd, N, C);
  TRAINKIT_CUDA_CHECK_LAUNCH("rmsnorm_backward_kernel");
  if (!w) return;
  rmsnorm_backward_reduce_kernel<>
      <<<unsigned(detail::rmsnorm_reduce_blocks(C)),
         detail::rmsnorm_reduce_channels * detail::rmsnorm_reduce_lanes, 0, s>>>(dw, partial,
                                                                                 int(chunks), C);
  TRAINKIT_CUDA_CHECK_LAUNCH("rmsnorm_backward_reduce_kernel");
}

// ---- QK-norm
// -------------------------------------------------------------------------------------

// One warp per (row, head); lane l holds channels 8l .. 8l + 7 of the head (hs ≤ 256), idle lanes
// add zeros to the sums.
template <class = void>
__global__ void head_rmsnorm_forward_kernel(bf16_t* x, float* rstd, int N, int heads, int hs,
                                            std::int64_t stride, float eps) {
  const int lane = threadIdx.x % warp_size;
  const std::int64_t item =
      std::int64_t(blockIdx.x) * (blockDim.x / warp_size) + threadIdx.x / warp_size;
  if (item >= std::int64_t(N) * heads) return;
  const std::int64_t row = item / heads, head = item % heads;
  bf16_t* v = x + row * stride + head * hs;
  const int c = lane * pack;
  bf16x8 vx{};
  float sq = 0.0f;
  if (c < hs) {
    vx = load8(v + c);
#pragma unroll
    for (int k = 0; k < pack; ++k) sq += __bfloat162float(vx.v[k]) * __bfloat162float(vx.v[k]);
  }
  const float s = rsqrtf(warp_sum(sq) / float(hs) + eps);
  if (c < hs) {
#pragma unroll
    for (int k = 0; k < pack; ++k) vx.v[k] = __float2bfloat16(__bfloat162float(vx.v[k]) * s);
    store8(v + c, vx);
  }
  if (lane == 0) rstd[item] = s;
}

template <class = void>
__global__ void head_rmsnorm_backward_kernel(bf16_t* dx, const bf16_t* y, const float* rstd, int N,
                                             int heads, int hs, std::int64_t stride) {
  const int lane = threadIdx.x % warp_size;
  const std::int64_t item =
      std::int64_t(blockIdx.x) * (blockDim.x / warp_size) + threadIdx.x / warp_size;
  if (item >= std::int64_t(N) * heads) return;
  const std::int64_t offset = item / heads * stride + item % heads * hs;
  const int c = lane * pack;
  bf16x8 vd{}, vy{};
  float dot = 0.0f;
  if (c < hs) {
    vd = load8(dx + offset + c);
    vy = load8(y + offset + c);
#pragma unroll
    for (int k = 0; k < pack; ++k) dot += __bfloat162float(vd.v[k]) * __bfloat162float(vy.v[k]);
  }
  const float mean = warp_sum(dot) / float(hs), s = rstd[item];
  if (c < hs) {
#pragma unroll
    for (int k = 0; k < pack; ++k)
      vd.v[k] =
          __float2bfloat16(s * (__bfloat162float(vd.v[k]) - __bfloat162float(vy.v[k]) * mean));
    store8(dx + offset + c, vd);
  }
}

inline void head_rmsnorm_check(const char* who, const bf16_t* x, int hs, std::int64_t stride) {
  require(hs % pack == 0 && hs <= rmsnorm_channels_per_pass, who,
          "head size must be a multiple of 8 and at most 256");
  require(stride % pack == 0 && aligned_to(x, 16), who,
          "rows must be 16-byte aligned (stride a multiple of 8)");
}

/// QK-norm in place on the first `heads` heads (hs wide) of each of N rows `stride` apart; rstd
/// (N, heads).
inline void head_rmsnorm_forward(bf16_t* x, float* rstd, int N, int heads, int hs,
                                 std::int64_t stride, float eps, cudaStream_t s) {
  head_rmsnorm_check("head_rmsnorm_forward", x, hs, stride);
  if (N == 0 || heads == 0) return;
  const unsigned per_block = rmsnorm_threads / warp_size;
  head_rmsnorm_forward_kernel<>
      <<<ceil_div(std::size_t(N) * std::size_t(heads), per_block), rmsnorm_threads, 0, s>>>(
          x, rstd, N, heads, hs, stride, eps);
  TRAINKIT_CUDA_CHECK_LAUNCH("head_rmsnorm_forward_kernel");
}

/// QK-norm backward in place: dx (the normalised heads' gradient on entry, the raw heads' on exit)
/// from the normalised output y (same layout) and rstd.
inline void head_rmsnorm_backward(bf16_t* dx, const bf16_t* y, const float* rstd, int N, int heads,
                                  int hs, std::int64_t stride, cudaStream_t s) {
  head_rmsnorm_check("head_rmsnorm_backward", dx, hs, stride);
  require(aligned_to(y, 16), "head_rmsnorm_backward", "y must be 16-byte aligned");
  if (N == 0 || heads == 0) return;
  const unsigned per_block = rmsnorm_threads / warp_size;
  head_rmsnorm_backward_kernel<>
      <<<ceil_div(std::size_t(N) * std::size_t(heads), per_block), rmsnorm_threads, 0, s>>>(
          dx, y, rstd, N, heads, hs, stride);
  TRAINKIT_CUDA_CHECK_LAUNCH("head_rmsnorm_backward_kernel");
}

}  // namespace trainkit::model::kernels
