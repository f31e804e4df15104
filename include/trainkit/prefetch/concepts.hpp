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
///  - `next()`: the next batch, valid until the following `next()`, in source order (the
///    trainer times the call itself: that is the step's data_wait_ms);
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
  { cp.position() } -> std::same_as<source_position>;
  { p.seek(pos) } -> std::same_as<void>;
  { cp.batch_size() } -> std::convertible_to<int>;
  { cp.seq_len() } -> std::convertible_to<int>;
  { cp.vocab_size() } -> std::convertible_to<int>;
};

/// Optional hook: a device prefetcher that tells how much of the last `next()`'s wait was its
/// host-to-device copy (`last_h2d_wait_ms()`); the trainer books that part as h2d_ms instead of
/// data_wait_ms.
template <class P>
concept reports_copy_wait = requires(const P cp) {
  { cp.last_h2d_wait_ms() } -> std::convertible_to<double>;
};

/// Optional hook: a prefetcher that orders its copies on the trainer's execution context
/// (`bind_context(ctx)`, called once before the first step) instead of waiting on the host: the
/// context's stream waits for each copy, and the copy into a slot waits for the context's work
/// on the batch that slot held.
template <class P, class Context>
concept orders_on_context = requires(P p, Context& ctx) {
  { p.bind_context(ctx) } -> std::same_as<void>;
};

/// Requires: `R::bind<S>` names a prefetcher over source S.
template <class R, class S>
concept prefetch_recipe_for = data::data_source<S> && requires {
  typename R::template bind<S>;
} && prefetcher<typename R::template bind<S>>;

}  // namespace trainkit::prefetch
