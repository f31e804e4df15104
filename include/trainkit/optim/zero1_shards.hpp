// trainkit/optim/zero1_shards.hpp — where ZeRO-1 cuts the flat parameter buffer between ranks.
//
// Under ZeRO-1 (Rajbhandari et al. 2020, stage 1) rank r owns one contiguous shard of the flat
// buffer: it receives the sum over ranks of that part of the gradients, keeps the AdamW moments of
// that part only and updates it, then every rank gathers the others' updated parameters. The
// reducer (reduce/mpi_zero1.hpp) and the optimizer (optim/zero1_adamw_cpu.hpp) compute the same
// cut from the same three numbers, so they agree without talking to each other.
//
// The cuts fall on multiples of `norm_chunk_elements`, the grid the global gradient norm is summed
// over (optim/grad_clip.hpp): every chunk's partial sum of squares is then computed by exactly one
// rank over exactly the elements one process uses, and the partial sums, gathered and added in
// chunk order, are one process's norm bit for bit. The chunks are dealt out as evenly as whole
// chunks allow (ranks differ by at most one chunk); a model with fewer chunks than ranks leaves
// some ranks an empty shard.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/model/step_protocol.hpp"
#include "trainkit/optim/grad_clip.hpp"

namespace trainkit::optim {

/// Rank `rank`'s shard of a buffer of `n` elements split between `world_size` ranks: elements
/// [offset, offset + count), both multiples of norm_chunk_elements except at the buffer's end.
inline model::gradient_range zero1_shard(std::size_t n, int world_size, int rank) {
  if (world_size <= 0 || rank < 0 || rank >= world_size)
    throw config_error("zero1_shard: rank " + std::to_string(rank) + " of " +
                       std::to_string(world_size) + " ranks");
  const std::size_t chunks = (n + norm_chunk_elements - 1) / norm_chunk_elements;
  const auto ranks = std::size_t(world_size), r = std::size_t(rank);
  const std::size_t first = chunks * r / ranks, last = chunks * (r + 1) / ranks;
  const std::size_t begin = std::min(n, first * norm_chunk_elements);
  const std::size_t end = std::min(n, last * norm_chunk_elements);
  return {begin, end - begin};
}

/// Every rank's shard, in rank order: they tile [0, n).
inline std::vector<model::gradient_range> zero1_shards(std::size_t n, int world_size) {
  std::vector<model::gradient_range> out;
  for (int r = 0; r < world_size; ++r) out.push_back(zero1_shard(n, world_size, r));
  return out;
}

}  // namespace trainkit::optim
