// Tests of the trainer's clipping step (optim::host_grad_clip) over reduce::single's facts (no
// MPI): single owns every bucket's range and combines nothing, so the norm over the buckets is
// the whole-buffer global norm bit for bit, whatever order the buckets are published in; the
// factor is max_norm / norm when the norm exceeds a positive threshold and exactly 1 otherwise (a
// threshold above the norm, or 0 = off); the gradients are not touched; a step before attach()
// (single then owns nothing) is an error, not a norm of nothing; and a reducer whose owned range
// cuts a norm chunk is refused. single delivers whole gradients (gradient_layout::replicated).
#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <span>
#include <vector>

#include "trainkit/comm/gradient_layout.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/execution_context.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/optim/grad_clip.hpp"
#include "trainkit/reduce/single.hpp"

namespace tk = trainkit;

static_assert(tk::reduce::single::delivered_gradients == tk::gradient_layout::replicated);

namespace {

/// A flat gradient buffer over three norm chunks and a bit, in buckets published out of order.
struct bucketed {
  using memory_space = tk::host_memory;
  using parameter_type = float;
  std::vector<float> grads;
  std::vector<tk::gradient_bucket> buckets;
  std::span<float> gradients() { return grads; }
  std::span<const tk::gradient_bucket> gradient_buckets() const { return buckets; }
};

bucketed make(float scale) {
  const std::size_t n = 3 * tk::optim::norm_chunk_elements + 101;
  bucketed m;
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, scale);
  m.grads.resize(n);
  for (float& g : m.grads) g = normal(rng);
  const std::size_t a = 1000, b = 2 * tk::optim::norm_chunk_elements + 5;
  m.buckets = {{"tail", {{b, n - b}}}, {"middle", {{a, b - a}}}, {"head", {{0, a}}}};
  tk::check_buckets_tile(m.buckets, n, "test layout");
  return m;
}

/// A sharded reducer that owns [begin, end) and has no other rank to combine with.
struct owns_part {
  static constexpr tk::gradient_layout delivered_gradients = tk::gradient_layout::reduce_scattered;
  tk::gradient_range mine;
  template <class M, class C>
  void attach(M&, C&) {}
  void bucket_ready(std::size_t) {}
  void finish() {}
  std::span<const tk::gradient_range> owned_gradients() const { return {&mine, 1}; }
  void combine_norm_partials(std::span<double>, tk::host_context&) {}
};

}  // namespace

TEST(ReduceSingle, ClipIsTheGlobalNormOverTheBucketsAndItsFactor) {
  bucketed m = make(0.01f);
  const std::vector<float> before = m.grads;
  tk::reduce::single r;
  tk::host_context ctx;
  r.attach(m, ctx);
  const std::span<const float> g(m.grads);
  const double whole = tk::optim::global_norm(g);
  ASSERT_GT(whole, 1.0) << "the test needs a norm above the default threshold";

  tk::optim::host_grad_clip clip;
  const auto clipped = clip(g, m.gradient_buckets(), r, 1.0, ctx);
  EXPECT_EQ(clip.norm(), whole) << "bucket order must not change the norm's bits";
  EXPECT_EQ(clipped.factor, 1.0 / whole) << "max_norm / norm, no epsilon";

  const auto above = clip(g, m.gradient_buckets(), r, 2 * whole, ctx);
  EXPECT_EQ(above.factor, 1.0) << "a threshold above the norm leaves the step unscaled";
  const auto off = clip(g, m.gradient_buckets(), r, 0.0, ctx);
  EXPECT_EQ(off.factor, 1.0) << "0 = off";
  EXPECT_EQ(clip.norm(), whole) << "the norm is logged whatever the threshold";
  EXPECT_EQ(m.grads, before) << "clipping scales inside the update, never the gradients";
}

TEST(ReduceSingle, ClipBeforeAttachThrows) {
  bucketed m = make(1.0f);
  tk::reduce::single r;
  tk::host_context ctx;
  EXPECT_TRUE(r.owned_gradients().empty());
  tk::optim::host_grad_clip clip;
  EXPECT_THROW(clip(std::span<const float>(m.grads), m.gradient_buckets(), r, 1.0, ctx),
               tk::config_error);
  EXPECT_EQ(clip.norm(), 0.0);
}

// A sharded reducer's rank sums only the chunks it owns (here, with nobody to combine with, the
// norm of its shard alone); an owned range off the chunk grid is refused, never summed.
TEST(ReduceSingle, AShardedReducersStepSumsOnlyItsChunks) {
  bucketed m = make(0.01f);
  tk::host_context ctx;
  const std::span<const float> g(m.grads);
  const std::size_t chunk = tk::optim::norm_chunk_elements;
  tk::optim::host_grad_clip clip;
  owns_part second{{chunk, 2 * chunk}};
  clip(g, m.gradient_buckets(), second, 0.0, ctx);
  EXPECT_EQ(clip.norm(), tk::optim::global_norm(g.subspan(chunk, 2 * chunk)));
  owns_part starts_off_grid{{chunk + 1, chunk}};
  EXPECT_THROW(clip(g, m.gradient_buckets(), starts_off_grid, 0.0, ctx), tk::config_error);
  owns_part ends_off_grid{{chunk, chunk + 5}};
  EXPECT_THROW(clip(g, m.gradient_buckets(), ends_off_grid, 0.0, ctx), tk::config_error);
}
