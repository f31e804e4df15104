// Tests of reduce::single's clipping step (no MPI): the norm over the buckets is the whole-buffer
// global norm bit for bit, whatever order the buckets are published in; the factor is
// max_norm / norm when the norm exceeds a positive threshold and exactly 1 otherwise (a threshold
// above the norm, or 0 = off); the gradients are not touched; and clip() without attach() is an
// error, not a read of nothing. It delivers whole gradients (gradient_layout::replicated).
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

  const auto clipped = r.clip(g, m.gradient_buckets(), 1.0, ctx);
  EXPECT_EQ(r.norm(), whole) << "bucket order must not change the norm's bits";
  EXPECT_EQ(clipped.factor, 1.0 / whole) << "max_norm / norm, no epsilon";

  const auto above = r.clip(g, m.gradient_buckets(), 2 * whole, ctx);
  EXPECT_EQ(above.factor, 1.0) << "a threshold above the norm leaves the step unscaled";
  const auto off = r.clip(g, m.gradient_buckets(), 0.0, ctx);
  EXPECT_EQ(off.factor, 1.0) << "0 = off";
  EXPECT_EQ(r.norm(), whole) << "the norm is logged whatever the threshold";
  EXPECT_EQ(m.grads, before) << "clipping scales inside the update, never the gradients";
}

TEST(ReduceSingle, ClipBeforeAttachThrows) {
  bucketed m = make(1.0f);
  tk::reduce::single r;
  tk::host_context ctx;
  EXPECT_THROW(r.clip(std::span<const float>(m.grads), m.gradient_buckets(), 1.0, ctx),
               tk::config_error);
  EXPECT_EQ(r.norm(), 0.0);
}
