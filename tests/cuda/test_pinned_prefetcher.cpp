// Tests for trainkit/prefetch/pinned_prefetcher.hpp: batches reach device memory in source order
// and intact with a slow and a fast producer, in both hand-over modes (host-synchronous and a
// bound consumer stream); a slot is never overwritten while the consumer still uses it (a slow
// consumer checks its batch after sleeping, and a consumer stream blocked by a sleeping host
// function copies each batch out late); position() after N next() equals the bare source's;
// seek() replays; source errors arrive after the batches before them. Compiled by g++ (the
// prefetcher is host-compilable); every test skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpu_test_env.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/device.hpp"
#include "trainkit/core/cuda/stream.hpp"
#include "trainkit/data/synthetic_source.hpp"
#include "trainkit/prefetch/pinned_prefetcher.hpp"

namespace {

using trainkit::batch_view;
using trainkit::device_memory;
using trainkit::host_batch;
using trainkit::data::synthetic_config;
using trainkit::data::synthetic_source;
using trainkit::prefetch::pinned_prefetcher;

synthetic_config small_config(std::chrono::microseconds delay = {}) {
  synthetic_config c;
  c.batch_size = 4;
  c.seq_len = 33;
  c.vocab_size = 50257;
  c.alphabet = 5000;
  c.branching = 7;
  c.seed = 11;
  c.produce_delay = delay;
  return c;
}

/// The batch a device view points at, copied back (blocking).
host_batch download(const batch_view<device_memory>& v) {
  host_batch b(v.batch_size, v.seq_len);
  trainkit::cuda::copy_to_host(std::span<std::int32_t>(b.inputs), v.inputs);
  trainkit::cuda::copy_to_host(std::span<std::int32_t>(b.targets), v.targets);
  return b;
}

void expect_same(const host_batch& got, const host_batch& want, int index) {
  ASSERT_EQ(got.inputs.size(), want.inputs.size()) << "batch " << index;
  EXPECT_TRUE(got.inputs == want.inputs) << "inputs of batch " << index << " differ";
  EXPECT_TRUE(got.targets == want.targets) << "targets of batch " << index << " differ";
}

template <std::size_t Depth>
void check_order(std::chrono::microseconds producer_delay, int batches) {
  pinned_prefetcher<synthetic_source, Depth> p(synthetic_source(small_config(producer_delay)));
  synthetic_source bare(small_config());
  host_batch want;
  double longest_copy_ms = 0;
  for (int i = 0; i < batches; ++i) {
    const auto view = p.next();
    ASSERT_EQ(view.batch_size, 4);
    ASSERT_EQ(view.seq_len, 33);
    bare.next(want);
    expect_same(download(view), want, i);
    EXPECT_GE(p.wait_ms(), 0.0);
    EXPECT_GE(p.last_h2d_ms(), 0.0);
    longest_copy_ms = std::max(longest_copy_ms, p.last_h2d_ms());
    EXPECT_EQ(p.position(), bare.position()) << "after batch " << i;
  }
  EXPECT_GT(longest_copy_ms, 0.0) << "copy times come from events around real copies";
}

TEST(PinnedPrefetcher, FastProducerDeliversInOrderAndIntact) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_order<4>(std::chrono::microseconds(0), 40);
}

TEST(PinnedPrefetcher, SlowProducerDeliversInOrderAndIntact) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_order<2>(std::chrono::microseconds(3000), 12);
}

TEST(PinnedPrefetcher, SlowProducerShowsAsWait) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  pinned_prefetcher<synthetic_source, 2> p(
      synthetic_source(small_config(std::chrono::microseconds(20000))));
  (void)p.next();
  (void)p.next();
  (void)p.next();  // the ring is drained: this one waits for the producer's 20 ms
  EXPECT_GT(p.wait_ms(), 5.0);
}

TEST(PinnedPrefetcher, SlowConsumerSeesItsBatchUnchanged) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  // Depth 1 = two slots, fast producer: a slot reused too early would be rewritten during the
  // sleep, long before the consumer reads its batch back.
  pinned_prefetcher<synthetic_source, 1> p{synthetic_source(small_config())};
  synthetic_source bare(small_config());
  host_batch want;
  for (int i = 0; i < 8; ++i) {
    const auto view = p.next();
    bare.next(want);
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
    expect_same(download(view), want, i);
  }
}

// Consumer-stream mode: each batch is read by a copy queued behind a 10 ms host function on the
// consumer stream, i.e. long after next() returned. The slot's refill must wait for it.
struct sleep_arg {
  int ms;
};
void CUDART_CB sleep_on_stream(void* arg) {
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<sleep_arg*>(arg)->ms));
}

TEST(PinnedPrefetcher, BoundConsumerStreamOrdersCopiesAndReuse) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  constexpr int batches = 8;
  pinned_prefetcher<synthetic_source, 1> p{synthetic_source(small_config())};
  trainkit::cuda::stream consumer;
  p.bind_consumer_stream(consumer);
  const std::size_t n = 4 * 33;
  trainkit::cuda::pinned_buffer<std::int32_t> out(2 * n * batches);
  std::memset(out.data(), 0xff, out.bytes());  // poison: -1 is no token
  sleep_arg pause{10};
  for (int i = 0; i < batches; ++i) {
    const auto view = p.next();
    TRAINKIT_CUDA_CHECK(cudaLaunchHostFunc(consumer, sleep_on_stream, &pause));
    trainkit::cuda::copy_to_host_async(std::span<std::int32_t>(out.data() + 2 * n * i, n),
                                       view.inputs, consumer);
    trainkit::cuda::copy_to_host_async(std::span<std::int32_t>(out.data() + 2 * n * i + n, n),
                                       view.targets, consumer);
  }
  consumer.synchronize();
  synthetic_source bare(small_config());
  host_batch want;
  for (int i = 0; i < batches; ++i) {
    bare.next(want);
    host_batch got(4, 33);
    std::memcpy(got.inputs.data(), out.data() + 2 * n * i, n * 4);
    std::memcpy(got.targets.data(), out.data() + 2 * n * i + n, n * 4);
    expect_same(got, want, i);
  }
  p.bind_consumer_stream(nullptr);
}

TEST(PinnedPrefetcher, PositionTracksBatchesReturnedNotPrefetched) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  pinned_prefetcher<synthetic_source, 4> p{synthetic_source(small_config())};
  synthetic_source bare(small_config());
  EXPECT_EQ(p.position(), bare.position());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the worker run ahead
  EXPECT_EQ(p.position(), bare.position()) << "prefetching must not move position()";
  host_batch b;
  for (int i = 0; i < 7; ++i) {
    (void)p.next();
    bare.next(b);
  }
  EXPECT_EQ(p.position(), bare.position());
}

TEST(PinnedPrefetcher, SeekReplaysFromAPosition) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  pinned_prefetcher<synthetic_source, 3> p{synthetic_source(small_config())};
  for (int i = 0; i < 3; ++i) (void)p.next();
  const auto pos = p.position();
  std::vector<host_batch> first;
  for (int i = 0; i < 5; ++i) first.push_back(download(p.next()));
  p.seek(pos);
  EXPECT_EQ(p.position(), pos);
  for (int i = 0; i < 5; ++i) expect_same(download(p.next()), first[std::size_t(i)], i);
}

// A source that fails after `good` batches.
class failing_source {
 public:
  explicit failing_source(int good = 3) : inner_(small_config()), good_(good) {}
  int batch_size() const { return inner_.batch_size(); }
  int seq_len() const { return inner_.seq_len(); }
  int vocab_size() const { return inner_.vocab_size(); }
  void next(host_batch& b) {
    if (produced_ == good_) throw std::runtime_error("shard vanished");
    inner_.next(b);
    ++produced_;
  }
  trainkit::source_position position() const { return inner_.position(); }
  void seek(const trainkit::source_position& p) { inner_.seek(p); }

 private:
  synthetic_source inner_;
  int good_;
  int produced_ = 0;
};

TEST(PinnedPrefetcher, SourceErrorArrivesAfterTheGoodBatches) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  pinned_prefetcher<failing_source, 2> p(failing_source(3));
  synthetic_source bare(small_config());
  host_batch want;
  for (int i = 0; i < 3; ++i) {
    bare.next(want);
    expect_same(download(p.next()), want, i);
  }
  EXPECT_THROW((void)p.next(), std::runtime_error);
}

TEST(PinnedPrefetcher, RecipeBindsTheSource) {
  using bound = trainkit::prefetch::pinned<4>::bind<synthetic_source>;
  static_assert(std::same_as<bound, pinned_prefetcher<synthetic_source, 4>>);
  static_assert(std::same_as<bound::memory_space, device_memory>);
  SUCCEED();
}

}  // namespace
