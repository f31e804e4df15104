// tests/examples/test_custom_policy.cpp — the user-written policies of examples/custom_policy.
//
// The example's end-to-end runs (loss falls, resume matches) are ctest scripts beside this file;
// here are the properties a run cannot show: mlp_lm's hand-written backward pass against finite
// differences, forward() leaving gradients alone, grad_scale accumulating, its gradient buckets
// published in backward's order (each final when published, none early, only on the last
// micro-step, tiling the buffer), and char_corpus's seek() reproducing the batches after any
// position.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "char_corpus.hpp"
#include "mlp_lm.hpp"

namespace {

using custom_policy::char_corpus;
using custom_policy::mlp_lm;
using custom_policy::mlp_lm_config;

trainkit::host_batch random_batch(int B, int T, int V, std::uint64_t seed) {
  trainkit::host_batch b(B, T);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> tok(1, V - 1);
  for (auto& t : b.inputs) t = tok(rng);
  for (auto& t : b.targets) t = tok(rng);
  return b;
}

TEST(MlpLm, GradientMatchesFiniteDifferences) {
  const mlp_lm_config cfg{.vocab = 11, .context = 3, .embed = 4, .hidden = 6};
  mlp_lm m(cfg, 7);
  const auto batch = random_batch(2, 5, cfg.vocab, 3);
  const auto view = trainkit::view_of(batch);
  m.zero_grad();
  m.forward_backward(view, 1.0f);
  const std::vector<float> analytic(m.gradients().begin(), m.gradients().end());

  // Central differences in double would need a double model; in float, h = 1e-2 keeps the
  // rounding error of the loss (~1e-7 relative) well below the truncation error we tolerate.
  auto params = m.parameters();
  int checked = 0;
  for (const auto& t : m.parameter_layout()) {
    for (std::size_t i = 0; i < t.numel(); i += 1 + t.numel() / 7) {  // a spread of entries
      float& w = params[t.offset + i];
      const float saved = w, h = 1e-2f;
      w = saved + h;
      const double up = m.forward(view);
      w = saved - h;
      const double down = m.forward(view);
      w = saved;
      const double numeric = (up - down) / (2.0 * h);
      EXPECT_NEAR(analytic[t.offset + i], numeric, 2e-3 + 2e-2 * std::abs(numeric))
          << t.name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
  // The output bias gradient of a softmax sums to zero: a sign or scale error would break it.
  double sum_b2 = 0;
  for (const auto& t : m.parameter_layout())
    if (t.name == "b2")
      for (std::size_t i = 0; i < t.numel(); ++i) sum_b2 += analytic[t.offset + i];
  EXPECT_NEAR(sum_b2, 0.0, 1e-5);
}

TEST(MlpLm, ForwardLeavesGradientsAndGradScaleAccumulates) {
  const mlp_lm_config cfg{.vocab = 16, .context = 2, .embed = 3, .hidden = 5};
  mlp_lm m(cfg, 1);
  const auto batch = random_batch(3, 4, cfg.vocab, 9);
  const auto view = trainkit::view_of(batch);
  m.zero_grad();
  const float loss_fb = m.forward_backward(view, 0.5f);
  const std::vector<float> half(m.gradients().begin(), m.gradients().end());
  EXPECT_FLOAT_EQ(m.forward(view), loss_fb);
  EXPECT_EQ(std::vector<float>(m.gradients().begin(), m.gradients().end()), half);
  m.forward_backward(view, 0.5f);  // adds the other half
  m.zero_grad();
  m.forward_backward(view, 1.0f);
  const std::vector<float> full(m.gradients().begin(), m.gradients().end());
  double nonzero = 0;
  for (std::size_t i = 0; i < full.size(); ++i) {
    EXPECT_NEAR(full[i], 2.0f * half[i], 1e-6f + 1e-5f * std::abs(full[i]));
    nonzero += full[i] != 0.0f;
  }
  EXPECT_GT(nonzero, 0.5 * double(full.size()));  // the comparison above is not vacuous
}

TEST(MlpLm, LayoutCoversTheBufferWithDecayOnMatricesOnly) {
  mlp_lm m(mlp_lm_config{}, 1);
  std::size_t next = 0;
  for (const auto& t : m.parameter_layout()) {
    EXPECT_EQ(t.offset, next) << t.name;
    next += t.numel();
    const auto role = t.shape.size() == 1 ? trainkit::tensor_role::bias
                      : t.name == "emb"   ? trainkit::tensor_role::embedding
                                          : trainkit::tensor_role::matrix;
    EXPECT_EQ(t.role, role) << t.name;
  }
  EXPECT_EQ(next, m.num_parameters());
  EXPECT_EQ(m.parameters().size(), m.num_parameters());
  EXPECT_EQ(m.state().size(), m.parameter_layout().size());
}

/// What the model's gradients looked like each time it published a bucket.
struct publication_log {
  mlp_lm* model = nullptr;
  std::vector<std::size_t> order;
  std::vector<std::vector<float>> gradients;  // the whole buffer at each publication

  static void ready(void* self, std::size_t bucket) {
    auto& log = *static_cast<publication_log*>(self);
    log.order.push_back(bucket);
    const auto g = log.model->gradients();
    log.gradients.emplace_back(g.begin(), g.end());
  }
  trainkit::model::bucket_observer observer() { return {this, &ready}; }
};

/// The elements of `g` inside `bucket`.
std::vector<float> in_bucket(std::span<const float> g, const trainkit::model::gradient_bucket& b) {
  std::vector<float> out;
  for (const auto& r : b.ranges)
    out.insert(out.end(), g.begin() + r.offset, g.begin() + r.offset + r.count);
  return out;
}

TEST(MlpLm, PublishesItsBucketsInBackwardOrderEachFinalWhenPublished) {
  const mlp_lm_config cfg{.vocab = 13, .context = 3, .embed = 4, .hidden = 6};
  mlp_lm m(cfg, 5);
  const auto buckets = m.gradient_buckets();
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].name, "output");
  EXPECT_EQ(buckets[1].name, "hidden");
  EXPECT_EQ(buckets[2].name, "embedding");
  EXPECT_NO_THROW(trainkit::model::check_buckets_tile(buckets, m.num_parameters(), "mlp_lm"));

  const auto b1 = random_batch(2, 5, cfg.vocab, 4), b2 = random_batch(2, 5, cfg.vocab, 8);
  trainkit::host_context ctx;
  publication_log log{&m, {}, {}};
  m.zero_grad(ctx);
  trainkit::model::micro_step micro{0.5f, 0, 2, log.observer()};
  m.forward_backward(trainkit::view_of(b1), micro, ctx);
  EXPECT_TRUE(log.order.empty()) << "nothing is final before the last micro-step";
  const std::vector<float> after_first(m.gradients().begin(), m.gradients().end());
  micro.index = 1;
  m.forward_backward(trainkit::view_of(b2), micro, ctx);
  ASSERT_EQ(log.order, (std::vector<std::size_t>{0, 1, 2}));
  const std::span<const float> final_grads = m.gradients();
  for (std::size_t k = 0; k < 3; ++k) {
    // Final when published: the bucket already holds what it holds after backward...
    EXPECT_EQ(in_bucket(log.gradients[k], buckets[k]), in_bucket(final_grads, buckets[k]))
        << buckets[k].name;
    // ...and published as soon as it was: the buckets after it were still untouched by this
    // micro-step's backward.
    for (std::size_t later = k + 1; later < 3; ++later)
      EXPECT_EQ(in_bucket(log.gradients[k], buckets[later]), in_bucket(after_first, buckets[later]))
          << buckets[later].name << " changed before " << buckets[k].name << " was published";
  }
  EXPECT_NE(in_bucket(after_first, buckets[2]), in_bucket(final_grads, buckets[2]))
      << "the second micro-step must change the embedding gradients for the check to mean "
         "something";

  // The same micro-steps through the one-call API give the same gradients: listening is free.
  mlp_lm plain(cfg, 5);
  plain.zero_grad();
  plain.forward_backward(trainkit::view_of(b1), 0.5f);
  plain.forward_backward(trainkit::view_of(b2), 0.5f);
  EXPECT_TRUE(std::ranges::equal(plain.gradients(), final_grads));
}

TEST(MlpLm, RejectsTokensOutsideTheVocabulary) {
  const mlp_lm_config cfg{.vocab = 8, .context = 2, .embed = 2, .hidden = 2};
  mlp_lm m(cfg, 1);
  auto batch = random_batch(1, 4, cfg.vocab, 2);
  batch.targets[3] = 8;
  EXPECT_THROW(m.forward(trainkit::view_of(batch)), trainkit::config_error);
}

TEST(CharCorpus, SeekReproducesTheBatchesAfterAnyPosition) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += char('a' + (i * 7) % 26);
  char_corpus a(text, {.batch_size = 3, .seq_len = 16});
  trainkit::host_batch b;
  std::vector<trainkit::source_position> positions;
  std::vector<std::vector<std::int32_t>> inputs;
  for (int i = 0; i < 12; ++i) {  // wraps around the 300 characters more than once
    positions.push_back(a.position());
    a.next(b);
    inputs.push_back(b.inputs);
    for (std::size_t k = 0; k + 1 < b.inputs.size(); ++k) {
      if ((k + 1) % 16 != 0) {
        ASSERT_EQ(b.targets[k], b.inputs[k + 1]);  // shifted by one within a row
      }
    }
  }
  char_corpus c(text, {.batch_size = 3, .seq_len = 16});
  for (int i = 11; i >= 0; --i) {
    c.seek(positions[std::size_t(i)]);
    c.next(b);
    EXPECT_EQ(b.inputs, inputs[std::size_t(i)]) << "batch " << i;
  }
  EXPECT_NE(inputs[0], inputs[1]);
}

TEST(CharCorpus, RejectsATextShorterThanAWindow) {
  EXPECT_THROW(char_corpus("short", {.batch_size = 1, .seq_len = 8}), trainkit::config_error);
}

}  // namespace
