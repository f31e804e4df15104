// trainkit/core/cuda/gelu.cuh — GPT-2's tanh GELU and its derivative on the device, in fp32.
//
// The same formulas as the CPU kernels (model/cpu/kernels.hpp), so a GEMM epilogue
// fallback and an elementwise kernel round identically.
#pragma once

#include <cuda_runtime.h>

namespace trainkit::cuda {

__device__ inline float gelu(float x) {
  constexpr float s = 0.7978845608028654f;  // sqrt(2/π)
  return 0.5f * x * (1.0f + tanhf(s * (x + 0.044715f * x * x * x)));
}
__device__ inline float gelu_grad(float x) {
  constexpr float s = 0.7978845608028654f;
  const float th = tanhf(s * (x + 0.044715f * x * x * x));
  return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * s * (1.0f + 3.0f * 0.044715f * x * x);
}

}  // namespace trainkit::cuda
