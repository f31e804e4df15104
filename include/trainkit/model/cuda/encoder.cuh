// trainkit/model/cuda/encoder.cuh — token + position embedding, forward and backward.
//
// Forward: encoded[b, t] = wte[token[b, t]] + wpe[t], 8 channels per thread (16-byte accesses);
// a token outside [0, V) raises a device-side flag (read back with the losses, so validating costs
// no extra copy) and reads row 0 instead of faulting. CPU reference: encoder_forward in
// cpu/kernels.hpp.
// Backward into wte has two versions: `encoder_backward_atomic` adds each row of dout into its
// token's row with bf16x2 atomics (fast, but the order of the adds, and so the rounding, varies
// run to run), and `encoder_backward_buckets` sums each token's rows in fp32 in a fixed order, from
// buckets the host builds from the token ids (llm.c's approach; detail/token_buckets.hpp, which
// also explains how a hot bucket is split over row groups), then adds once: deterministic and
// more accurate. The wpe gradient needs no atomics: one thread per (t, 8 channels) sums over b.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "trainkit/core/cuda/bf16.cuh"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/launch_checks.hpp"
#include "trainkit/model/detail/token_buckets.hpp"

namespace trainkit::model::kernels {

using namespace trainkit::cuda;  // bf16 packs, reductions, launch checks

template <class = void>
__global__ void encoder_forward_kernel(bf16_t* out, const std::int32_t* tokens, const bf16_t* wte,
                                       const bf16_t* wpe, int* bad_token, int N, int T, int C,
                                       int V) {
  const std::int64_t i = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * pack;
  if (i >= std::int64_t(N) * C) return;
  const std::int64_t row = i / C, c = i % C;
  const int t = int(row % T);
  int token = tokens[row];
  if (token < 0 || token >= V) {
    *bad_token = 1;  // every writer stores the same value: no ordering question
    token = 0;
  }
  const bf16x8 e = load8(wte + std::int64_t(token) * C + c);
  if (!wpe) {  // no position embedding (Llama: positions come from RoPE)
    store8(out + i, e);
    return;
  }
  const bf16x8 p = load8(wpe + std::int64_t(t) * C + c);
  bf16x8 o;
#pragma unroll
  for (int k = 0; k < pack; ++k)
    o.v[k] = __float2bfloat16(__bfloat162float(e.v[k]) + __bfloat162float(p.v[k]));
  store8(out + i, o);
}

/// out (B·T, C) from tokens (B·T); sets *bad_token to 1 (never to 0) on an out-of-range token.
/// wpe null: the token embedding alone (copied, no rounding).
inline void encoder_forward(bf16_t* out, const std::int32_t* tokens, const bf16_t* wte,
                            const bf16_t* wpe, int* bad_token, int B, int T, int C, int V,
                            cudaStream_t s) {
  require(C % pack == 0, "encoder_forward", "C must be a multiple of 8");
  require(aligned_to(out, 16) && aligned_to(wte, 16) && (!wpe || aligned_to(wpe, 16)),
          "encoder_forward", "buffers must be 16-byte aligned");
  const std::size_t vectors = std::size_t(B) * T * C / pack;
  constexpr int threads = 256;
  encoder_forward_kernel<><<<ceil_div(vectors, threads), threads, 0, s>>>(
      out, tokens, wte, wpe, bad_token, B * T, T, C, V);
  TRAINKIT_CUDA_CHECK_LAUNCH("encoder_forward_kernel");
}

// dwpe[t, c..c+8] += Σ_b dout[b, t, c..c+8], b in order.
template <class = void>
__global__ void encoder_backward_wpe_kernel(bf16_t* dwpe, const bf16_t* dout, int B, int T, int C) {
  const std::int64_t i = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * pack;
  if (i >= std::int64_t(T) * C) return;
  float acc[pack] = {};
  for (int b = 0; b < B; ++b) {
    const bf16x8 d = load8(dout + std::int64_t(b) * T * C + i);
#pragma unroll
    for (int k = 0; k < pack; ++k) acc[k] += __bfloat162float(d.v[k]);
  }
  bf16x8 g = load8(dwpe + i);
#pragma unroll
  for (int k = 0; k < pack; ++k) g.v[k] = __float2bfloat16(__bfloat162float(g.v[k]) + acc[k]);
  store8(dwpe + i, g);
}

inline void encoder_backward_wpe(bf16_t* dwpe, const bf16_t* dout, int B, int T, int C,
                                 cudaStream_t s) {
  require(C % pack == 0, "encoder_backward_wpe", "C must be a multiple of 8");
  constexpr int threads = 256;
  encoder_backward_wpe_kernel<>
      <<<ceil_div(std::size_t(T) * C / pack, threads), threads, 0, s>>>(dwpe, dout, B, T, C);
  TRAINKIT_CUDA_CHECK_LAUNCH("encoder_backward_wpe_kernel");
}

// dwte[token[r]] += dout[r], two channels per thread with bf16x2 atomics.
template <class = void>
__global__ void encoder_backward_atomic_kernel(bf16_t* dwte, const bf16_t* dout,
                                               const std::int32_t* tokens, int N, int C, int V) {
  const std::int64_t i = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 2;
  if (i >= std::int64_t(N) * C) return;
  const std::int64_t row = i / C, c = i % C;
  const int token = tokens[row];
  if (token < 0 || token >= V) return;  // flagged by the forward
  const __nv_bfloat162 d = *reinterpret_cast<const __nv_bfloat162*>(dout + i);
  atomicAdd(reinterpret_cast<__nv_bfloat162*>(dwte + std::int64_t(token) * C + c), d);
}

inline void encoder_backward_atomic(bf16_t* dwte, const bf16_t* dout, const std::int32_t* tokens,
                                    int N, int C, int V, cudaStream_t s) {
  require(C % 2 == 0, "encoder_backward_atomic", "C must be even");
  constexpr int threads = 256;
  encoder_backward_atomic_kernel<>
      <<<ceil_div(std::size_t(N) * C / 2, threads), threads, 0, s>>>(dwte, dout, tokens, N, C, V);
  TRAINKIT_CUDA_CHECK_LAUNCH("encoder_backward_atomic_kernel");
}

// Block (u, channel group): bucket u's rows split over encoder_row_groups groups of threads
// (threadIdx.y); thread x of group g sums rows g, g + G, ... for 8 channels in fp32, the group
// partials meet in shared memory and group 0 adds them in group order, then once into dwte. The
// same additions as encoder_backward_buckets_twin (detail/token_buckets.hpp).
inline constexpr int encoder_bucket_lanes = 32;  // threads along the channels: 256 channels

template <class = void>
__global__ void __launch_bounds__(encoder_bucket_lanes* encoder_row_groups)
    encoder_backward_buckets_kernel(bf16_t* dwte, const bf16_t* dout, const std::int32_t* packed,
                                    int C) {
  constexpr int G = encoder_row_groups;
  __shared__ float partial[G][encoder_bucket_lanes][pack];
  const int U = packed[0];
  const int u = blockIdx.x;
  if (u >= U) return;  // uniform across the block: no barrier is skipped by some threads only
  const std::int32_t* tokens = packed + 1;
  const std::int32_t* offsets = tokens + U;
  const std::int32_t* rows = offsets + U + 1;
  const int lane = threadIdx.x, group = threadIdx.y;
  const std::int64_t c = (std::int64_t(blockIdx.y) * encoder_bucket_lanes + lane) * pack;
  const bool active = c < C;
  float acc[pack] = {};
  if (active)
    for (int j = offsets[u] + group; j < offsets[u + 1]; j += G) {
      const bf16x8 d = load8(dout + std::int64_t(rows[j]) * C + c);
#pragma unroll
      for (int k = 0; k < pack; ++k) acc[k] += __bfloat162float(d.v[k]);
    }
#pragma unroll
  for (int k = 0; k < pack; ++k) partial[group][lane][k] = acc[k];
  __syncthreads();
  if (group != 0 || !active) return;
  float sum[pack];
#pragma unroll
  for (int k = 0; k < pack; ++k) sum[k] = partial[0][lane][k];
  for (int r = 1; r < G; ++r)
#pragma unroll
    for (int k = 0; k < pack; ++k) sum[k] += partial[r][lane][k];
  bf16_t* g = dwte + std::int64_t(tokens[u]) * C + c;
  bf16x8 x = load8(g);
#pragma unroll
  for (int k = 0; k < pack; ++k) x.v[k] = __float2bfloat16(__bfloat162float(x.v[k]) + sum[k]);
  store8(g, x);
}

/// dwte += per-token sums of dout (N, C); `packed` is token_buckets::packed() on the device and
/// `buckets` its number of buckets U, or any upper bound of it (blocks past packed[0] return).
inline void encoder_backward_buckets(bf16_t* dwte, const bf16_t* dout, const std::int32_t* packed,
                                     int buckets, int C, cudaStream_t s) {
  require(C % pack == 0, "encoder_backward_buckets", "C must be a multiple of 8");
  if (buckets == 0) return;
  const dim3 block(encoder_bucket_lanes, encoder_row_groups);
  const dim3 grid(unsigned(buckets),
                  ceil_div(std::size_t(C) / pack, std::size_t(encoder_bucket_lanes)));
  encoder_backward_buckets_kernel<><<<grid, block, 0, s>>>(dwte, dout, packed, C);
  TRAINKIT_CUDA_CHECK_LAUNCH("encoder_backward_buckets_kernel");
}

}  // namespace trainkit::model::kernels
