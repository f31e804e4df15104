// trainkit/prefetch/pinned_prefetcher.hpp — a worker thread that fills pinned host slots and
// copies them to device slots on its own stream, Depth batches ahead of the consumer.
//
// The CUDA composition's prefetcher (memory_space = device_memory). For every batch the worker
// (1) asks the source for it (host memory), (2) copies its int32 tokens into a pinned host slot,
// the only host memory a cudaMemcpyAsync can read without the driver staging it, and (3) enqueues
// the host→device copy on a private non-blocking stream between two events ("copy started",
// "copied"). The consumer's next() therefore never copies anything: it waits for a ready slot and
// then orders itself after that slot's "copied" event in one of two ways:
//
//  * no consumer stream bound (the default, right for a consumer on its own stream): next()
//    synchronises the "copied" event on the host before it returns the view. gpt2_cuda needs
//    batches whose copy has completed, and since the copy was enqueued Depth batches earlier the
//    wait is normally zero. The consumer is taken to be done with a batch when it calls next()
//    again: right for calls that return with their device work finished (gpt2_cuda::forward);
//  * `bind_consumer_stream(s)`: next() makes `s` wait for the "copied" event (cudaStreamWaitEvent,
//    no host stall), and at the following next() records a "released" event on `s`; the copy
//    stream waits on that event before it overwrites the slot, so a consumer that runs
//    asynchronously on `s` never sees its batch change under it. The trainer binds its training
//    prefetcher to its execution context this way (`bind_context`).
//
// The ring (Depth ready ahead + the one the consumer holds), its worker, position bookkeeping,
// error transport (the source's exception re-thrown from next() after the batches before it) and
// stopping live in detail/ring_worker.hpp, shared with threaded_prefetcher; a pinned host slot is
// refilled only after its previous copy has landed. wait_ms() is the host time the last next()
// blocked; last_h2d_ms() is the device time of the copy behind the batch last returned, measured
// with its events once the copy has finished (it overlaps compute, so it is the copy's cost, not a
// stall). Host-compilable (cuda_runtime.h only); link trainkit::cuda. Recipe:
// `prefetch::pinned<Depth>` (bind<S> = pinned_prefetcher<S, Depth>).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <string>
#include <utility>

#include "trainkit/core/batch.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/device.hpp"
#include "trainkit/core/cuda/execution_context.hpp"
#include "trainkit/core/cuda/stream.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/timing.hpp"
#include "trainkit/data/concepts.hpp"
#include "trainkit/data/synthetic_source.hpp"
#include "trainkit/prefetch/concepts.hpp"
#include "trainkit/prefetch/detail/ring_worker.hpp"

namespace trainkit::prefetch {

/// Owns a source, a worker thread, Depth + 1 pinned host slots and as many device slots; hands
/// out device-memory batches in source order.
template <data::data_source S, std::size_t Depth>
class pinned_prefetcher {
  static_assert(Depth >= 1, "pinned_prefetcher needs Depth >= 1 batches of look-ahead");

 public:
  using memory_space = device_memory;
  using source_type = S;
  static constexpr std::size_t depth = Depth;

  /// Allocates the slots on the current CUDA device and starts the worker. Throws cuda_error
  /// (e.g. no device) or config_error (an empty batch shape).
  explicit pinned_prefetcher(S source)
      : source_(std::move(source)),
        device_(cuda::current_device()),
        ring_({.fill = [this](slot& s) { return fill(s); },
               .on_release = [this](slot& s) { release(s); },
               // The runtime's current device is per thread: use the one the slots live on.
               .on_worker_start = [this] { TRAINKIT_CUDA_CHECK(cudaSetDevice(device_)); }}) {
    const long long b = source_.batch_size(), t = source_.seq_len();
    if (b <= 0 || t <= 0)
      throw config_error("pinned_prefetcher: batch shape B=" + std::to_string(b) +
                         " T=" + std::to_string(t) + " is empty");
    batch_ = int(b);
    seq_ = int(t);
    tokens_ = std::size_t(b) * std::size_t(t);
    for (slot& s : ring_.ring()) {
      // Write-combined: the host only writes these (memcpy), the copy engine only reads them.
      s.host = cuda::pinned_buffer<std::int32_t>(2 * tokens_, cudaHostAllocWriteCombined);
      s.device = cuda::device_buffer<std::int32_t>(2 * tokens_);  // inputs then targets (2, B, T)
    }
    vocab_ = source_.vocab_size();
    ring_.start(source_.position());
  }

  // The worker thread holds `this`: the object cannot move.
  pinned_prefetcher(const pinned_prefetcher&) = delete;
  pinned_prefetcher& operator=(const pinned_prefetcher&) = delete;

  ~pinned_prefetcher() {
    ring_.stop();
    // Copies still queued read the pinned slots we are about to free.
    (void)cudaStreamSynchronize(copy_stream_.get());
  }

  /// The trainer's hook (prefetch::orders_on_context): bind_consumer_stream(ctx.stream()), so the
  /// step's kernels wait for each copy on the device and the loop never waits on the host for it.
  void bind_context(const cuda::execution_context& ctx) { bind_consumer_stream(ctx.stream()); }

  /// From now on next() orders `s` after each batch's copy instead of waiting on the host, and a
  /// slot is reused only after the work `s` had queued when the following next() was called.
  /// nullptr returns to host-synchronous hand-over. Call between batches (not concurrently with
  /// next()); `s` must outlive the prefetcher or be unbound first.
  void bind_consumer_stream(cudaStream_t s) {
    // The held batch was handed to the old stream: its slot waits for that stream's work.
    ring_.with_held_slot([&](slot& held) { release(held); });
    consumer_ = s;
    consumer_bound_ = s != nullptr;
  }

  /// The next batch in source order, in device memory; valid until the following next() or
  /// seek(). Blocks while the worker has nothing ready; re-throws the source's (or a CUDA) error
  /// once the batches before it are delivered.
  batch_view<device_memory> next() {
    stopwatch sw;
    slot* s = nullptr;
    try {
      s = &ring_.acquire();
    } catch (...) {
      wait_ms_ = sw.elapsed_ms();
      throw;
    }
    // The worker does not touch a slot between producing it and its release: no lock needed.
    stopwatch copy_wait;
    if (consumer_bound_) {
      s->copied.wait_on(consumer_);
      if (s->copied.ready()) last_h2d_ms_ = copy_ms(*s);  // else keep the last finished one
    } else {
      s->copied.synchronize();
      last_h2d_ms_ = copy_ms(*s);
    }
    last_h2d_wait_ms_ = copy_wait.elapsed_ms();
    wait_ms_ = sw.elapsed_ms();
    const std::int32_t* d = s->device.data();
    return {d, d + tokens_, batch_, seq_};
  }

  /// How long the last next() blocked the caller (worker not ready, or the copy not landed).
  double wait_ms() const noexcept { return wait_ms_; }
  /// Device time of the host→device copy of the batch last returned (events), in ms. The copy
  /// overlaps compute; only `last_h2d_wait_ms()` of it blocked the caller.
  double last_h2d_ms() const noexcept { return last_h2d_ms_; }
  /// The part of the last next() spent blocked on that batch's copy (included in wait_ms()): the
  /// trainer reports it as h2d_ms and the rest of the wait as data_wait_ms.
  double last_h2d_wait_ms() const noexcept { return last_h2d_wait_ms_; }

  /// The source position just after the batch last returned by next() (or the starting position).
  source_position position() const { return ring_.position(); }

  /// Drops everything prefetched and continues from `p` (see threaded_prefetcher::seek).
  void seek(const source_position& p) {
    ring_.stop();
    // The held batch may still be read on the consumer stream, and copies may be in flight:
    // both finish before slots are reused from index 0.
    if (consumer_bound_) TRAINKIT_CUDA_CHECK(cudaStreamSynchronize(consumer_));
    copy_stream_.synchronize();
    ring_.seek(source_, p);
  }

  int batch_size() const noexcept { return batch_; }
  int seq_len() const noexcept { return seq_; }
  int vocab_size() const noexcept { return vocab_; }
  /// The stream the copies run on (benchmarks record events on it).
  cudaStream_t copy_stream() const noexcept { return copy_stream_.get(); }

 private:
  struct slot {
    cuda::pinned_buffer<std::int32_t> host;    // (2, B, T) inputs then targets
    cuda::device_buffer<std::int32_t> device;  // (2, B, T)
    cuda::event copy_start{true};
    cuda::event copied{true};
    cuda::event released{false};  // recorded on the consumer stream when the batch is given back
    // Written under the ring's lock when the slot is given back; the worker reads it only once
    // the ring has handed it the released slot (the lock orders the two).
    bool released_recorded = false;
  };

  static double copy_ms(const slot& s) {
    float ms = 0.0f;
    TRAINKIT_CUDA_CHECK(cudaEventElapsedTime(&ms, s.copy_start.get(), s.copied.get()));
    return double(ms);
  }

  // Consumer thread, under the ring's lock: the consumer gives back the slot it held. A
  // host-synchronous consumer is done by now. A flag left from a bound period is harmless:
  // waiting on an event that has completed costs nothing.
  void release(slot& held) {
    if (consumer_bound_) {
      held.released.record(consumer_);
      held.released_recorded = true;
    }
  }

  // Worker thread: one batch from the source into the slot's pinned memory, then its copy to the
  // slot's device memory enqueued on the copy stream.
  source_position fill(slot& s) {
    source_.next(scratch_);
    const source_position after = source_.position();
    if (scratch_.inputs.size() != tokens_ || scratch_.targets.size() != tokens_)
      throw config_error("pinned_prefetcher: the source produced a batch of " +
                         std::to_string(scratch_.inputs.size()) + " tokens, expected " +
                         std::to_string(tokens_));
    s.copied.synchronize();  // the previous copy out of this pinned slot has landed
    std::memcpy(s.host.data(), scratch_.inputs.data(), tokens_ * sizeof(std::int32_t));
    std::memcpy(s.host.data() + tokens_, scratch_.targets.data(), tokens_ * sizeof(std::int32_t));
    // The consumer may still read the device slot on its stream: copy after it is done.
    if (s.released_recorded) s.released.wait_on(copy_stream_.get());
    s.copy_start.record(copy_stream_.get());
    cuda::copy_to_device_async(s.device.data(),
                               std::span<const std::int32_t>(s.host.data(), 2 * tokens_),
                               copy_stream_.get());
    s.copied.record(copy_stream_.get());
    return after;
  }

  S source_;  // touched only by the worker while it runs
  int device_ = 0;
  int batch_ = 0, seq_ = 0, vocab_ = 0;  // the source's shape, read once: the worker owns source_
  std::size_t tokens_ = 0;               // B·T
  cuda::stream copy_stream_{true};
  host_batch scratch_;  // worker only: the source fills it, then it is copied into a pinned slot
  detail::ring_worker<slot, Depth> ring_;
  cudaStream_t consumer_ = nullptr;  // consumer thread only (release() runs on it)
  bool consumer_bound_ = false;      // consumer thread only
  double wait_ms_ = 0.0;             // consumer thread only
  double last_h2d_ms_ = 0.0;         // consumer thread only
  double last_h2d_wait_ms_ = 0.0;    // consumer thread only
};

/// Recipe: a worker thread keeps Depth batches copied to the device ahead of next().
template <std::size_t Depth>
struct pinned {
  template <class S>
  using bind = pinned_prefetcher<S, Depth>;
};

static_assert(prefetcher<pinned_prefetcher<data::synthetic_source, 2>>);
static_assert(
    reports_copy_wait<pinned_prefetcher<data::synthetic_source, 2>> &&
    orders_on_context<pinned_prefetcher<data::synthetic_source, 2>, cuda::execution_context>);
static_assert(prefetch_recipe_for<pinned<4>, data::synthetic_source>);
static_assert(
    std::same_as<pinned_prefetcher<data::synthetic_source, 4>::memory_space, device_memory>);

}  // namespace trainkit::prefetch
