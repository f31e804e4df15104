// trainkit/tokenizer/detail/bpe_merge.hpp — byte-pair merging of one pre-tokenized piece.
//
// Follows tiktoken's byte_pair_merge (src/lib.rs) exactly, because matching its ids is the goal:
// start from single bytes; repeatedly merge the adjacent pair whose concatenated bytes form the
// token of lowest rank (id), taking the leftmost pair on ties; stop when no adjacent pair forms a
// token. Note this ranks concatenations, not the (left, right) pairs listed in vocab.bpe; for the
// GPT-2 files the two agree, and the loader checks the files are consistent in that sense.
//
// Short pieces (nearly all of them) use tiktoken's linear scan over a small array. Long pieces
// (a 10 kB run of letters, a base64 blob) would make that quadratic, so above a threshold the
// same order of merges is found with a min-heap keyed on (rank, position) over a linked list —
// the pair popped is always the current minimum rank, leftmost among equals, as in the scan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/tokenizer/detail/token_table.hpp"

namespace trainkit::tokenizer::detail {

inline constexpr std::uint32_t no_rank = token_table::not_found;

/// Reusable buffers so encoding a document does not allocate per piece.
struct bpe_scratch {
  std::vector<std::uint32_t> starts;  // piece offsets of the current parts, plus the end
  std::vector<std::uint32_t> ranks;   // ranks[i]: rank of merging parts i and i+1
};

/// Pieces up to this many bytes use the linear scan. Chosen so that the scan's O(n^2) stays
/// below the heap's allocation and log factor: words of English text are < 20 bytes.
inline constexpr std::size_t bpe_linear_max_bytes = 256;

namespace bpe_impl {

inline void merge_linear(std::string_view piece, const token_table& table, bpe_scratch& s,
                         std::vector<std::uint32_t>& out) {
  const std::size_t n = piece.size();
  auto& starts = s.starts;
  auto& ranks = s.ranks;
  starts.resize(n + 1);
  ranks.resize(n + 1);
  for (std::size_t i = 0; i <= n; ++i) starts[i] = static_cast<std::uint32_t>(i);
  // rank of the token spanning parts i..i+1, i.e. bytes [starts[i], starts[i+2]).
  auto pair_rank = [&](std::size_t i, std::size_t parts) -> std::uint32_t {
    if (i + 2 >= parts + 1) return no_rank;
    return table.find(piece.data() + starts[i], starts[i + 2] - starts[i]);
  };
  std::size_t parts = n;  // number of parts; starts has parts + 1 entries in use
  for (std::size_t i = 0; i + 1 < parts; ++i) ranks[i] = pair_rank(i, parts);
  ranks[parts - 1] = no_rank;
  while (parts > 1) {
    std::uint32_t best = no_rank;
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < parts; ++i) {
      if (ranks[i] < best) {
        best = ranks[i];
        at = i;
      }
    }
    if (best == no_rank) break;
    // Merge parts `at` and `at + 1`: drop boundary at+1, then re-rank the two neighbours.
    for (std::size_t i = at + 1; i < parts; ++i) starts[i] = starts[i + 1];
    for (std::size_t i = at + 1; i + 1 < parts; ++i) ranks[i] = ranks[i + 1];
    --parts;
    ranks[parts - 1] = no_rank;
    ranks[at] = pair_rank(at, parts);
    if (at > 0) ranks[at - 1] = pair_rank(at - 1, parts);
  }
  for (std::size_t i = 0; i < parts; ++i)
    out.push_back(table.find(piece.data() + starts[i], starts[i + 1] - starts[i]));
}

inline void merge_heap(std::string_view piece, const token_table& table,
                       std::vector<std::uint32_t>& out) {
  const std::size_t n = piece.size();
  // Parts as a doubly linked list over byte positions: part i spans [i, next[i]).
  std::vector<std::uint32_t> next(n), prev(n);
  std::vector<bool> alive(n, true);
  for (std::size_t i = 0; i < n; ++i) {
    next[i] = static_cast<std::uint32_t>(i + 1);
    prev[i] = static_cast<std::uint32_t>(i == 0 ? 0 : i - 1);
  }
  auto rank_at = [&](std::uint32_t i) -> std::uint32_t {  // rank of merging part i with its next
    const std::uint32_t j = next[i];
    if (j >= n) return no_rank;
    return table.find(piece.data() + i, next[j] - i);
  };
  // (rank, position, end of the pair when pushed): an entry is stale when the pair it described
  // no longer exists with the same extent.
  using entry = std::pair<std::uint64_t, std::uint32_t>;
  std::priority_queue<entry, std::vector<entry>, std::greater<>> heap;
  auto push = [&](std::uint32_t i) {
    const std::uint32_t r = rank_at(i);
    if (r == no_rank) return;
    heap.push({(std::uint64_t{r} << 32) | i, next[next[i]]});
  };
  for (std::uint32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const auto [key, pair_end] = heap.top();
    heap.pop();
    const auto i = static_cast<std::uint32_t>(key & 0xFFFFFFFFu);
    if (!alive[i] || next[i] >= n || next[next[i]] != pair_end) continue;  // stale
    const std::uint32_t j = next[i];
    alive[j] = false;
    next[i] = next[j];
    if (next[i] < n) prev[next[i]] = i;
    push(i);
    if (i > 0) push(prev[i]);
  }
  for (std::uint32_t i = 0; i < n; i = next[i])
    out.push_back(table.find(piece.data() + i, next[i] - i));
}

}  // namespace bpe_impl

/// Appends the ids of `piece` (non-empty) to `out`. `byte_ids[b]` is the id of the single byte b.
inline void bpe_encode_piece(std::string_view piece, const token_table& table,
                             const std::uint32_t (&byte_ids)[256], bpe_scratch& scratch,
                             std::vector<std::uint32_t>& out) {
  if (piece.size() == 1) {
    out.push_back(byte_ids[static_cast<unsigned char>(piece[0])]);
    return;
  }
  // Most pieces of natural text are whole tokens: one lookup instead of a merge loop.
  if (const std::uint32_t id = table.find(piece); id != token_table::not_found) {
    out.push_back(id);
    return;
  }
  if (piece.size() >= 0xFFFFFFFFu)  // the merge loops index bytes with 32-bit offsets
    throw format_error("a single pre-tokenized piece of " + std::to_string(piece.size()) +
                       " bytes is too long to encode (limit 4 GiB)");
  if (piece.size() <= bpe_linear_max_bytes)
    bpe_impl::merge_linear(piece, table, scratch, out);
  else
    bpe_impl::merge_heap(piece, table, out);
}

}  // namespace trainkit::tokenizer::detail
