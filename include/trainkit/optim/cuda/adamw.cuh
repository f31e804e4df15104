// trainkit/optim/cuda/adamw.cuh — the kernels behind adamw_cuda: fp32 master weights from bf16
// parameters and one fused AdamW update.
//
// The update is the per-element formula of adamw_cpu.hpp (its CPU reference), written in the same
// operation order with explicitly rounded multiplies and adds (__fmul_rn/__fadd_rn) so that nvcc
// does not contract them into FMAs: with the same clipping factor the fp32 master weights agree
// with adamw_cpu's to the last bit or two (division and sqrt are IEEE-exact in both; a CPU build
// with FMA, e.g. -march=x86-64-v3, may contract some of its own operations). Weight decay is
// decided per *segment* (a run of elements with one decay flag, from the parameter layout): every
// block works on one chunk of one segment, found by a binary search over at most `max_segments`
// chunk offsets passed by value, so no per-element table exists.
//
// The update reads the clipping factor from device memory, where the clipping step
// (optim/device_grad_clip.hpp, kernels in optim/cuda/grad_clip.cuh) wrote it on the same stream,
// so nothing waits for the host between the norm and the update. Not for users:
// optim/adamw_cuda.hpp is the interface.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "trainkit/core/cuda/check.hpp"

namespace trainkit::optim::kernels {

using bf16_t = __nv_bfloat16;

/// Elements per block of the update: 256 threads × 8 elements each, strided by 256 so that each
/// of the 8 passes is one coalesced row. A first guess, not measured.
inline constexpr int update_threads = 256;
inline constexpr int update_per_thread = 8;
inline constexpr std::size_t update_chunk = std::size_t(update_threads) * update_per_thread;

/// Segments a layout may produce: GPT-2 has 16 tensors, so at most 33 (gaps between tensors
/// included). Kernel parameters carry the table by value (64 × 24 bytes, under the 4 KiB limit).
inline constexpr int max_segments = 64;

struct update_segment {
  std::uint64_t begin = 0;  // element range [begin, end) of the flat buffer
  std::uint64_t end = 0;
  std::uint32_t first_chunk = 0;  // chunks before this segment (the block index it starts at)
  float decay = 0.0f;             // weight_decay for decayed tensors, 0 otherwise
};

struct segment_table {
  update_segment seg[max_segments];
  int count = 0;
  std::uint32_t total_chunks = 0;
};

/// Host-computed constants of one step; the clipping factor is *not* here (device memory).
struct update_constants {
  float lr = 0.0f;
  float beta1 = 0.0f, one_minus_beta1 = 0.0f;
  float beta2 = 0.0f, one_minus_beta2 = 0.0f;
  float bias1 = 1.0f, bias2 = 1.0f;  // 1 − βᵗ, rounded to float as adamw_cpu does
  float eps = 0.0f;
  bool stochastic_rounding = false;
  std::uint64_t seed = 0;  // stochastic rounding: hashed with the element index and the step
  std::uint64_t step = 0;
  // Added to the element index the stochastic rounding hashes: a kernel over a shard of the
  // buffer (ZeRO-1) passes the shard's offset, so each element rounds as in the whole-buffer run.
  std::uint64_t index_offset = 0;
};

// ---- master weights --------------------------------------------------------------------------

template <class = void>
__global__ void bf16_to_float_kernel(float* out, const bf16_t* in, std::size_t n) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = __bfloat162float(in[i]);
}

/// out (n) = float(in (n)), on `s`.
inline void bf16_to_float(float* out, const bf16_t* in, std::size_t n, cudaStream_t s) {
  if (n == 0) return;
  const std::size_t blocks = (n + 255) / 256;
  bf16_to_float_kernel<><<<unsigned(blocks < 65536 ? blocks : 65536), 256, 0, s>>>(out, in, n);
  TRAINKIT_CUDA_CHECK_LAUNCH("bf16_to_float_kernel");
}

// ---- the fused update ------------------------------------------------------------------------

/// A 32-bit hash of (seed, step, index) for stochastic rounding (SplitMix64's finaliser).
__device__ inline std::uint32_t rounding_bits(std::uint64_t seed, std::uint64_t step,
                                              std::uint64_t i) {
  std::uint64_t z = seed ^ (step * 0x9e3779b97f4a7c15ull) ^ (i * 0xbf58476d1ce4e5b9ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return std::uint32_t((z ^ (z >> 31)) >> 32);
}

/// bf16 of x: round to nearest even, or stochastically (adds random low bits, truncates), which
/// keeps updates smaller than half a bf16 ulp alive on average.
__device__ inline bf16_t to_bf16(float x, bool stochastic, std::uint32_t bits) {
  if (!stochastic || !isfinite(x)) return __float2bfloat16_rn(x);
  const std::uint32_t u = __float_as_uint(x) + (bits >> 16);
  return __ushort_as_bfloat16(std::uint16_t((u & 0xffff0000u) >> 16));
}

/// One AdamW step over every parameter. Block b works on chunk b: the segment holding it comes
/// from a binary search over `table.seg[].first_chunk`. `scale` is the device-side clipping
/// factor from grad_clip.cuh's clip_factor_kernel.
template <class = void>
__global__ void __launch_bounds__(update_threads)
    adamw_update_kernel(bf16_t* params, float* master, float* m, float* v, const bf16_t* grads,
                        const float* norm_and_scale, const segment_table table,
                        const update_constants k) {
  int lo = 0, hi = table.count - 1;  // last segment whose first_chunk <= blockIdx.x
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (table.seg[mid].first_chunk <= blockIdx.x)
      lo = mid;
    else
      hi = mid - 1;
  }
  const update_segment& seg = table.seg[lo];
  const std::uint64_t chunk_begin =
      seg.begin + std::uint64_t(blockIdx.x - seg.first_chunk) * update_chunk;
  const float grad_scale = norm_and_scale[1];
  const float decay = seg.decay;
#pragma unroll
  for (int j = 0; j < update_per_thread; ++j) {
    const std::uint64_t i = chunk_begin + std::uint64_t(j) * update_threads + threadIdx.x;
    if (i >= seg.end) break;
    // adamw_cpu: grad = g·scale; m = β1·m + (1−β1)·grad; v = β2·v + ((1−β2)·grad)·grad;
    //            p −= lr·((m / bias1) / (sqrt(v / bias2) + eps) + decay·p)
    const float grad = __fmul_rn(__bfloat162float(grads[i]), grad_scale);
    const float mi = __fadd_rn(__fmul_rn(k.beta1, m[i]), __fmul_rn(k.one_minus_beta1, grad));
    const float vi =
        __fadd_rn(__fmul_rn(k.beta2, v[i]), __fmul_rn(__fmul_rn(k.one_minus_beta2, grad), grad));
    const float p = master[i];
    const float direction = __fadd_rn(
        __fdiv_rn(__fdiv_rn(mi, k.bias1), __fadd_rn(__fsqrt_rn(__fdiv_rn(vi, k.bias2)), k.eps)),
        __fmul_rn(decay, p));
    const float updated = __fsub_rn(p, __fmul_rn(k.lr, direction));
    m[i] = mi;
    v[i] = vi;
    master[i] = updated;
    params[i] =
        to_bf16(updated, k.stochastic_rounding,
                k.stochastic_rounding ? rounding_bits(k.seed, k.step, k.index_offset + i) : 0u);
  }
}

/// Launches one block per chunk of the segment table (can_implement: table.count in
/// [1, max_segments], total_chunks > 0; adamw_cuda builds tables that satisfy it).
inline void adamw_update(bf16_t* params, float* master, float* m, float* v, const bf16_t* grads,
                         const float* norm_and_scale, const segment_table& table,
                         const update_constants& k, cudaStream_t s) {
  if (table.total_chunks == 0) return;
  adamw_update_kernel<><<<table.total_chunks, update_threads, 0, s>>>(params, master, m, v, grads,
                                                                      norm_and_scale, table, k);
  TRAINKIT_CUDA_CHECK_LAUNCH("adamw_update_kernel");
}

}  // namespace trainkit::optim::kernels
