// tests/model/model_checks.hpp — test helpers every model family's CPU tests share: a random batch,
// a tensor looked up by name, a central finite difference of the loss, and two checks any
// transformer_cpu composition must pass whatever its block (the logits give the loss and are
// causal; state() covers the parameter layout). Family-neutral: a model is any type with the
// transformer_cpu interface (parameter_layout, parameters, forward, last_loss, forward_logits,
// state), so GPT-2, Llama and the rope_gpt2 fixture family call the same checks.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "trainkit/core/batch.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/tensor.hpp"

namespace trainkit::test_model {

/// B×T inputs and targets drawn uniformly from [0, vocab) with `seed`.
inline host_batch random_batch(int B, int T, int vocab, std::uint32_t seed) {
  host_batch b(B, T);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> tok(0, vocab - 1);
  for (auto& x : b.inputs) x = tok(rng);
  for (auto& x : b.targets) x = tok(rng);
  return b;
}

inline const tensor_info& find_tensor(std::span<const tensor_info> layout, const std::string& n) {
  for (const auto& t : layout)
    if (t.name == n) return t;
  throw std::runtime_error("no tensor " + n);
}

/// The shape fields every family's config has.
struct common_shape {
  int max_seq_len, vocab_size, padded_vocab_size, num_layers, num_heads, channels;
};

/// `c` with the common fields set to `s`.
template <class Config>
Config with_shape(Config c, const common_shape& s) {
  c.max_seq_len = s.max_seq_len;
  c.vocab_size = s.vocab_size;
  c.padded_vocab_size = s.padded_vocab_size;
  c.num_layers = s.num_layers;
  c.num_heads = s.num_heads;
  c.channels = s.channels;
  return c;
}

/// Every parameter drawn from N(0, 0.3), plus 1 for the tensors `is_gain` picks, padded rows
/// included: far from any init, so a backward that mixes up tensors or lets padded rows leak in
/// shows up.
template <class M, class IsGain>
void randomise(M& m, std::uint32_t seed, IsGain is_gain) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> n(0.0, 0.3);
  for (const auto& t : m.parameter_layout()) {
    const bool gain = is_gain(t);
    for (std::size_t i = 0; i < t.numel(); ++i)
      m.parameters()[t.offset + i] = (gain ? 1.0 : 0.0) + n(rng);
  }
}

/// (loss(p + h) − loss(p − h)) / 2h for parameter `index` of a double-precision model; the
/// parameter is restored.
template <class M>
double central_difference(M& m, const host_batch& batch, std::size_t index, double h) {
  double& p = m.parameters()[index];
  const double saved = p;
  p = saved + h;
  m.forward(view_of(batch));
  const double up = m.last_loss();
  p = saved - h;
  m.forward(view_of(batch));
  const double down = m.last_loss();
  p = saved;
  return (up - down) / (2 * h);
}

/// |a − numeric| relative to the larger of the two (floored at 1e-4).
inline double gradient_error(double a, double numeric) {
  return std::abs(a - numeric) / std::max({std::abs(a), std::abs(numeric), 1e-4});
}

/// Expects `f()` to throw a config_error whose message contains `needle`.
template <class F>
void expect_config_error(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one naming '" << needle << "'";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

/// Plain SGD (p -= lr·g) for `steps` steps on one batch: the loss before the first step and the
/// last step's loss.
template <class M>
std::pair<float, float> sgd_on_one_batch(M& m, const host_batch& batch, int steps, float lr) {
  const float first = m.forward(view_of(batch));
  float last = first;
  for (int step = 0; step < steps; ++step) {
    m.zero_grad();
    last = m.forward_backward(view_of(batch), 1.0f);
    auto p = m.parameters();
    auto g = m.gradients();
    for (std::size_t i = 0; i < p.size(); ++i) p[i] -= lr * g[i];
  }
  return {first, last};
}

/// forward() of a 2×8 random batch (seed 5) leaves the gradients zero; the cross-entropy
/// recomputed from forward_logits over the V real tokens is the loss; changing the last input
/// token leaves the earlier positions' logits alone and changes the last one's.
template <class M>
void check_logits_give_loss_and_are_causal(M& m, int vocab_size, int padded_vocab_size) {
  const host_batch batch = random_batch(2, 8, vocab_size, 5);
  m.zero_grad();
  const float loss = m.forward(view_of(batch));
  EXPECT_TRUE(
      std::all_of(m.gradients().begin(), m.gradients().end(), [](float g) { return g == 0.0f; }));
  const auto logits = m.forward_logits(batch.inputs, 2, 8);
  ASSERT_EQ(logits.size(), std::size_t(16) * padded_vocab_size);
  double sum = 0;
  for (int r = 0; r < 16; ++r) {
    const float* row = logits.data() + std::size_t(r) * padded_vocab_size;
    const double mx = *std::max_element(row, row + vocab_size);
    double z = 0;
    for (int v = 0; v < vocab_size; ++v) z += std::exp(row[v] - mx);
    sum += std::log(z) - (row[batch.targets[r]] - mx);
  }
  EXPECT_NEAR(loss, sum / 16, 1e-4);
  std::vector<float> before(logits.begin(), logits.end());
  std::vector<std::int32_t> changed = batch.inputs;
  changed[7] = (changed[7] + 1) % vocab_size;
  const auto after = m.forward_logits(changed, 2, 8);
  const std::size_t Vp = padded_vocab_size;
  EXPECT_TRUE(std::equal(after.begin(), after.begin() + 7 * Vp, before.begin()));
  EXPECT_FALSE(std::equal(after.begin() + 7 * Vp, after.begin() + 8 * Vp, before.begin() + 7 * Vp));
}

/// state() lists every parameter tensor in layout order as "model.<name>", float32, viewing the
/// model's own parameters, and its bytes add up to the parameters'.
template <class M>
void check_state_covers_layout(M& m) {
  const auto st = m.state();
  const auto layout = m.parameter_layout();
  ASSERT_EQ(st.size(), layout.size());
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < st.size(); ++i) {
    EXPECT_EQ(st[i].name, "model." + layout[i].name);
    EXPECT_EQ(st[i].shape, layout[i].shape);
    EXPECT_EQ(st[i].type, dtype::f32);
    EXPECT_EQ(reinterpret_cast<const float*>(st[i].data), m.parameters().data() + layout[i].offset);
    bytes += st[i].bytes();
  }
  EXPECT_EQ(bytes, m.parameters().size_bytes());
}

}  // namespace trainkit::test_model
