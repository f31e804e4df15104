// trainkit/core/cuda/bf16.cuh — bf16 on the device: the CUDA type, 16-byte packs of eight, and the
// view of trainkit::bf16 buffers as device bf16.
//
// bf16 storage with fp32 arithmetic: kernels load 8 bf16 at a time as one 16-byte access (the
// widest a thread can issue), convert to float, compute, round once on store.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstring>

#include "trainkit/core/bf16.hpp"

namespace trainkit::cuda {

using bf16_t = __nv_bfloat16;

static_assert(sizeof(bf16_t) == sizeof(trainkit::bf16) &&
                  alignof(bf16_t) == alignof(trainkit::bf16),
              "trainkit::bf16 and __nv_bfloat16 must be layout-identical");

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

inline bf16_t* as_device_bf16(trainkit::bf16* p) noexcept {
  return reinterpret_cast<bf16_t*>(p);
}
inline const bf16_t* as_device_bf16(const trainkit::bf16* p) noexcept {
  return reinterpret_cast<const bf16_t*>(p);
}

}  // namespace trainkit::cuda
