// trainkit/comm/norm_chunks.hpp — the grid the global gradient norm is summed over.
//
// The global L2 norm of the gradients (optim/grad_clip.hpp) is a sum of squares taken in fixed
// chunks of the flat gradient buffer, whose partial sums are added in chunk order: the result then
// depends only on the gradients, not on the number of OpenMP threads, GPUs' blocks or ranks. Every
// cut of the buffer between ranks (comm/zero1_shards.hpp) falls on this grid, so each chunk's
// partial sum is computed by exactly one rank over exactly the elements one process uses. The grid
// lives here, in the layer under both optim/ (which sums the norm) and reduce/ (which shards the
// gradients), so that neither includes the other.
#pragma once

#include <cstddef>

namespace trainkit::comm {

/// Elements per partial sum: large enough to amortise the OpenMP scheduling, small enough that a
/// d2 test model still spreads over both cores. Changing it changes the last bits of the norm.
inline constexpr std::size_t norm_chunk_elements = std::size_t{1} << 15;

/// Chunks of the grid that `n` elements from a chunk boundary occupy (the last one may be short).
constexpr std::size_t norm_chunk_count(std::size_t n) noexcept {
  return (n + norm_chunk_elements - 1) / norm_chunk_elements;
}

}  // namespace trainkit::comm
