// trainkit/model/detail/flash_mma_backward_layout.hpp — the index arithmetic of the flash-attention
// backward kernel (model/cuda/flash_attention.cuh), shared with its lane-level CPU emulation
// (tests/cuda/flash_mma_backward_port.hpp) so the two cannot drift apart.
//
// The backward works transposed: warp w of a block owns keys 16w..16w+15 of the key tile and
// computes Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (16 keys × 64 queries), so that Pᵀ and dSᵀ sit in m16n8
// accumulators whose pairs are the A fragments of dV += Pᵀ·dO and dK += dSᵀ·Q (the forward's
// P·V trick, twice: no shared-memory round trip for either), and dK, dV stay in registers. Only
// dQ = dS·K needs another partition (a warp per 16 queries), so dSᵀ goes through one small shared
// bf16 tile (keys × queries, swizzled like every other tile) and comes back by `ldmatrix .trans`.
// Every shared tile keeps the forward's swizzle (flash_mma_layout.hpp); the operands map onto the
// forward's four ldmatrix patterns:
//   * K (for Sᵀ) and V (for dPᵀ) as A operands: the forward's Q pattern (ldsm_a_*, no .trans);
//   * Qᵀ (for Sᵀ) and dOᵀ (for dPᵀ) as B operands: the forward's K pattern (ldsm_bt_*);
//   * dO (for dV), Q (for dK) and K (for dQ) as B operands: the forward's V pattern (ldsm_a_*,
//     .trans);
//   * dS (for dQ) as the A operand, read from the dSᵀ tile with .trans: lanes 0-7 give keys 0-7
//     of queries 0-7, lanes 8-15 keys 0-7 of queries 8-15, lanes 16-31 the same for keys 8-15
//     (which is the ldsm_bt pattern: register j is then the transpose of matrix j, i.e. a0..a7
//     of the 16 queries × 16 keys block).
// Under a sliding window the block visits the query tiles from the diagonal one to end_query_tile
// (the last whose queries reach its keys), and tests elements on the diagonal tile and where a
// warp's keys cross the window's left edge of the tile's last query (the forward's
// needs_window_mask, window_visible transposed).
// What the hardware does with those addresses is the emulation's independent model of the PTX
// ISA; this header is only the kernel's side. Not for users.
#pragma once

#include "trainkit/core/cuda/host_device.hpp"
#include "trainkit/model/detail/flash_mma_layout.hpp"

namespace trainkit::model::detail::flash_mma_backward {

namespace fwd = trainkit::model::detail::flash_mma;
using fwd::chunk;
using fwd::swizzled;

/// Key (0..15, within the warp's strip) and query (0..7, within the n8 block) of accumulator
/// register i of Sᵀ, Pᵀ, dPᵀ, dSᵀ: rows are keys, columns queries.
TRAINKIT_HOST_DEVICE constexpr int acc_key(int lane, int i) {
  return fwd::acc_row(lane, i);
}
TRAINKIT_HOST_DEVICE constexpr int acc_query(int lane, int i) {
  return fwd::acc_col(lane, i);
}
/// Row (0..15) and column (0..7) of accumulator register i of dK, dV (rows keys, columns head
/// dimensions) and of dQ (rows queries).
TRAINKIT_HOST_DEVICE constexpr int acc_row(int lane, int i) {
  return fwd::acc_row(lane, i);
}
TRAINKIT_HOST_DEVICE constexpr int acc_col(int lane, int i) {
  return fwd::acc_col(lane, i);
}

/// On the diagonal tile (key tile = query tile), whether key `key` (tile row of Sᵀ) is seen by
/// query `query` (tile column): key ≤ query. Keys past T only occur there, right of every real
/// query.
TRAINKIT_HOST_DEVICE constexpr bool diagonal_visible(int key, int query) {
  return fwd::diagonal_visible(query, key);
}

/// One past the last query tile (of `block_q`, T queries in all) that sees key tile `kt` (keys
/// kt·block_k ..) under the window (0 = full causal: every tile to the end): key j is seen by
/// queries j … j + window − 1. Later query tiles are skipped, not masked. window < T (the
/// launcher passes effective_window).
TRAINKIT_HOST_DEVICE constexpr int end_query_tile(int kt, int block_k, int block_q, int T,
                                                  int window) {
  const int tiles = (T + block_q - 1) / block_q;
  if (window == 0) return tiles;
  const int last_query = kt * block_k + block_k - 1 + window - 1;
  const int end = last_query / block_q + 1;
  return end < tiles ? end : tiles;
}

/// Whether key `key` is seen by query `query` (positions in the sequence) under the window: the
/// forward's test transposed.
TRAINKIT_HOST_DEVICE constexpr bool window_visible(int key, int query, int window) {
  return fwd::window_visible(query, key, window);
}

/// `ldmatrix .x4` (no .trans) of 16 rows × 16 columns of a row-major tile as an A operand: K or
/// V rows (keys) 16w.., head dimensions 16kk.. (the forward's Q pattern).
TRAINKIT_HOST_DEVICE constexpr int ldsm_a_row(int lane) {
  return fwd::ldsm_a_row(lane);
}
TRAINKIT_HOST_DEVICE constexpr int ldsm_a_col(int lane) {
  return fwd::ldsm_a_col(lane);
}
/// `ldmatrix .x4` (no .trans) of 16 rows (queries) × 16 head dimensions of Q or dO as the B
/// operand Qᵀ, dOᵀ of two m16n8k16 products (the forward's K pattern): registers 0, 1 are queries
/// 0-7, registers 2, 3 queries 8-15.
TRAINKIT_HOST_DEVICE constexpr int ldsm_bt_row(int lane) {
  return fwd::ldsm_bt_row(lane);
}
TRAINKIT_HOST_DEVICE constexpr int ldsm_bt_col(int lane) {
  return fwd::ldsm_bt_col(lane);
}
/// `ldmatrix .x4 .trans` of 16 rows (queries for dO and Q, keys for K) × 16 head dimensions as
/// the B operand of two products (the forward's V pattern): registers 0, 1 are dimensions 0-7,
/// registers 2, 3 dimensions 8-15.
TRAINKIT_HOST_DEVICE constexpr int ldsm_trans_b_row(int lane) {
  return fwd::ldsm_a_row(lane);
}
TRAINKIT_HOST_DEVICE constexpr int ldsm_trans_b_col(int lane) {
  return fwd::ldsm_a_col(lane);
}
/// `ldmatrix .x4 .trans` of the dSᵀ tile as the A operand dS (16 queries × 16 keys) of dQ += dS·K:
/// the key (tile row) and query (tile column) whose 8 elements lane gives.
TRAINKIT_HOST_DEVICE constexpr int ldsm_ds_key(int lane) {
  return lane % 8 + 8 * (lane / 16);
}
TRAINKIT_HOST_DEVICE constexpr int ldsm_ds_query(int lane) {
  return 8 * ((lane / 8) % 2);
}

/// swizzled(r + dr, c + dc, width) from base = swizzled(r, c, width), for c of 0 or 8 (every
/// ldmatrix lane's column), dr a multiple of 8 and dc a multiple of 16 with c + dc < width: the
/// row step keeps the row's low three bits, and dc only flips chunk bits above c's, so the step is
/// an XOR and an add. The kernel computes one base per lane and pattern and steps from it, which
/// keeps one register per pattern live instead of one per step.
TRAINKIT_HOST_DEVICE constexpr int swizzled_step(int base, int dr, int dc, int width) {
  return (base ^ dc) + dr * width;
}

/// Element offset of (key, query) in the dSᵀ tile: `width` queries (the query tile) a row,
/// swizzled as the other tiles.
TRAINKIT_HOST_DEVICE constexpr int ds_offset(int key, int query, int width) {
  return swizzled(key, query, width);
}

}  // namespace trainkit::model::detail::flash_mma_backward
