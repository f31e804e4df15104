// trainkit/prefetch/inline_prefetcher.hpp — the no-overlap prefetcher: next() calls the source.
//
// The baseline every other prefetcher is measured against, and the right choice when the source
// is effectively free (synthetic data, a small mmap'd shard). All of the source's time shows up
// as data wait, which is exactly what the step profile should report for this composition.
// Recipe: `prefetch::synchronous` (bind<S> = inline_prefetcher<S>).
#pragma once

#include <utility>

#include "trainkit/core/batch.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/timing.hpp"
#include "trainkit/data/concepts.hpp"
#include "trainkit/prefetch/concepts.hpp"

namespace trainkit::prefetch {

/// Produces each batch in the caller's thread when asked.
template <data::data_source S>
class inline_prefetcher {
 public:
  using memory_space = host_memory;
  using source_type = S;

  explicit inline_prefetcher(S source) : source_(std::move(source)) {}

  /// The next batch; valid until the following next() or seek().
  batch_view<host_memory> next() {
    stopwatch sw;
    source_.next(batch_);
    wait_ms_ = sw.elapsed_ms();
    return view_of(batch_);
  }

  /// The whole time the last next() spent in the source.
  double wait_ms() const noexcept { return wait_ms_; }
  source_position position() const { return source_.position(); }
  void seek(const source_position& p) { source_.seek(p); }

  int batch_size() const { return source_.batch_size(); }
  int seq_len() const { return source_.seq_len(); }
  int vocab_size() const { return source_.vocab_size(); }
  const S& source() const noexcept { return source_; }

 private:
  S source_;
  host_batch batch_;
  double wait_ms_ = 0.0;
};

/// Recipe: the source runs synchronously inside the consumer's next().
struct synchronous {
  template <class S>
  using bind = inline_prefetcher<S>;
};

}  // namespace trainkit::prefetch
