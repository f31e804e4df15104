// trainkit/data/concepts.hpp — the DataSource role.
//
// A data source yields batches of B windows of T+1 tokens (inputs and targets shifted by one),
// knows the bound its tokens respect, and can report and restore its position exactly.
#pragma once

#include <concepts>

#include "trainkit/core/batch.hpp"

namespace trainkit::data {

/// Requires:
///  - `batch_size()`, `seq_len()`: B and T of every batch it yields;
///  - `vocab_size()`: every token it yields is in [0, vocab_size);
///  - `next(host_batch&)`: fills the batch (resizing it to B×T) and advances;
///  - `position()` / `seek(source_position)`: after `seek(p)` the source yields exactly what it
///    yielded after it last reported `p`;
///  - movable, so a prefetcher can own it.
template <class S>
concept data_source = std::movable<S> && requires(S s, const S cs, host_batch& b,
                                                  const source_position& p) {
  { cs.batch_size() } -> std::convertible_to<int>;
  { cs.seq_len() } -> std::convertible_to<int>;
  { cs.vocab_size() } -> std::convertible_to<int>;
  { s.next(b) } -> std::same_as<void>;
  { cs.position() } -> std::same_as<source_position>;
  { s.seek(p) } -> std::same_as<void>;
};

}  // namespace trainkit::data
