// trainkit/model/cuda/common.cuh — small device helpers every GPT-2 kernel uses.
//
// bf16 storage with fp32 arithmetic: kernels load 8 bf16 at a time as one 16-byte access (the
// widest a thread can issue, HOPPER.md), convert to float, compute, round once on store. Every
// reduction runs in a fixed tree (warp shuffles, then warps in index order), so a kernel gives
// bit-identical results run after run; nothing here uses atomics. Not for users: gpt2_cuda.hpp
// is the interface.
// Linkage: every kernel in these headers is a function template (`template <class = void>`,
// launched as `name<><<<...>>>`). A plain `__global__` function has external linkage, so two
// .cu files including the same header would each define it and the link would fail; a template's
// instantiations are merged by the linker, and the kernel keeps one name in profiles.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "trainkit/core/bf16.hpp"
#include "trainkit/core/error.hpp"

namespace trainkit::model::kernels {

using bf16_t = __nv_bfloat16;

static_assert(sizeof(bf16_t) == sizeof(trainkit::bf16) &&
                  alignof(bf16_t) == alignof(trainkit::bf16),
              "trainkit::bf16 and __nv_bfloat16 must be layout-identical");

inline constexpr int warp_size = 32;
inline constexpr unsigned full_mask = 0xffffffffu;

/// Eight bf16 in one 16-byte word: the unit of every vectorised load and store.
struct alignas(16) bf16x8 {
  bf16_t v[8];
};
inline constexpr int pack = 8;

__device__ inline bf16x8 load8(const bf16_t* p) {
  return *reinterpret_cast<const bf16x8*>(p);
}
__device__ inline void store8(bf16_t* p, const bf16x8& x) {
  *reinterpret_cast<bf16x8*>(p) = x;
}
/// Streaming load (read once, evict first): keeps L2 for data that is read again.
__device__ inline bf16x8 load8_stream(const bf16_t* p) {
  const int4 raw = __ldcs(reinterpret_cast<const int4*>(p));
  bf16x8 x;
  static_assert(sizeof(raw) == sizeof(x));
  memcpy(&x, &raw, sizeof(x));
  return x;
}

__device__ inline float warp_sum(float v) {
  for (int o = warp_size / 2; o > 0; o /= 2) v += __shfl_xor_sync(full_mask, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = warp_size / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(full_mask, v, o));
  return v;
}

/// Sum over the block, every thread gets the result. `scratch` holds ≥ 32 floats of shared
/// memory; blockDim.x is a multiple of 32. Warps are summed in index order: deterministic.
__device__ inline float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % warp_size, warp = threadIdx.x / warp_size;
  const int warps = blockDim.x / warp_size;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}

__device__ inline float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % warp_size, warp = threadIdx.x / warp_size;
  const int warps = blockDim.x / warp_size;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = -INFINITY;
  for (int w = 0; w < warps; ++w) m = fmaxf(m, scratch[w]);
  return m;
}

/// GPT-2's tanh GELU and its derivative, in fp32 (as detail/gpt2_cpu_kernels.hpp).
__device__ inline float gelu(float x) {
  constexpr float s = 0.7978845608028654f;  // sqrt(2/π)
  return 0.5f * x * (1.0f + tanhf(s * (x + 0.044715f * x * x * x)));
}
__device__ inline float gelu_grad(float x) {
  constexpr float s = 0.7978845608028654f;
  const float th = tanhf(s * (x + 0.044715f * x * x * x));
  return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * s * (1.0f + 3.0f * 0.044715f * x * x);
}

inline unsigned ceil_div(std::size_t a, std::size_t b) {
  return unsigned((a + b - 1) / b);
}

inline bf16_t* as_device_bf16(trainkit::bf16* p) noexcept {
  return reinterpret_cast<bf16_t*>(p);
}
inline const bf16_t* as_device_bf16(const trainkit::bf16* p) noexcept {
  return reinterpret_cast<const bf16_t*>(p);
}

/// can_implement() helpers: throw config_error naming the kernel and the failed requirement.
/// They sit on every launch, so the message is built only when the check fails: a fixed text is
/// a `const char*`, a formatted one a callable returning it.
[[noreturn]] inline void cannot_run(const char* kernel, std::string_view what) {
  throw config_error(std::string(kernel) + ": cannot run: " + std::string(what));
}
inline void require(bool ok, const char* kernel, const char* what) {
  if (!ok) [[unlikely]]
    cannot_run(kernel, what);
}
template <std::invocable Describe>
inline void require(bool ok, const char* kernel, Describe&& describe) {
  if (!ok) [[unlikely]]
    cannot_run(kernel, std::forward<Describe>(describe)());
}
inline bool aligned_to(const void* p, std::size_t bytes) noexcept {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

}  // namespace trainkit::model::kernels
