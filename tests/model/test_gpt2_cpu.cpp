// Tests for trainkit/model/gpt2/cpu.hpp: finite-difference gradients for every parameter tensor,
// loss at initialisation, learning, gradient accumulation, determinism, float/double agreement,
// initialisation statistics, logits and input checks.
#include "trainkit/model/gpt2/cpu.hpp"  // first: the header compiles on its own

#include <gtest/gtest.h>

#include "model_checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace tk = trainkit;
using tk::model::gpt2_config;
using tk::test_model::find_tensor;
using tk::test_model::random_batch;

namespace {

gpt2_config tiny_config() {  // small enough for finite differences on every tensor
  return tk::test_model::with_shape(gpt2_config{}, {8, 37, 128, 2, 2, 8});
}

// Big enough that Eigen's GEMMs and every OpenMP loop split work at B·T = 256
// (detail::parallel_threshold).
gpt2_config small_config() {
  return tk::test_model::with_shape(gpt2_config{}, {64, 1000, 1024, 2, 4, 128});
}

// Parameters far from GPT-2's init (random gains and biases, padded wte rows non-zero) so that a
// backward that confuses a gain with a bias, or lets padded rows leak in, shows up.
template <class M>
void randomise(M& m, std::uint32_t seed) {
  tk::test_model::randomise(m, seed, [](const tk::tensor_info& t) {
    return t.name == "ln1w" || t.name == "ln2w" || t.name == "lnfw";
  });
}

}  // namespace

TEST(Gpt2Cpu, GradientsMatchFiniteDifferencesForEveryTensor) {
  const gpt2_config cfg = tiny_config();
  tk::model::basic_gpt2_cpu<double> m(cfg, 1);
  randomise(m, 2);
  const tk::host_batch batch = random_batch(2, 5, cfg.vocab_size, 3);
  m.zero_grad();
  m.forward_backward(tk::view_of(batch), 1.0f);
  const std::vector<double> analytic(m.gradients().begin(), m.gradients().end());

  std::mt19937 rng(4);
  const double h = 1e-5;
  double worst = 0;
  for (const auto& t : m.parameter_layout()) {
    std::vector<std::size_t> picks;
    std::uniform_int_distribution<std::size_t> pick(0, t.numel() - 1);
    for (int i = 0; i < 40; ++i) picks.push_back(pick(rng));
    if (t.name == "wte") {
      // Rows of tokens that occur, where the gradient is surely non-zero.
      for (int c = 0; c < cfg.channels; ++c)
        picks.push_back(std::size_t(batch.inputs[0]) * cfg.channels + c);
    }
    int nonzero = 0;
    for (std::size_t i : picks) {
      const double numeric = tk::test_model::central_difference(m, batch, t.offset + i, h);
      const double a = analytic[t.offset + i];
      const double err = tk::test_model::gradient_error(a, numeric);
      worst = std::max(worst, err);
      EXPECT_LT(err, 1e-5) << t.name << "[" << i << "] analytic " << a << " numeric " << numeric;
      nonzero += std::abs(a) > 1e-8;
    }
    // wpe rows past T and padded wte rows are legitimately zero; elsewhere most must not be.
    if (t.name != "wpe" && t.name != "wte") {
      EXPECT_GT(nonzero, 10) << t.name;
    }
  }
  RecordProperty("worst_relative_error", std::to_string(worst));

  // Padded vocabulary rows of wte: no gradient at all (not tokens, excluded from the softmax).
  const auto& wte = find_tensor(m.parameter_layout(), "wte");
  for (std::size_t i = std::size_t(cfg.vocab_size) * cfg.channels; i < wte.numel(); ++i)
    ASSERT_EQ(analytic[wte.offset + i], 0.0) << "padded wte element " << i;
  // ... and changing them does not change the loss.
  m.forward(tk::view_of(batch));
  const double before = m.last_loss();
  m.parameters()[wte.offset + std::size_t(cfg.vocab_size + 3) * cfg.channels] += 5.0;
  m.forward(tk::view_of(batch));
  EXPECT_EQ(m.last_loss(), before);
}

TEST(Gpt2Cpu, LossAtInitialisationIsLogVocab) {
  tk::model::gpt2_cpu m(gpt2_config::preset("d2"), 42);
  const tk::host_batch batch = random_batch(2, 32, 50257, 5);
  const float loss = m.forward(tk::view_of(batch));
  EXPECT_NEAR(loss, std::log(50257.0), 0.03 * std::log(50257.0));
}

TEST(Gpt2Cpu, SgdOnAFixedBatchLowersTheLoss) {
  gpt2_config cfg = small_config();
  tk::model::gpt2_cpu m(cfg, 7);
  const tk::host_batch batch = random_batch(4, 16, cfg.vocab_size, 8);
  const auto [first, last] = tk::test_model::sgd_on_one_batch(m, batch, 30, 0.5f);
  EXPECT_LT(last, 0.8f * first) << "first " << first << " last " << last;
}

TEST(Gpt2Cpu, TwoHalfBatchesAtHalfScaleEqualTheFullBatch) {
  const gpt2_config cfg = small_config();
  tk::model::gpt2_cpu whole(cfg, 11), parts(cfg, 11);
  const tk::host_batch full = random_batch(4, 16, cfg.vocab_size, 12);
  tk::host_batch first(2, 16), second(2, 16);
  std::copy_n(full.inputs.begin(), 32, first.inputs.begin());
  std::copy_n(full.targets.begin(), 32, first.targets.begin());
  std::copy_n(full.inputs.begin() + 32, 32, second.inputs.begin());
  std::copy_n(full.targets.begin() + 32, 32, second.targets.begin());

  whole.zero_grad();
  const float loss = whole.forward_backward(tk::view_of(full), 1.0f);
  parts.zero_grad();
  const float l1 = parts.forward_backward(tk::view_of(first), 0.5f);
  const float l2 = parts.forward_backward(tk::view_of(second), 0.5f);
  EXPECT_NEAR(loss, 0.5f * (l1 + l2), 1e-5f);

  auto gw = whole.gradients(), gp = parts.gradients();
  float max_abs = 0, max_diff = 0;
  for (std::size_t i = 0; i < gw.size(); ++i) {
    max_abs = std::max(max_abs, std::abs(gw[i]));
    max_diff = std::max(max_diff, std::abs(gw[i] - gp[i]));
  }
  EXPECT_GT(max_abs, 0.0f);
  EXPECT_LT(max_diff, 1e-4f * max_abs) << "max |g| " << max_abs;
}

TEST(Gpt2Cpu, BitIdenticalRunToRun) {
  const gpt2_config cfg = small_config();
  const tk::host_batch batch = random_batch(4, 64, cfg.vocab_size, 13);
  tk::model::gpt2_cpu a(cfg, 5), b(cfg, 5);
  ASSERT_TRUE(std::equal(a.parameters().begin(), a.parameters().end(), b.parameters().begin()));
  const float la = a.forward_backward(tk::view_of(batch), 1.0f);
  const float lb = b.forward_backward(tk::view_of(batch), 1.0f);
  EXPECT_EQ(std::memcmp(&la, &lb, sizeof la), 0);
  EXPECT_EQ(std::memcmp(a.gradients().data(), b.gradients().data(), a.gradients().size_bytes()), 0);
  // Again on the same model, after zeroing: reused activations must not leak into the result.
  a.zero_grad();
  const float la2 = a.forward_backward(tk::view_of(batch), 1.0f);
  EXPECT_EQ(std::memcmp(&la, &la2, sizeof la), 0);
  EXPECT_EQ(std::memcmp(a.gradients().data(), b.gradients().data(), a.gradients().size_bytes()), 0);
}

TEST(Gpt2Cpu, FloatAndDoubleAgree) {
  const gpt2_config cfg = small_config();
  tk::model::basic_gpt2_cpu<float> f(cfg, 21);
  tk::model::basic_gpt2_cpu<double> d(cfg, 21);
  for (std::size_t i = 0; i < f.parameters().size(); ++i)
    ASSERT_EQ(f.parameters()[i], float(d.parameters()[i])) << "same seed, same draws";
  const tk::host_batch batch = random_batch(2, 32, cfg.vocab_size, 22);
  const float lf = f.forward_backward(tk::view_of(batch), 1.0f);
  const float ld = d.forward_backward(tk::view_of(batch), 1.0f);
  EXPECT_NEAR(lf, ld, 1e-4 * ld);
  double max_abs = 0, max_diff = 0;
  for (std::size_t i = 0; i < f.gradients().size(); ++i) {
    max_abs = std::max(max_abs, std::abs(d.gradients()[i]));
    max_diff = std::max(max_diff, std::abs(double(f.gradients()[i]) - d.gradients()[i]));
  }
  EXPECT_LT(max_diff, 1e-3 * max_abs);
}

TEST(Gpt2Cpu, InitialisationFollowsGpt2) {
  const gpt2_config cfg = small_config();
  tk::model::gpt2_cpu m(cfg, 99), same(cfg, 99), other(cfg, 100);
  EXPECT_TRUE(std::equal(m.parameters().begin(), m.parameters().end(), same.parameters().begin()));
  EXPECT_FALSE(
      std::equal(m.parameters().begin(), m.parameters().end(), other.parameters().begin()));
  auto stats = [&](const std::string& name, std::size_t begin, std::size_t end) {
    const auto& t = find_tensor(m.parameter_layout(), name);
    double s = 0, s2 = 0;
    for (std::size_t i = begin; i < end; ++i) {
      const double x = m.parameters()[t.offset + i];
      s += x;
      s2 += x * x;
    }
    const double n = double(end - begin);
    return std::pair{s / n, std::sqrt(s2 / n - (s / n) * (s / n))};
  };
  const std::size_t C = cfg.channels, L = cfg.num_layers;
  for (const char* name : {"qkvw", "fcw", "wpe"}) {
    const auto [mean, sd] = stats(name, 0, find_tensor(m.parameter_layout(), name).numel());
    EXPECT_NEAR(mean, 0.0, 0.002) << name;
    EXPECT_NEAR(sd, 0.02, 0.001) << name;
  }
  const auto [wmean, wsd] = stats("wte", 0, cfg.vocab_size * C);
  EXPECT_NEAR(wsd, 0.02, 0.001);
  const auto [pmean, psd] = stats("fcprojw", 0, L * C * 4 * C);
  EXPECT_NEAR(psd, 0.02 / std::sqrt(2.0 * L), 0.001);
  const auto [amean, asd] = stats("attprojw", 0, L * C * C);
  EXPECT_NEAR(asd, 0.02 / std::sqrt(2.0 * L), 0.001);
  const auto& wte = find_tensor(m.parameter_layout(), "wte");
  for (std::size_t i = cfg.vocab_size * C; i < wte.numel(); ++i)
    ASSERT_EQ(m.parameters()[wte.offset + i], 0.0f) << "padded wte element " << i;
  for (const char* gain : {"ln1w", "ln2w", "lnfw"}) {
    const auto& t = find_tensor(m.parameter_layout(), gain);
    for (std::size_t i = 0; i < t.numel(); ++i) ASSERT_EQ(m.parameters()[t.offset + i], 1.0f);
  }
  for (const char* bias : {"ln1b", "qkvb", "attprojb", "ln2b", "fcb", "fcprojb", "lnfb"}) {
    const auto& t = find_tensor(m.parameter_layout(), bias);
    for (std::size_t i = 0; i < t.numel(); ++i) ASSERT_EQ(m.parameters()[t.offset + i], 0.0f);
  }
}

TEST(Gpt2Cpu, ForwardLeavesGradientsAndMatchesLogits) {
  const gpt2_config cfg = small_config();
  tk::model::gpt2_cpu m(cfg, 3);
  randomise(m, 4);
  tk::test_model::check_logits_give_loss_and_are_causal(m, cfg.vocab_size, cfg.padded_vocab_size);
}

TEST(Gpt2Cpu, RejectsBadBatches) {
  const gpt2_config cfg = tiny_config();
  tk::model::gpt2_cpu m(cfg, 1);
  tk::host_batch b = random_batch(1, 4, cfg.vocab_size, 1);
  b.targets[2] = cfg.vocab_size;  // one past the end
  tk::test_model::expect_config_error([&] { m.forward_backward(tk::view_of(b), 1.0f); }, "37");
  b.targets[2] = 0;
  b.inputs[1] = -1;
  EXPECT_THROW(m.forward(tk::view_of(b)), tk::config_error);
  const tk::host_batch long_batch = random_batch(1, cfg.max_seq_len + 1, cfg.vocab_size, 2);
  tk::test_model::expect_config_error([&] { m.forward(tk::view_of(long_batch)); }, "T=9");
  EXPECT_THROW(tk::model::gpt2_cpu(gpt2_config{}, 1), tk::config_error);
}

TEST(Gpt2Cpu, StateCoversEveryParameterTensor) {
  tk::model::gpt2_cpu m(tiny_config(), 1);
  tk::test_model::check_state_covers_layout(m);
}
