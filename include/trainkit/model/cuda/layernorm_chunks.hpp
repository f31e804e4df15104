// trainkit/model/cuda/layernorm_chunks.hpp — how the LayerNorm backward kernel divides its rows,
// for the kernel (layernorm.cuh) and for the arena plan that sizes its scratch
// (gpt2/cuda_memory.hpp), which host code includes without CUDA.
//
// One block handles a chunk of rows: each of its warps takes a run of consecutive rows, writes
// their input gradient and sums their weight/bias gradients into its own fp32 slice of shared
// memory; the block then adds its warps' slices in warp order into the chunk's fp32 partial, and
// a second kernel adds the chunks in order. Small chunks keep enough blocks in flight (B·T = 16K
// rows make 512 blocks of 4 warps); the partials cost (rows / 32) · 2C floats.
#pragma once

#include <cstddef>

namespace trainkit::model::kernels {

inline constexpr int layernorm_backward_warps = 4;  // warps per block (one chunk)
inline constexpr int layernorm_rows_per_chunk = 32;
inline constexpr int layernorm_rows_per_warp = layernorm_rows_per_chunk / layernorm_backward_warps;
static_assert(layernorm_rows_per_chunk % layernorm_backward_warps == 0);

inline std::size_t layernorm_chunks(std::size_t N) {
  return (N + layernorm_rows_per_chunk - 1) / layernorm_rows_per_chunk;
}

/// fp32 scratch of layernorm_backward: one (Σ dout·norm, Σ dout) pair of C-vectors per chunk.
inline std::size_t layernorm_partial_floats(std::size_t N, int C) {
  return layernorm_chunks(N) * 2 * std::size_t(C);
}

}  // namespace trainkit::model::kernels
