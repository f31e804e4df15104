// trainkit/model/detail/flash_mma_layout.hpp — the index arithmetic of the flash-attention
// forward kernel (model/cuda/flash_attention.cuh), shared with its CPU emulation
// (tests/cuda/flash_mma_port.hpp) so the two cannot drift apart.
//
// The kernel works on `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32` fragments loaded with
// `ldmatrix` from shared tiles. What the hardware does with an address or a register is fixed by
// the PTX ISA (the emulation models that independently, from the ISA's tables); what this header
// fixes is the kernel's side of the contract:
//   * where a bf16 element of a (rows × hs) shared tile lives: rows are hs elements long, no
//     padding, and the 16-byte chunks of a row are XOR-swizzled with the row's low three bits, so
//     the eight rows an `ldmatrix` phase reads (same logical chunk) sit in eight different bank
//     groups, and so do the 16-byte `cp.async` writes of a quarter warp;
//   * which row and column each lane hands to `ldmatrix .x4` for an A operand (16 × 16, also used
//     with `.trans` for V as the B operand of P·V) and for Kᵀ as the B operand of Q·Kᵀ;
//   * which (row, column) of the 16 × 8 tile an accumulator register holds (for the causal mask,
//     the row statistics and the output), and which chunk of a tile a thread copies;
//   * the forward's rows per warp and block, its first and last key tiles, and the causal test on
//     the tiles that cross the diagonal (the backward's transposed diagonal test builds on the
//     square one);
//   * the sliding window (a per-call W, 0 = full causal): query i sees keys j with
//     i − W < j ≤ i. Key tiles wholly left of a block's window are never visited; a tile is
//     masked element by element only where it crosses the window's left edge or the diagonal.
// Not for users.
#pragma once

#include "trainkit/core/cuda/host_device.hpp"

namespace trainkit::model::detail::flash_mma {

inline constexpr int chunk = 8;  // bf16 elements in 16 bytes: one cp.async, one ldmatrix row

/// Element offset of (row, col) in a tile of rows `hs` bf16 long; col a multiple of 8 gives the
/// start of a 16-byte chunk. The swizzle permutes chunks within each aligned group of eight.
TRAINKIT_HOST_DEVICE constexpr int swizzled(int row, int col, int hs) {
  return row * hs + (((col / chunk) ^ (row % 8)) * chunk) + col % chunk;
}

/// `ldmatrix .x4` of a 16 × 16 block stored row-major (Q as the A operand of Q·Kᵀ; V, with
/// `.trans`, as the B operand of P·V): lanes 0-7 give rows 0-7 of columns 0-7, lanes 8-15 rows
/// 8-15, lanes 16-23 rows 0-7 of columns 8-15, lanes 24-31 rows 8-15 of them. Without `.trans`
/// registers 0..3 are then the A fragment a0..a3; with `.trans` (V: rows are keys, columns are
/// head dimensions) registers 0, 1 are the B fragment of dimensions 0-7 and 2, 3 that of 8-15.
TRAINKIT_HOST_DEVICE constexpr int ldsm_a_row(int lane) {
  return lane % 8 + 8 * ((lane / 8) % 2);
}
TRAINKIT_HOST_DEVICE constexpr int ldsm_a_col(int lane) {
  return 8 * (lane / 16);
}

/// `ldmatrix .x4` of 16 keys × 16 head dimensions of K (row-major, a row per key) as the B
/// operand (k = head dimension, n = key) of two m16n8k16 products: lanes 0-7 give keys 0-7 of
/// dimensions 0-7, lanes 8-15 keys 0-7 of dimensions 8-15, lanes 16-31 the same for keys 8-15.
/// Registers 0, 1 are then the B fragment of keys 0-7, registers 2, 3 that of keys 8-15.
TRAINKIT_HOST_DEVICE constexpr int ldsm_bt_row(int lane) {
  return lane % 8 + 8 * (lane / 16);
}
TRAINKIT_HOST_DEVICE constexpr int ldsm_bt_col(int lane) {
  return 8 * ((lane / 8) % 2);
}

/// Row (0..15) and column (0..7) of accumulator register i (0..3) of an m16n8 fp32 tile. A row's
/// values sit in the four lanes of a quad (lane / 4), which is why row maxima and sums reduce
/// with shuffles across lane bits 0 and 1.
TRAINKIT_HOST_DEVICE constexpr int acc_row(int lane, int i) {
  return lane / 4 + 8 * (i / 2);
}
TRAINKIT_HOST_DEVICE constexpr int acc_col(int lane, int i) {
  return 2 * (lane % 4) + i % 2;
}

/// The tile copy: chunk `i` of `per_thread` of thread `tid` (of `threads`) in a tile hs wide.
/// Consecutive threads take consecutive chunks of a row, so global reads coalesce.
TRAINKIT_HOST_DEVICE constexpr int copy_row(int tid, int i, int threads, int hs) {
  return (i * threads + tid) / (hs / chunk);
}
TRAINKIT_HOST_DEVICE constexpr int copy_col(int tid, int i, int threads, int hs) {
  return (i * threads + tid) % (hs / chunk) * chunk;
}

/// Row groups of 16 a forward warp owns: two at hs 64 (32 query rows, 128-row blocks), so each K
/// and V fragment serves two m16 products; one at hs 128, where two would need ~256 registers of
/// accumulators and Q fragments alone (docs/cuda.md's resource table).
TRAINKIT_HOST_DEVICE constexpr int forward_row_groups(int hs) {
  return hs == 64 ? 2 : 1;
}
/// Query rows of a forward block: 4 warps of 16·forward_row_groups(hs).
TRAINKIT_HOST_DEVICE constexpr int forward_block_rows(int hs) {
  return 4 * 16 * forward_row_groups(hs);
}
/// The last key tile (of `block_k` keys) a forward block of query rows q0..q0 + rows − 1 visits:
/// the one holding its last real query's key; later keys are masked for every real row.
TRAINKIT_HOST_DEVICE constexpr int forward_last_key_tile(int q0, int rows, int T, int block_k) {
  return ((q0 + rows < T ? q0 + rows : T) - 1) / block_k;
}
/// Whether the query at position `query` sees the key at position `key` (positions in the
/// sequence). Keys past T sit right of every real query, so this is also their mask.
TRAINKIT_HOST_DEVICE constexpr bool causal_visible(int query, int key) {
  return key <= query;
}
/// Whether a key tile starting at k0 (block_k keys) holds a key right of the first query of a
/// row group starting at `first_row`: only then does the group need the causal test.
TRAINKIT_HOST_DEVICE constexpr bool needs_mask(int k0, int block_k, int first_row) {
  return k0 + block_k - 1 > first_row;
}

/// Whether the query at position `query` sees the key at position `key` under a sliding window of
/// `window` keys ending at the query (0 = full causal): query − window < key ≤ query. The
/// recipe's window (model/recipe/sliding_window_attention.hpp) and cuDNN's diagonal band with a
/// top-left left bound of `window` keep exactly these keys.
TRAINKIT_HOST_DEVICE constexpr bool window_visible(int query, int key, int window) {
  return key <= query && (window == 0 || query - key < window);
}
/// Whether some query up to `last_query` misses some key from `first_key` on because of the
/// window: a (row group, key tile) pair needs the element-wise window test only then.
TRAINKIT_HOST_DEVICE constexpr bool needs_window_mask(int last_query, int first_key, int window) {
  return window != 0 && last_query - first_key >= window;
}
/// The first key tile (of `block_k` keys) a forward block whose first query is q0 visits: the one
/// holding that query's first visible key. Earlier tiles are left of every row's window and are
/// skipped, not masked. Window 0 (full causal): tile 0.
TRAINKIT_HOST_DEVICE constexpr int forward_first_key_tile(int q0, int window, int block_k) {
  return window == 0 || q0 - window + 1 <= 0 ? 0 : (q0 - window + 1) / block_k;
}
/// The window the kernels run: 0 (full causal, no window test) for a window of T or more, which
/// hides no key from any query; `window` otherwise. window ≥ 0.
TRAINKIT_HOST_DEVICE constexpr int effective_window(int window, int T) {
  return window >= T ? 0 : window;
}

/// On the diagonal tile (key tile index = query tile index, square tiles), whether the query at
/// tile row `row` sees the key at tile column `col`. Every earlier tile is fully visible; keys
/// past T only occur on the diagonal tile and to the right of every real query, so this is also
/// the sequence-end mask for real rows.
TRAINKIT_HOST_DEVICE constexpr bool diagonal_visible(int row, int col) {
  return col <= row;
}

}  // namespace trainkit::model::detail::flash_mma
