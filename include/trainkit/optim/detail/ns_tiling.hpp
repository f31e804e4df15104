// trainkit/optim/detail/ns_tiling.hpp — the index maps of newton_schulz_cuda's normalisation and
// transposes (optim/cuda/newton_schulz.cuh), host-compilable so a CPU test walks whole grids.
//
// The normalisation was one 512-thread block per matrix (a d12 step's 12 q|k|v slices: 12 blocks
// on 132 SMs, each summing 1.8 M squares alone) whose transposed writes of tall matrices strode
// by `rows` elements per thread (uncoalesced), as did the transpose back. Now:
//   1. the sum of squares is split into slices of ns_norm_slice elements, one 256-thread block
//      each (a partial per slice, fp32);
//   2. one thread per matrix adds its partials in slice order: inv = 1 / (sqrt(Σ) + 1e-7);
//   3. a tiled copy moves 32×32 tiles through shared memory (32×8 threads, 4 rows each), scaled
//      by inv and transposed for a tall matrix, so that both the reads and the writes of a warp
//      are 32 consecutive elements; the transpose back of a tall result is the same copy with no
//      scale.
// All three are deterministic (fixed slices, fixed orders). The functions below are what the
// kernels call; tests/optim/test_ns_tiling.cpp walks them over whole grids on the CPU (every
// element read once and written once to its transposed place; each warp's reads and writes
// contiguous), since no GPU runs here.
#pragma once

#include <cstdint>

#include "trainkit/core/cuda/host_device.hpp"

namespace trainkit::optim::detail {

inline constexpr int ns_norm_threads = 256;               // threads of a sum-of-squares block
inline constexpr std::int64_t ns_norm_slice = 16 * 1024;  // elements one such block sums
inline constexpr int ns_tile = 32;                        // a tile is ns_tile × ns_tile
inline constexpr int ns_tile_rows = 8;                    // thread rows: (32, 8) threads a block
inline constexpr int ns_tile_steps = ns_tile / ns_tile_rows;  // rows each thread moves

/// Slices (sum-of-squares blocks) of one matrix of n elements.
TRAINKIT_HOST_DEVICE inline std::int64_t ns_norm_slices(std::int64_t n) {
  return (n + ns_norm_slice - 1) / ns_norm_slice;
}

/// Where sum-of-squares block `block` (of slices·count, matrix-major) reads: matrix, [begin, end).
struct ns_slice {
  std::int64_t matrix, begin, end;
};
TRAINKIT_HOST_DEVICE inline ns_slice ns_slice_of(std::int64_t block, std::int64_t n) {
  const std::int64_t per = ns_norm_slices(n), s = block % per;
  const std::int64_t end = (s + 1) * ns_norm_slice;
  return {block / per, s * ns_norm_slice, end < n ? end : n};
}

/// The tiles of a (rows, cols) source matrix; blocks of the tiled copy = tiles · count.
struct ns_tile_grid {
  int rows, cols;  // of the source
  int tile_rows, tile_cols;
  std::int64_t per_matrix;  // tiles
};
TRAINKIT_HOST_DEVICE inline ns_tile_grid ns_tiles(int rows, int cols) {
  const int tr = (rows + ns_tile - 1) / ns_tile, tc = (cols + ns_tile - 1) / ns_tile;
  return {rows, cols, tr, tc, std::int64_t(tr) * tc};
}

/// Block `block` of the tiled copy: its matrix and the source tile's first row and column
/// (tiles row-major within a matrix, matrices one after another).
struct ns_tile_at {
  std::int64_t matrix;
  int r0, c0;
};
TRAINKIT_HOST_DEVICE inline ns_tile_at ns_tile_of(std::int64_t block, const ns_tile_grid& g) {
  const std::int64_t t = block % g.per_matrix;
  return {block / g.per_matrix, int(t / g.tile_cols) * ns_tile, int(t % g.tile_cols) * ns_tile};
}

/// Thread (tx, ty), step k (0 .. ns_tile_steps): the source element it loads, (r, c) of the
/// source, kept at shared tile[ty + 8k][tx]. Lanes tx = 0..31 of a warp read one row's 32
/// consecutive elements. Out of range (r >= rows or c >= cols): nothing is loaded.
struct ns_cell {
  int r, c;
};
TRAINKIT_HOST_DEVICE inline ns_cell ns_load_cell(const ns_tile_at& t, int tx, int ty, int k) {
  return {t.r0 + ty + k * ns_tile_rows, t.c0 + tx};
}

/// Thread (tx, ty), step k: the element it stores, as (i, j) of the destination, and the shared
/// slot it takes the value from. Not transposed: the destination is (rows, cols) and the thread
/// writes what it loaded (tile[ty + 8k][tx] to (r, c)). Transposed: the destination is (cols,
/// rows) and lanes tx = 0..31 write 32 consecutive elements of destination row c0 + ty + 8k:
/// tile[tx][ty + 8k], the source's (r0 + tx, c0 + ty + 8k).
struct ns_store {
  int i, j;                // destination row, column
  int slot_row, slot_col;  // shared tile[slot_row][slot_col]
};
TRAINKIT_HOST_DEVICE inline ns_store ns_store_cell(const ns_tile_at& t, int tx, int ty, int k,
                                                   bool transpose) {
  const int y = ty + k * ns_tile_rows;
  if (!transpose) return {t.r0 + y, t.c0 + tx, y, tx};
  return {t.c0 + y, t.r0 + tx, tx, y};
}

}  // namespace trainkit::optim::detail
