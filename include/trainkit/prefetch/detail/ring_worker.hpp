// trainkit/prefetch/detail/ring_worker.hpp — the ring of Depth + 1 slots and the worker thread
// that fills it, shared by threaded_prefetcher and pinned_prefetcher.
//
// The ring has Depth + 1 slots: Depth ready ahead plus the one the consumer holds, because a
// batch_view from next() must stay valid until the following next(); that slot is recycled only
// when the consumer comes back (acquire() again). What a slot holds and how it is filled is the
// prefetcher's business, given as hooks:
//   fill(slot)        worker thread, no lock held: fill the slot from the source and return the
//                     source position right after that batch. The consumer never touches a slot
//                     that is neither ready nor held, so the fill needs no lock;
//   on_release(slot)  consumer thread, lock held: the consumer gives back the slot it held
//                     (pinned_prefetcher records a "released" event there);
//   on_worker_start() worker thread, before the first fill (pinned_prefetcher sets the device).
//
// Each slot's position is recorded beside it, so position() names the batch last *returned*, not
// the ones prefetched ahead, and a checkpoint resumes at the right batch. An exception from a hook
// is carried to the consumer (std::exception_ptr) and re-thrown from acquire() after the batches
// produced before it. stop() ends the worker even when it is blocked on a full ring; a worker
// inside a slow fill is waited for, never abandoned.
#pragma once

#include <array>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "trainkit/core/batch.hpp"
#include "trainkit/data/concepts.hpp"

namespace trainkit::prefetch::detail {

/// The hooks a prefetcher gives its ring (see the file comment for who calls them, and when).
template <class Slot>
struct ring_hooks {
  std::function<source_position(Slot&)> fill;
  std::function<void(Slot&)> on_release = [](Slot&) {};
  std::function<void()> on_worker_start = [] {};
};

/// Depth + 1 slots, one worker thread filling up to Depth of them ahead of the consumer.
template <class Slot, std::size_t Depth>
class ring_worker {
  static_assert(Depth >= 1, "a prefetch ring needs Depth >= 1 batches of look-ahead");

 public:
  static constexpr std::size_t slot_count = Depth + 1;

  /// Does not start the worker: the owner prepares the slots (ring()) and then calls start().
  explicit ring_worker(ring_hooks<Slot> hooks) : hooks_(std::move(hooks)) {}

  // The worker thread holds `this`: the object cannot move.
  ring_worker(const ring_worker&) = delete;
  ring_worker& operator=(const ring_worker&) = delete;

  ~ring_worker() { stop(); }

  /// The slots, for the owner to allocate before start() (not while the worker runs).
  std::array<Slot, slot_count>& ring() noexcept { return ring_; }

  /// Empties the ring and starts the worker; `from` is the position before its first batch.
  void start(const source_position& from) {
    {
      std::lock_guard lock(mutex_);
      produced_ = consumed_ = released_ = 0;
      error_ = nullptr;
      stop_ = false;
      last_position_ = from;
    }
    worker_ = std::thread([this] { produce(); });
  }

  /// Stops and joins the worker (idempotent). What it had prefetched stays until start().
  void stop() noexcept {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    slot_free_.notify_all();
    batch_ready_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  /// Consumer: gives back the slot of the previous acquire(), then blocks until the next slot is
  /// ready and returns it; re-throws the worker's error once the slots before it are consumed.
  Slot& acquire() {
    std::unique_lock lock(mutex_);
    if (released_ < consumed_) {  // the caller is done with the slot from the previous acquire()
      hooks_.on_release(ring_[(consumed_ - 1) % slot_count]);
      released_ = consumed_;
      slot_free_.notify_one();
    }
    batch_ready_.wait(lock, [&] { return produced_ > consumed_ || error_; });
    if (produced_ == consumed_) std::rethrow_exception(error_);
    const std::size_t index = consumed_ % slot_count;
    ++consumed_;
    slot_free_.notify_one();  // one more may now be prefetched (ready count dropped below Depth)
    last_position_ = position_after_[index];
    return ring_[index];
  }

  /// Consumer: calls f(slot) under the lock if the consumer holds a slot it has not given back.
  template <class F>
  void with_held_slot(F&& f) {
    std::lock_guard lock(mutex_);
    if (released_ < consumed_) std::forward<F>(f)(ring_[(consumed_ - 1) % slot_count]);
  }

  /// The source position just after the slot last acquired (or the position start() was given).
  source_position position() const {
    std::lock_guard lock(mutex_);
    return last_position_;
  }

  /// With the worker stopped: moves `source` to `p` and restarts from there. If the source rejects
  /// `p` it is put back where the consumer is, the worker restarts from that place and the
  /// source's exception propagates; if even that fails, every acquire() re-throws the failure.
  template <data::data_source Source>
  void seek(Source& source, const source_position& p) {
    std::exception_ptr rejected;
    try {
      source.seek(p);
    } catch (...) {
      rejected = std::current_exception();
      try {
        source.seek(last_position_);  // the prefetched batches moved it on: put it back
      } catch (...) {
        std::lock_guard lock(mutex_);
        produced_ = consumed_ = released_ = 0;  // drop what was prefetched from the old place
        error_ = std::current_exception();
        std::rethrow_exception(rejected);
      }
    }
    start(source.position());
    if (rejected) std::rethrow_exception(rejected);
  }

 private:
  void produce() {
    try {
      hooks_.on_worker_start();
      for (;;) {
        std::size_t index;
        {
          std::unique_lock lock(mutex_);
          // Room to write: fewer than Depth ready and the slot is not the one the caller holds.
          slot_free_.wait(lock, [&] {
            return stop_ || (produced_ - consumed_ < Depth && produced_ - released_ < slot_count);
          });
          if (stop_) return;
          index = produced_ % slot_count;
        }
        const source_position after = hooks_.fill(ring_[index]);
        {
          std::lock_guard lock(mutex_);
          if (stop_) return;
          position_after_[index] = after;
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

  ring_hooks<Slot> hooks_;
  std::array<Slot, slot_count> ring_;
  std::array<source_position, slot_count> position_after_;

  mutable std::mutex mutex_;
  std::condition_variable slot_free_;
  std::condition_variable batch_ready_;
  std::uint64_t produced_ = 0;  // slots the worker has finished
  std::uint64_t consumed_ = 0;  // slots acquire() has returned
  std::uint64_t released_ = 0;  // returned slots that may be reused
  std::exception_ptr error_;
  bool stop_ = false;
  source_position last_position_;
  std::thread worker_;
};

}  // namespace trainkit::prefetch::detail
