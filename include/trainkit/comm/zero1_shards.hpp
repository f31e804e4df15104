// trainkit/comm/zero1_shards.hpp — where ZeRO-1 cuts the flat parameter buffer between ranks.
//
// Under ZeRO-1 (Rajbhandari et al. 2020, stage 1) rank r owns one contiguous shard of the flat
// buffer: it receives the sum over ranks of that part of the gradients, keeps the AdamW moments of
// that part only and updates it, then every rank gathers the others' updated parameters. The
// reducers (reduce/mpi_zero1.hpp, reduce/nccl_zero1.hpp) and the optimizers
// (optim/zero1_adamw_cpu.hpp, optim/zero1_adamw_cuda.hpp) compute the same cut from the same three
// numbers, so they agree without talking to each other. The rest of the host-side arithmetic both
// devices need is here too, once: where a gradient range meets a shard, which norm chunks a shard
// holds, and the parameter layout clipped to a shard (the weight-decay rule of the shard's
// elements). It lives in comm/, the layer both halves of the pair stand on (optim/ and reduce/
// never include each other); optim/zero1_shards.hpp brings the names into trainkit::optim.
//
// The cuts fall on multiples of `norm_chunk_elements` (comm/norm_chunks.hpp), the grid the global
// gradient norm is summed over (optim/grad_clip.hpp): every chunk's partial sum of squares is then
// computed by exactly one rank over exactly the elements one process uses, and the partial sums,
// combined and added in chunk order, are one process's norm bit for bit. The chunks are dealt out
// as evenly as whole chunks allow (ranks differ by at most one chunk); a model with fewer chunks
// than ranks leaves some ranks an empty shard.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "trainkit/comm/norm_chunks.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/core/tensor.hpp"

namespace trainkit::comm {

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

/// The elements `a` and `b` share (count 0 when they share none).
inline model::gradient_range zero1_overlap(model::gradient_range a,
                                           model::gradient_range b) noexcept {
  const std::size_t lo = std::max(a.offset, b.offset);
  const std::size_t hi = std::min(a.offset + a.count, b.offset + b.count);
  return hi > lo ? model::gradient_range{lo, hi - lo} : model::gradient_range{lo, 0};
}

/// One piece of a gradient range, all of it inside the shard of rank `owner`.
struct zero1_piece {
  std::size_t offset = 0;
  std::size_t count = 0;
  int owner = 0;

  friend bool operator==(const zero1_piece&, const zero1_piece&) = default;
};

/// `range` cut where the shards meet it: one piece per rank whose shard it overlaps, in rank
/// order (the order the shards lie in the buffer), none empty. `shards` is zero1_shards(n, N).
inline std::vector<zero1_piece> zero1_pieces(model::gradient_range range,
                                             std::span<const model::gradient_range> shards) {
  std::vector<zero1_piece> out;
  for (std::size_t r = 0; r < shards.size(); ++r)
    if (const model::gradient_range o = zero1_overlap(range, shards[r]); o.count > 0)
      out.push_back({o.offset, o.count, int(r)});
  return out;
}

/// The norm chunks `shard` holds, as chunk indices [offset, offset + count) of the grid over the
/// whole buffer (its offset is on the grid, so its chunks are whole but for the buffer's last).
inline model::gradient_range zero1_norm_chunks(model::gradient_range shard) noexcept {
  return {shard.offset / norm_chunk_elements,
          (shard.count + norm_chunk_elements - 1) / norm_chunk_elements};
}

/// The tensors of `layout` that meet `shard`, clipped to it, with offsets from the shard's start:
/// the layout of the shard seen as a model of its own, so that an optimizer's decay rule
/// (optim/decay_segments.hpp) falls on exactly the elements it falls on in the whole buffer.
inline std::vector<tensor_info> zero1_clip_layout(std::span<const tensor_info> layout,
                                                  model::gradient_range shard) {
  std::vector<tensor_info> out;
  for (const tensor_info& t : layout) {
    const model::gradient_range o = zero1_overlap({t.offset, t.numel()}, shard);
    if (o.count > 0)
      out.push_back({t.name, {std::int64_t(o.count)}, o.offset - shard.offset, t.role});
  }
  return out;
}

}  // namespace trainkit::comm
