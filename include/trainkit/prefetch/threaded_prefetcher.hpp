// trainkit/prefetch/threaded_prefetcher.hpp — a background thread that runs Depth batches ahead.
//
// The CPU composition's prefetcher: while the model computes step i, a worker thread fills batches
// i+1 .. i+Depth from the source, so a source that is slower than nothing but faster than a step
// costs the loop (almost) no data wait. The ring has Depth + 1 host_batch slots: Depth ready
// ahead plus the one the consumer holds, because a batch_view from next() must stay valid until
// the following next(); that slot is recycled only when the consumer comes back.
//
// Each slot records the source position right after its batch was produced, so position() names
// the batch last *returned*, not the ones prefetched ahead, and a checkpoint resumes at the right
// batch. An exception from the source is carried to the consumer (std::exception_ptr) and
// re-thrown from next() after the batches produced before it. The destructor and seek() stop the
// worker even when it is blocked on a full ring; a worker inside a slow source.next() is waited
// for, never abandoned.
// Recipe: `prefetch::threaded<Depth>` (bind<S> = threaded_prefetcher<S, Depth>).
#pragma once

#include <array>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

#include "trainkit/core/batch.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/timing.hpp"
#include "trainkit/data/concepts.hpp"
#include "trainkit/data/synthetic_source.hpp"
#include "trainkit/prefetch/concepts.hpp"

namespace trainkit::prefetch {

/// Owns a source and a worker thread that keeps up to Depth batches ready ahead of next().
template <data::data_source S, std::size_t Depth>
class threaded_prefetcher {
  static_assert(Depth >= 1, "threaded_prefetcher needs Depth >= 1 batches of look-ahead");

 public:
  using memory_space = host_memory;
  using source_type = S;
  static constexpr std::size_t depth = Depth;

  explicit threaded_prefetcher(S source) : source_(std::move(source)) {
    last_position_ = source_.position();
    start_worker();
  }

  // The worker thread holds `this`: the object cannot move.
  threaded_prefetcher(const threaded_prefetcher&) = delete;
  threaded_prefetcher& operator=(const threaded_prefetcher&) = delete;

  ~threaded_prefetcher() { stop_worker(); }

  /// The next batch in source order; valid until the following next() or seek(). Blocks while the
  /// worker has nothing ready; re-throws the source's exception once the batches before it are
  /// delivered.
  batch_view<host_memory> next() {
    stopwatch sw;
    std::unique_lock lock(mutex_);
    if (released_ < consumed_) {  // the caller is done with the batch from the previous next()
      released_ = consumed_;
      slot_free_.notify_one();
    }
    batch_ready_.wait(lock, [&] { return produced_ > consumed_ || error_; });
    if (produced_ == consumed_) {
      wait_ms_ = sw.elapsed_ms();
      std::rethrow_exception(error_);
    }
    slot& s = ring_[consumed_ % slots];
    ++consumed_;
    slot_free_.notify_one();  // one more may now be prefetched (ready count dropped below Depth)
    last_position_ = s.position_after;
    wait_ms_ = sw.elapsed_ms();
    return view_of(s.batch);
  }

  /// How long the last next() blocked the caller, in milliseconds.
  double wait_ms() const noexcept { return wait_ms_; }

  /// The source position just after the batch last returned by next() (or the starting position).
  source_position position() const {
    std::lock_guard lock(mutex_);
    return last_position_;
  }

  /// Drops everything prefetched, continues from `p`. If the source rejects p the prefetcher
  /// carries on from where it was and the source's exception propagates.
  void seek(const source_position& p) {
    stop_worker();
    std::exception_ptr rejected;
    try {
      source_.seek(p);
    } catch (...) {
      rejected = std::current_exception();
      try {
        source_.seek(last_position_);  // the prefetched batches moved it on: put it back
      } catch (...) {
        produced_ = consumed_ = released_ = 0;  // drop what was prefetched from the old place
        error_ = std::current_exception();      // unrecoverable: every next() will say why
        std::rethrow_exception(rejected);
      }
    }
    {
      std::lock_guard lock(mutex_);
      last_position_ = source_.position();
    }
    start_worker();
    if (rejected) std::rethrow_exception(rejected);
  }

  int batch_size() const { return source_.batch_size(); }
  int seq_len() const { return source_.seq_len(); }
  int vocab_size() const { return source_.vocab_size(); }

 private:
  static constexpr std::size_t slots = Depth + 1;

  struct slot {
    host_batch batch;
    source_position position_after;
  };

  void start_worker() {
    produced_ = consumed_ = released_ = 0;
    error_ = nullptr;
    stop_ = false;
    worker_ = std::thread([this] { produce(); });
  }

  void stop_worker() noexcept {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    slot_free_.notify_all();
    batch_ready_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  void produce() {
    try {
      for (;;) {
        std::size_t index;
        {
          std::unique_lock lock(mutex_);
          // Room to write: fewer than Depth ready and the slot is not the one the caller holds.
          slot_free_.wait(lock, [&] {
            return stop_ || (produced_ - consumed_ < Depth && produced_ - released_ < slots);
          });
          if (stop_) return;
          index = produced_ % slots;
        }
        // The slot is neither ready nor held, so the consumer does not touch it: fill unlocked.
        source_.next(ring_[index].batch);
        const source_position after = source_.position();
        {
          std::lock_guard lock(mutex_);
          if (stop_) return;
          ring_[index].position_after = after;
          ++produced_;
        }
        batch_ready_.notify_one();
      }
    } catch (...) {
      {
        std::lock_guard lock(mutex_);
        error_ = std::current_exception();
      }
      batch_ready_.notify_one();
    }
  }

  S source_;  // touched only by the worker while it runs
  std::array<slot, slots> ring_;

  mutable std::mutex mutex_;
  std::condition_variable slot_free_;
  std::condition_variable batch_ready_;
  std::uint64_t produced_ = 0;  // batches the worker has finished
  std::uint64_t consumed_ = 0;  // batches next() has returned
  std::uint64_t released_ = 0;  // returned batches whose slot may be reused
  std::exception_ptr error_;
  bool stop_ = false;
  source_position last_position_;
  double wait_ms_ = 0.0;  // consumer thread only
  std::thread worker_;
};

/// Recipe: a worker thread keeps Depth batches ready (Depth >= 1).
template <std::size_t Depth>
struct threaded {
  template <class S>
  using bind = threaded_prefetcher<S, Depth>;
};

static_assert(prefetcher<threaded_prefetcher<data::synthetic_source, 2>>);
static_assert(prefetch_recipe_for<threaded<4>, data::synthetic_source>);

}  // namespace trainkit::prefetch
