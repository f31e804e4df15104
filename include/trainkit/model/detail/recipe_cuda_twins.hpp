// trainkit/model/detail/recipe_cuda_twins.hpp — CPU twins of the speedrun recipe's CUDA kernels
// (model/cuda/recipe.cuh: the value-embedding mix and the U-net skip add, with their backwards):
// the same fp32 arithmetic, rounded to bf16 exactly where a kernel stores bf16, and the same
// partial sums for the scalar gradients (one partial per block of `recipe_block` items, then the
// partials added in block order), so a GPU test can hold a kernel to its twin at a fraction of a
// bf16 ulp, while tests/model/test_recipe_cuda_twins.cpp holds each twin to the recipe's CPU
// kernels (model/recipe/value_embeddings.hpp, unet_skips.hpp, pinned to PyTorch by fixtures).
//
// The point-wise math is written once here as TRAINKIT_HOST_DEVICE functions the kernels call
// too; what the twin cannot share is the order of a block's reduction (the kernel's warp
// butterfly), so the scalar gradients agree to fp32 rounding, not bit for bit.
//
// Value mix, per row n of C values (v: the attention's value head(s) of the fused QKV rows):
//   forward:  v_saved[n] = v[n];  v[n] ← bf16(λ₀·v[n] + λ₁·E[tok[n]])           (in place)
//   backward: g = dv[n];  dv[n] ← bf16(λ₀·g);  scaled[n] = bf16(λ₁·g) (then summed per token
//             into dE by the embedding's bucket kernel: deterministic);  dλ₀ += Σ v_saved·g,
//             dλ₁ += Σ E[tok]·g (fp32 partials per block, added in block order).
// U-net skip, per element: forward x ← bf16(x + w·skip); backward dskip ← bf16(dskip + w·dx),
// dw += Σ dx·skip likewise. λ and w are bf16 parameters read on the device (no host sync).
// Plain C++ without Eigen, so nvcc-compiled tests include it. Buffers are float arrays holding
// bf16-representable values where the kernel's are bf16. Not for users.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "trainkit/core/bf16.hpp"
#include "trainkit/core/cuda/host_device.hpp"

namespace trainkit::model::detail {

/// Items (8-element chunks) a kernel block covers: one partial of each scalar gradient per block.
inline constexpr int recipe_block = 256;
inline constexpr int recipe_pack = 8;

/// Blocks (and partials) of a launch over n elements (n a multiple of recipe_pack).
constexpr std::size_t recipe_blocks(std::size_t n) {
  return (n / recipe_pack + recipe_block - 1) / recipe_block;
}

// ---- point-wise math shared with the kernels ----------------------------------------------------

/// The mixed value λ₀·v + λ₁·e.
TRAINKIT_HOST_DEVICE inline float value_mix(float v, float e, float l0, float l1) {
  return l0 * v + l1 * e;
}
/// x + w·skip.
TRAINKIT_HOST_DEVICE inline float skip_add(float x, float skip, float w) {
  return x + w * skip;
}

inline float recipe_round(float x) {
  return trainkit::bf16::from_float(x).to_float();
}

// ---- twins --------------------------------------------------------------------------------------

/// The value mix forward on N rows of C values (C a multiple of 8): v rows ld_v apart (mixed in
/// place), v_saved (N, C) dense (the unmixed values, for the backward), table (V, C).
inline void value_mix_forward_twin(float* v, std::ptrdiff_t ld_v, float* v_saved,
                                   const float* table, const std::int32_t* tokens, std::ptrdiff_t N,
                                   int C, float l0, float l1) {
  for (std::ptrdiff_t n = 0; n < N; ++n) {
    const float* e = table + std::ptrdiff_t(tokens[n]) * C;
    for (int c = 0; c < C; ++c) {
      float& x = v[n * ld_v + c];
      v_saved[n * C + c] = x;
      x = recipe_round(value_mix(x, e[c], l0, l1));
    }
  }
}

/// The value mix backward: dv (rows ld_dv apart, the gradient of the mixed values on entry)
/// becomes λ₀·dv; scaled (N, C) = λ₁·dv, to be summed per token into dE; partials (2 ×
/// recipe_blocks(N·C): all dλ₀ partials, then all dλ₁) written per block of recipe_block chunks.
inline void value_mix_backward_twin(float* dv, std::ptrdiff_t ld_dv, float* scaled, float* partials,
                                    const float* v_saved, const float* table,
                                    const std::int32_t* tokens, std::ptrdiff_t N, int C, float l0,
                                    float l1) {
  const std::size_t chunks = std::size_t(N) * std::size_t(C / recipe_pack);
  const std::size_t blocks = recipe_blocks(std::size_t(N) * std::size_t(C));
  for (std::size_t b = 0; b < blocks; ++b) {
    float p0 = 0.0f, p1 = 0.0f;
    for (std::size_t i = b * recipe_block; i < std::min(chunks, (b + 1) * recipe_block); ++i) {
      const std::ptrdiff_t n = std::ptrdiff_t(i / std::size_t(C / recipe_pack));
      const int c0 = int(i % std::size_t(C / recipe_pack)) * recipe_pack;
      const float* e = table + std::ptrdiff_t(tokens[n]) * C;
      for (int k = 0; k < recipe_pack; ++k) {
        float& g = dv[n * ld_dv + c0 + k];
        const float x = g;
        p0 += v_saved[n * C + c0 + k] * x;
        p1 += e[c0 + k] * x;
        scaled[n * C + c0 + k] = recipe_round(l1 * x);
        g = recipe_round(l0 * x);
      }
    }
    partials[b] = p0;
    partials[blocks + b] = p1;
  }
}

/// grad[j] ← bf16(grad[j] + Σ_b partials[j·blocks + b]) for j < count, in block order.
inline void add_partials_twin(float* grad, const float* partials, std::size_t blocks, int count) {
  for (int j = 0; j < count; ++j) {
    float sum = 0.0f;
    for (std::size_t b = 0; b < blocks; ++b) sum += partials[std::size_t(j) * blocks + b];
    grad[j] = recipe_round(grad[j] + sum);
  }
}

/// x (n) ← x + w·skip.
inline void skip_add_forward_twin(float* x, const float* skip, std::size_t n, float w) {
  for (std::size_t i = 0; i < n; ++i) x[i] = recipe_round(skip_add(x[i], skip[i], w));
}

/// dskip (n) ← dskip + w·dx; partials (recipe_blocks(n)) of Σ dx·skip per block.
inline void skip_add_backward_twin(float* dskip, float* partials, const float* dx,
                                   const float* skip, std::size_t n, float w) {
  const std::size_t chunks = n / recipe_pack, blocks = recipe_blocks(n);
  for (std::size_t b = 0; b < blocks; ++b) {
    float p = 0.0f;
    for (std::size_t i = b * recipe_block; i < std::min(chunks, (b + 1) * recipe_block); ++i)
      for (int k = 0; k < recipe_pack; ++k) {
        const std::size_t j = i * recipe_pack + std::size_t(k);
        p += dx[j] * skip[j];
        dskip[j] = recipe_round(skip_add(dskip[j], dx[j], w));
      }
    partials[b] = p;
  }
}

}  // namespace trainkit::model::detail
