// trainkit/prefetch/concepts.hpp — the Prefetcher role.
//
// A prefetcher owns a data source, runs ahead of the consumer and delivers batches in the memory
// space it names. Users write a *recipe* (`prefetch::threaded<4>`) and the trainer binds it to the
// source type: `Recipe::bind<Source>` is the prefetcher type, constructed from a Source.
#pragma once

#include <concepts>

#include "trainkit/core/batch.hpp"
#include "trainkit/data/concepts.hpp"

namespace trainkit::prefetch {

/// Requires:
///  - `memory_space`: where the batches from `next()` live (host_memory / device_memory);
///  - `source_type`: the data source it owns;
///  - `next()`: the next batch, valid until the following `next()`, in source order;
///  - `wait_ms()`: how long the last `next()` blocked the caller;
///  - `position()`: the source position just after the last batch returned by `next()`
///    (not after the batches prefetched ahead), so checkpoints resume at the right batch;
///  - `seek(p)`: drop whatever was prefetched and continue from p;
///  - `batch_size()`, `seq_len()`, `vocab_size()` forwarded from the source.
template <class P>
concept prefetcher = requires(P p, const P cp, const source_position& pos) {
  typename P::memory_space;
  typename P::source_type;
  requires data::data_source<typename P::source_type>;
  requires std::constructible_from<P, typename P::source_type>;
  { p.next() } -> std::same_as<batch_view<typename P::memory_space>>;
  { cp.wait_ms() } -> std::convertible_to<double>;
  { cp.position() } -> std::same_as<source_position>;
  { p.seek(pos) } -> std::same_as<void>;
  { cp.batch_size() } -> std::convertible_to<int>;
  { cp.seq_len() } -> std::convertible_to<int>;
  { cp.vocab_size() } -> std::convertible_to<int>;
};

/// Requires: `R::bind<S>` names a prefetcher over source S.
template <class R, class S>
concept prefetch_recipe_for = data::data_source<S> && requires {
  typename R::template bind<S>;
} && prefetcher<typename R::template bind<S>>;

}  // namespace trainkit::prefetch
