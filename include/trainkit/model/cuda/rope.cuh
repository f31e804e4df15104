// trainkit/model/cuda/rope.cuh — rotary position embeddings in Hugging Face's rotate-half layout,
// in place on the q and k parts of the fused QKV GEMM output, forward and backward.
//
// Each row of the QKV output holds q (H heads) | k (KV heads) | v (KV heads), hs channels a head;
// q and k are the first H + KV heads, so one launch rotates both (GQA changes only how many) and
// leaves v alone. Within a head the pairs are (i, i + hs/2):
//   y[i] = x[i]·cos − x[i+h]·sin,  y[i+h] = x[i+h]·cos + x[i]·sin   (h = hs/2, angle t·θ^(−2i/hs)).
// The backward is the transpose of the rotation, i.e. the rotation by −angle, applied in place to
// the gradient of the rotated q and k. cos and sin come from a fp32 table (T, hs/2) built on the
// host by rope_table (detail/rope_table.hpp), the same expressions as llama_cpu's and
// transformers' float32 LlamaRotaryEmbedding, rather than cosf/sinf on the device: angles reach
// T radians, where the device's and the host's libm differ by ulps, and __sinf is far worse; the
// table (2·T·hs/2 floats, 256 KiB at T = 1024, hs = 64) stays in L2. One thread rotates 8 pairs:
// 16-byte loads of x[i..i+8) and x[i+h..i+h+8), so hs must be a multiple of 16.
// CPU twin: rope_twin in detail/llama_cuda_twins.hpp (the pair arithmetic, rope_rotate_pair, is
// shared).
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

static_assert(pack == detail::llama_kernel_pack, "rope_item_site assumes 8 pairs per thread");

/// The device copy of a rope_table: cos and sin (max_T, half) in fp32, device pointers.
struct rope_device_table {
  const float* cos = nullptr;
  const float* sin = nullptr;
  int max_T = 0, half = 0;
};

// Thread = 8 pairs of one head of one row: item → (row, head, group of 8 pairs).
template <class = void>
__global__ void rope_kernel(bf16_t* x, rope_device_table table, int N, int T, int heads, int hs,
                            std::int64_t stride, float sign) {
  const int half = hs / 2, groups = half / pack;
  const std::int64_t item = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (item >= std::int64_t(N) * heads * groups) return;
  const auto [row, head, i] = detail::rope_item_site(item, heads, hs);
  bf16_t* v = x + row * stride + std::int64_t(head) * hs;
  const std::int64_t t = row % T;
  const float* c = table.cos + t * table.half + i;
  const float* s = table.sin + t * table.half + i;
  bf16x8 lo = load8(v + i), hi = load8(v + i + half);
#pragma unroll
  for (int k = 0; k < pack; ++k) {
    const auto p = detail::rope_rotate_pair(__bfloat162float(lo.v[k]), __bfloat162float(hi.v[k]),
                                            c[k], sign * s[k]);
    lo.v[k] = __float2bfloat16(p.first);
    hi.v[k] = __float2bfloat16(p.second);
  }
  store8(v + i, lo);
  store8(v + i + half, hi);
}

inline void rope_launch(const char* who, bf16_t* qkv, const rope_device_table& table, int N, int T,
                        int H, int KV, int hs, float sign, cudaStream_t s) {
  require(hs % (2 * pack) == 0, who, "head size must be a multiple of 16");
  require(table.half == hs / 2, who, "the table was built for another head size");
  require(T >= 1 && T <= table.max_T, who, "T exceeds the table's positions");
  require(N % T == 0, who, "N must be a whole number of sequences of T");
  require(aligned_to(qkv, 16), who, "qkv must be 16-byte aligned");
  if (N == 0) return;
  const int heads = H + KV;
  const std::int64_t stride = std::int64_t(H + 2 * KV) * hs;  // q | k | v
  const std::size_t items = std::size_t(N) * std::size_t(heads) * std::size_t(hs / 2 / pack);
  constexpr int threads = 256;
  rope_kernel<>
      <<<ceil_div(items, threads), threads, 0, s>>>(qkv, table, N, T, heads, hs, stride, sign);
  TRAINKIT_CUDA_CHECK_LAUNCH("rope_kernel");
}

/// Rotates q (H heads) and k (KV heads) of the fused qkv (N = B·T, (H + 2·KV)·hs) in place; row r
/// is at position r % T.
inline void rope_forward(bf16_t* qkv, const rope_device_table& table, int N, int T, int H, int KV,
                         int hs, cudaStream_t s) {
  rope_launch("rope_forward", qkv, table, N, T, H, KV, hs, 1.0f, s);
}

/// The backward: the gradient of the rotated q and k in dqkv (same layout) rotated back in place.
inline void rope_backward(bf16_t* dqkv, const rope_device_table& table, int N, int T, int H, int KV,
                          int hs, cudaStream_t s) {
  rope_launch("rope_backward", dqkv, table, N, T, H, KV, hs, -1.0f, s);
}

}  // namespace trainkit::model::kernels
