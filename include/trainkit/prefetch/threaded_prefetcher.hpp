// trainkit/prefetch/threaded_prefetcher.hpp — a background thread that runs Depth batches ahead.
//
// The CPU composition's prefetcher: while the model computes step i, a worker thread fills batches
// i+1 .. i+Depth from the source, so a source that is slower than nothing but faster than a step
// costs the loop (almost) no data wait. The ring, its worker, position bookkeeping (position()
// names the batch last *returned*, not the ones prefetched ahead), error transport and stopping
// live in detail/ring_worker.hpp; each slot here is one host_batch the source fills directly.
// Recipe: `prefetch::threaded<Depth>` (bind<S> = threaded_prefetcher<S, Depth>).
#pragma once

#include <cstddef>
#include <exception>
#include <utility>

#include "trainkit/core/batch.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/timing.hpp"
#include "trainkit/data/concepts.hpp"
#include "trainkit/prefetch/concepts.hpp"
#include "trainkit/prefetch/detail/ring_worker.hpp"

namespace trainkit::prefetch {

/// Owns a source and a worker thread that keeps up to Depth batches ready ahead of next().
template <data::data_source S, std::size_t Depth>
class threaded_prefetcher {
  static_assert(Depth >= 1, "threaded_prefetcher needs Depth >= 1 batches of look-ahead");

 public:
  using memory_space = host_memory;
  using source_type = S;
  static constexpr std::size_t depth = Depth;

  explicit threaded_prefetcher(S source)
      : source_(std::move(source)), ring_({.fill = [this](host_batch& b) {
          source_.next(b);
          return source_.position();
        }}) {
    ring_.start(source_.position());
  }

  // The worker thread holds `this`: the object cannot move.
  threaded_prefetcher(const threaded_prefetcher&) = delete;
  threaded_prefetcher& operator=(const threaded_prefetcher&) = delete;

  ~threaded_prefetcher() { ring_.stop(); }

  /// The next batch in source order; valid until the following next() or seek(). Blocks while the
  /// worker has nothing ready; re-throws the source's exception once the batches before it are
  /// delivered.
  batch_view<host_memory> next() {
    stopwatch sw;
    try {
      const host_batch& b = ring_.acquire();
      wait_ms_ = sw.elapsed_ms();
      return view_of(b);
    } catch (...) {
      wait_ms_ = sw.elapsed_ms();
      throw;
    }
  }

  /// How long the last next() blocked the caller, in milliseconds.
  double wait_ms() const noexcept { return wait_ms_; }

  /// The source position just after the batch last returned by next() (or the starting position).
  source_position position() const { return ring_.position(); }

  /// Drops everything prefetched, continues from `p`. If the source rejects p the prefetcher
  /// carries on from where it was and the source's exception propagates.
  void seek(const source_position& p) {
    ring_.stop();
    ring_.seek(source_, p);
  }

  int batch_size() const { return source_.batch_size(); }
  int seq_len() const { return source_.seq_len(); }
  int vocab_size() const { return source_.vocab_size(); }

 private:
  S source_;  // touched only by the worker while it runs
  detail::ring_worker<host_batch, Depth> ring_;
  double wait_ms_ = 0.0;  // consumer thread only
};

/// Recipe: a worker thread keeps Depth batches ready (Depth >= 1).
template <std::size_t Depth>
struct threaded {
  template <class S>
  using bind = threaded_prefetcher<S, Depth>;
};

}  // namespace trainkit::prefetch
