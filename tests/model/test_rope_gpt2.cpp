// Tests for the third model family, tests/model/rope_gpt2/rope_gpt2.hpp (GPT-2's block with
// RMSNorm and RoPE), written as a fixture to hold the claim of docs/writing_a_policy.md: a family
// is its config, its block and its kernels, and trains on the shared CPU transformer. Finite
// differences on every tensor (double), the loss at initialisation, learning on a fixed batch,
// micro-step accumulation equal to one batch, and positions that matter (RoPE is the only
// position signal).
#include "rope_gpt2/rope_gpt2.hpp"  // first: the fixture compiles on its own

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "trainkit/core/batch.hpp"

namespace tk = trainkit;

namespace {

rope_gpt2::config tiny() {
  rope_gpt2::config c;
  c.max_seq_len = 8;
  c.vocab_size = 29;
  c.padded_vocab_size = 32;
  c.num_layers = 2;
  c.num_heads = 2;
  c.channels = 8;
  c.rope_theta = 100.0f;  // angles that turn visibly within T = 5
  return c;
}

tk::host_batch random_batch(int B, int T, int vocab, std::uint32_t seed) {
  tk::host_batch b(B, T);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> tok(0, vocab - 1);
  for (auto& t : b.inputs) t = tok(rng);
  for (auto& t : b.targets) t = tok(rng);
  return b;
}

}  // namespace

TEST(RopeGpt2, GradientsMatchFiniteDifferencesForEveryTensor) {
  const rope_gpt2::config cfg = tiny();
  rope_gpt2::model<double> m(cfg, 1);
  std::mt19937 rng(2);
  std::normal_distribution<double> n(0.0, 0.3);
  for (const auto& t : m.parameter_layout())  // weights large enough that every path matters
    for (std::size_t i = 0; i < t.numel(); ++i)
      m.parameters()[t.offset + i] = (t.role == tk::tensor_role::norm ? 1.0 : 0.0) + n(rng);
  const tk::host_batch batch = random_batch(2, 5, cfg.vocab_size, 3);
  m.zero_grad();
  m.forward_backward(tk::view_of(batch), 1.0f);
  const std::vector<double> analytic(m.gradients().begin(), m.gradients().end());
  const double h = 1e-5;
  for (const auto& t : m.parameter_layout()) {
    std::uniform_int_distribution<std::size_t> pick(0, t.numel() - 1);
    int nonzero = 0;
    for (int k = 0; k < 25; ++k) {
      const std::size_t i = t.name == "wte"
                                ? std::size_t(batch.inputs[0]) * cfg.channels + std::size_t(k) % 8
                                : pick(rng);
      double& p = m.parameters()[t.offset + i];
      const double saved = p;
      p = saved + h;
      m.forward(tk::view_of(batch));
      const double up = m.last_loss();
      p = saved - h;
      m.forward(tk::view_of(batch));
      const double down = m.last_loss();
      p = saved;
      const double numeric = (up - down) / (2 * h), a = analytic[t.offset + i];
      EXPECT_LT(std::abs(a - numeric) / std::max({std::abs(a), std::abs(numeric), 1e-4}), 1e-5)
          << t.name << "[" << i << "] analytic " << a << " numeric " << numeric;
      nonzero += std::abs(a) > 1e-8;
    }
    EXPECT_GT(nonzero, 10) << t.name;
  }
}

TEST(RopeGpt2, TrainsOnAFixedBatch) {
  rope_gpt2::config cfg = tiny();
  cfg.channels = 32;
  cfg.num_heads = 4;
  rope_gpt2::model<float> m(cfg, 7);
  const tk::host_batch batch = random_batch(4, 8, cfg.vocab_size, 5);
  m.zero_grad();
  const float first = m.forward_backward(tk::view_of(batch), 1.0f);
  EXPECT_NEAR(first, std::log(float(cfg.vocab_size)), 0.1f);  // small weights: near uniform
  float loss = first;
  for (int step = 0; step < 60; ++step) {
    auto p = m.parameters();
    auto g = m.gradients();
    for (std::size_t i = 0; i < p.size(); ++i) p[i] -= 0.5f * g[i];
    m.zero_grad();
    loss = m.forward_backward(tk::view_of(batch), 1.0f);
  }
  EXPECT_LT(loss, 0.5f * first) << "first " << first << ", after 60 SGD steps " << loss;
}

TEST(RopeGpt2, TwoHalfBatchesAtHalfScaleEqualTheFullBatch) {
  const rope_gpt2::config cfg = tiny();
  const tk::host_batch full = random_batch(2, 6, cfg.vocab_size, 9);
  tk::host_batch a(1, 6), b(1, 6);
  std::copy_n(full.inputs.begin(), 6, a.inputs.begin());
  std::copy_n(full.targets.begin(), 6, a.targets.begin());
  std::copy_n(full.inputs.begin() + 6, 6, b.inputs.begin());
  std::copy_n(full.targets.begin() + 6, 6, b.targets.begin());
  rope_gpt2::model<double> one(cfg, 3), two(cfg, 3);
  one.zero_grad();
  one.forward_backward(tk::view_of(full), 1.0f);
  two.zero_grad();
  two.forward_backward(tk::view_of(a), 0.5f);
  two.forward_backward(tk::view_of(b), 0.5f);
  for (std::size_t i = 0; i < one.gradients().size(); ++i)
    ASSERT_NEAR(one.gradients()[i], two.gradients()[i], 1e-12) << i;
}

TEST(RopeGpt2, PositionsComeFromRope) {
  // Without a position table, causal attention over the same tokens in another order gives the
  // last position the same logits; RoPE is what tells "x y z" from "y x z".
  const rope_gpt2::config cfg = tiny();
  rope_gpt2::model<double> m(cfg, 4);
  const std::size_t Vp = std::size_t(cfg.padded_vocab_size);
  auto last_row = [&](std::vector<std::int32_t> tokens) {
    const auto logits = m.forward_logits(tokens, 1, 3);
    return std::vector<double>(logits.begin() + 2 * Vp, logits.begin() + 3 * Vp);
  };
  const std::vector<double> xyz = last_row({3, 11, 7}), yxz = last_row({11, 3, 7});
  double diff = 0;
  for (int v = 0; v < cfg.vocab_size; ++v) diff = std::max(diff, std::abs(xyz[v] - yxz[v]));
  EXPECT_GT(diff, 1e-6);
}
