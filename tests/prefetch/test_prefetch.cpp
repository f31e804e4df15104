// Tests for trainkit/prefetch/: both prefetchers deliver exactly the bare source's batch sequence
// (with a slow producer and with a slow consumer), report the position after the last batch they
// returned, seek, keep a returned batch intact until the following next(), carry the source's
// exceptions to the consumer, and shut down without hanging.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <concepts>
#include <future>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "../data/shard_fixture.hpp"
#include "trainkit/data/mmap_token_source.hpp"
#include "trainkit/data/shard_format.hpp"
#include "trainkit/data/synthetic_source.hpp"
#include "trainkit/prefetch/inline_prefetcher.hpp"
#include "trainkit/prefetch/threaded_prefetcher.hpp"

namespace tk = trainkit;
namespace td = trainkit::data;
namespace tp = trainkit::prefetch;
using namespace std::chrono_literals;

// ---- compile-time contracts --------------------------------------------------------------------
// The shipped prefetchers satisfy the role's concept over the shipped sources (kept here, not in
// the public headers, which then need no concrete source).
static_assert(tp::prefetcher<tp::inline_prefetcher<td::synthetic_source>>);
static_assert(tp::prefetcher<tp::threaded_prefetcher<td::synthetic_source, 2>>);
static_assert(tp::prefetch_recipe_for<tp::synchronous, td::synthetic_source>);
static_assert(tp::prefetch_recipe_for<tp::threaded<4>, td::synthetic_source>);
static_assert(std::same_as<tp::threaded<4>::bind<td::mmap_token_source>,
                           tp::threaded_prefetcher<td::mmap_token_source, 4>>);
static_assert(std::same_as<tp::synchronous::bind<td::mmap_token_source>,
                           tp::inline_prefetcher<td::mmap_token_source>>);
static_assert(tp::prefetch_recipe_for<tp::threaded<1>, td::mmap_token_source>);
static_assert(tp::prefetch_recipe_for<tp::synchronous, td::mmap_token_source>);
static_assert(!tp::prefetch_recipe_for<tp::threaded<2>, int>);
static_assert(
    std::same_as<tp::threaded_prefetcher<td::synthetic_source, 2>::memory_space, tk::host_memory>);

namespace {

struct recorded {
  std::vector<std::int32_t> inputs, targets;
  tk::source_position after;
  friend bool operator==(const recorded&, const recorded&) = default;
};

template <class S>
std::vector<recorded> bare(S s, int n) {
  std::vector<recorded> out;
  tk::host_batch b;
  for (int i = 0; i < n; ++i) {
    s.next(b);
    out.push_back({b.inputs, b.targets, s.position()});
  }
  return out;
}

template <class P>
std::vector<recorded> drain(P& p, int n, std::chrono::microseconds consumer_step = 0us) {
  std::vector<recorded> out;
  for (int i = 0; i < n; ++i) {
    const auto v = p.next();
    if (consumer_step.count() > 0) std::this_thread::sleep_for(consumer_step);
    out.push_back(
        {{v.inputs, v.inputs + v.tokens()}, {v.targets, v.targets + v.tokens()}, p.position()});
    EXPECT_EQ(v.batch_size, p.batch_size());
    EXPECT_EQ(v.seq_len, p.seq_len());
  }
  return out;
}

td::synthetic_config small(std::chrono::microseconds delay = 0us) {
  return {.batch_size = 2, .seq_len = 16, .seed = 17, .produce_delay = delay};
}

/// Wraps a synthetic source: counts next() calls and throws io_error on call number `fail_at`.
class faulty_source {
 public:
  faulty_source(int fail_at, std::shared_ptr<std::atomic<int>> calls,
                std::chrono::microseconds delay = 0us)
      : inner_(small(delay)), fail_at_(fail_at), calls_(std::move(calls)) {}
  int batch_size() const { return inner_.batch_size(); }
  int seq_len() const { return inner_.seq_len(); }
  int vocab_size() const { return inner_.vocab_size(); }
  void next(tk::host_batch& b) {
    const int n = calls_->fetch_add(1);
    if (n == fail_at_) throw tk::io_error("disk vanished at batch " + std::to_string(n));
    inner_.next(b);
  }
  tk::source_position position() const { return inner_.position(); }
  void seek(const tk::source_position& p) { inner_.seek(p); }

 private:
  td::synthetic_source inner_;
  int fail_at_;
  std::shared_ptr<std::atomic<int>> calls_;
};
static_assert(td::data_source<faulty_source>);

// Waits (bounded) until `pred` holds; returns whether it did.
template <class F>
bool eventually(F pred, std::chrono::milliseconds limit = 20s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return pred();
}

}  // namespace

// ---- both prefetchers: same sequence as the bare source
// ------------------------------------------

template <class P>
class PrefetcherOrder : public ::testing::Test {};
using prefetcher_types = ::testing::Types<tp::inline_prefetcher<td::synthetic_source>,
                                          tp::threaded_prefetcher<td::synthetic_source, 1>,
                                          tp::threaded_prefetcher<td::synthetic_source, 3>>;
TYPED_TEST_SUITE(PrefetcherOrder, prefetcher_types);

TYPED_TEST(PrefetcherOrder, SameBatchesAndPositionsAsTheBareSource) {
  const auto expected = bare(td::synthetic_source(small()), 60);
  TypeParam p{td::synthetic_source(small())};
  EXPECT_EQ(p.position(), td::synthetic_source(small()).position());  // nothing returned yet
  EXPECT_EQ(drain(p, 60), expected);
}

TYPED_TEST(PrefetcherOrder, SlowProducer) {
  const auto expected = bare(td::synthetic_source(small()), 15);
  TypeParam p{td::synthetic_source(small(2ms))};
  EXPECT_EQ(drain(p, 15), expected);
}

TYPED_TEST(PrefetcherOrder, SlowConsumer) {
  const auto expected = bare(td::synthetic_source(small()), 15);
  TypeParam p{td::synthetic_source(small())};
  EXPECT_EQ(drain(p, 15, 2ms), expected);
}

TYPED_TEST(PrefetcherOrder, SeekDropsPrefetchedBatchesAndResumes) {
  const auto expected = bare(td::synthetic_source(small()), 40);
  TypeParam p{td::synthetic_source(small())};
  drain(p, 25);
  p.seek(expected[9].after);
  EXPECT_EQ(p.position(), expected[9].after);
  const auto again = drain(p, 30);
  EXPECT_TRUE(std::equal(again.begin(), again.end(), expected.begin() + 10));
}

TYPED_TEST(PrefetcherOrder, RejectedSeekKeepsTheStream) {
  const auto expected = bare(td::synthetic_source(small()), 20);
  TypeParam p{td::synthetic_source(small())};
  drain(p, 5);
  EXPECT_THROW(p.seek({0, 0, 3, 12345}), tk::config_error);  // another seed
  const auto rest = drain(p, 15);
  EXPECT_TRUE(std::equal(rest.begin(), rest.end(), expected.begin() + 5));
}

// ---- position() with a real source, across shard and epoch boundaries
// -----------------------------

using PrefetchMmap = trainkit_test::temp_dir_test;

TEST_F(PrefetchMmap, PositionAfterNBatchesEqualsTheBareSource) {
  for (int s = 0; s < 3; ++s) {
    std::vector<std::uint16_t> t(150 + 60 * s);
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = std::uint16_t((1000 * s + i) % 50257);
    td::write_shard(path("p_" + std::to_string(s) + ".bin"), t);
  }
  for (auto order : {td::order_kind::sequential, td::order_kind::random}) {
    const td::mmap_source_config cfg{path("p_*.bin"), 2, 8, 50257, order, 5};
    const auto expected = bare(td::mmap_token_source(cfg), 80);  // several epochs
    for (int n : {0, 1, 7, 33, 80}) {
      tp::threaded_prefetcher<td::mmap_token_source, 4> p{td::mmap_token_source(cfg)};
      drain(p, n);
      EXPECT_EQ(p.position(),
                n == 0 ? td::mmap_token_source(cfg).position() : expected[std::size_t(n) - 1].after)
          << "n=" << n << " order=" << td::to_string(order);
      tp::inline_prefetcher<td::mmap_token_source> q{td::mmap_token_source(cfg)};
      drain(q, n);
      EXPECT_EQ(q.position(), p.position());
    }
  }
}

// ---- threaded prefetcher specifics
// -----------------------------------------------------------------

TEST(ThreadedPrefetcher, ReturnedBatchStaysIntactUntilTheNextCall) {
  tp::threaded_prefetcher<td::synthetic_source, 2> p{td::synthetic_source(small())};
  const auto expected = bare(td::synthetic_source(small()), 6);
  for (int i = 0; i < 5; ++i) {
    const auto v = p.next();
    std::this_thread::sleep_for(20ms);  // give the worker every chance to refill the ring
    const std::vector<std::int32_t> in(v.inputs, v.inputs + v.tokens());
    EXPECT_EQ(in, expected[std::size_t(i)].inputs) << i;
  }
}

TEST(ThreadedPrefetcher, ProducerExceptionReachesTheConsumerAfterEarlierBatches) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  tp::threaded_prefetcher<faulty_source, 3> p{faulty_source(4, calls)};
  const auto expected = bare(td::synthetic_source(small()), 4);
  EXPECT_EQ(drain(p, 4), expected);
  try {
    p.next();
    FAIL() << "no exception";
  } catch (const tk::io_error& e) {
    EXPECT_NE(std::string(e.what()).find("batch 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(p.next(), tk::io_error);  // stays failed; does not block
}

TEST(ThreadedPrefetcher, SeekRecoversAfterAProducerException) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  tp::threaded_prefetcher<faulty_source, 2> p{faulty_source(2, calls)};
  drain(p, 2);
  EXPECT_THROW(p.next(), tk::io_error);
  p.seek({0, 0, 0, 17});  // the fault fired once; the source works again
  EXPECT_EQ(drain(p, 5), bare(td::synthetic_source(small()), 5));
}

TEST(ThreadedPrefetcher, DestructionWithTheProducerBlockedOnAFullRingDoesNotHang) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto p = std::make_unique<tp::threaded_prefetcher<faulty_source, 3>>(faulty_source(-1, calls));
  ASSERT_TRUE(eventually([&] { return calls->load() == 3; })) << calls->load();
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(calls->load(), 3) << "the ring holds Depth batches ahead, no more";
  auto done = std::async(std::launch::async, [&] { p.reset(); });
  ASSERT_EQ(done.wait_for(20s), std::future_status::ready) << "destructor hung";
}

TEST(ThreadedPrefetcher, DestructionAfterTheConsumerStoppedEarlyDoesNotHang) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto p =
      std::make_unique<tp::threaded_prefetcher<faulty_source, 2>>(faulty_source(-1, calls, 5ms));
  p->next();
  p->next();
  auto done = std::async(std::launch::async, [&] { p.reset(); });
  ASSERT_EQ(done.wait_for(20s), std::future_status::ready) << "destructor hung";
  const int produced = calls->load();
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(calls->load(), produced) << "worker still running after destruction";
}

TEST(ThreadedPrefetcher, HoldsOneSlotForTheConsumerAndDepthAhead) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  tp::threaded_prefetcher<faulty_source, 2> p{faulty_source(-1, calls)};
  ASSERT_TRUE(eventually([&] { return calls->load() == 2; }));
  p.next();  // consumer holds 1, one ready: the worker may fill one more
  ASSERT_TRUE(eventually([&] { return calls->load() == 3; }));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(calls->load(), 3);
}

TEST(ThreadedPrefetcher, ManyBatchesNoDelay) {
  // Stress for the ThreadSanitizer build: thousands of hand-offs with no sleeps.
  td::synthetic_config cfg{.batch_size = 1, .seq_len = 4, .seed = 3};
  const auto expected = bare(td::synthetic_source(cfg), 5000);
  tp::threaded_prefetcher<td::synthetic_source, 2> p{td::synthetic_source(cfg)};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto v = p.next();
    ASSERT_EQ(v.inputs[0], expected[i].inputs[0]) << i;
    ASSERT_EQ(p.position(), expected[i].after) << i;
  }
}
