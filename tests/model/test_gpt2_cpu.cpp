// Tests for trainkit/model/gpt2/cpu.hpp: finite-difference gradients for every parameter tensor,
// loss at initialisation, learning, gradient accumulation, determinism, float/double agreement,
// initialisation statistics, logits and input checks.
#include "trainkit/model/gpt2/cpu.hpp"  // first: the header compiles on its own

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace tk = trainkit;
using tk::model::gpt2_config;

namespace {

gpt2_config tiny_config() {  // small enough for finite differences on every tensor
  gpt2_config c;
  c.max_seq_len = 8;
  c.vocab_size = 37;
  c.padded_vocab_size = 128;
  c.num_layers = 2;
  c.num_heads = 2;
  c.channels = 8;
  return c;
}

// Big enough that Eigen's GEMMs and every OpenMP loop split work at B·T = 256
// (detail::parallel_threshold).
gpt2_config small_config() {
  gpt2_config c;
  c.max_seq_len = 64;
  c.vocab_size = 1000;
  c.padded_vocab_size = 1024;
  c.num_layers = 2;
  c.num_heads = 4;
  c.channels = 128;
  return c;
}

tk::host_batch random_batch(int B, int T, int vocab, std::uint32_t seed) {
  tk::host_batch b(B, T);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> tok(0, vocab - 1);
  for (auto& x : b.inputs) x = tok(rng);
  for (auto& x : b.targets) x = tok(rng);
  return b;
}

const tk::tensor_info& find_tensor(std::span<const tk::tensor_info> layout, const std::string& n) {
  for (const auto& t : layout)
    if (t.name == n) return t;
  throw std::runtime_error("no tensor " + n);
}

// Parameters far from GPT-2's init (random gains and biases, padded wte rows non-zero) so that a
// backward that confuses a gain with a bias, or lets padded rows leak in, shows up.
template <class M>
void randomise(M& m, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> n(0.0, 0.3);
  for (const auto& t : m.parameter_layout()) {
    const bool gain = t.name == "ln1w" || t.name == "ln2w" || t.name == "lnfw";
    for (std::size_t i = 0; i < t.numel(); ++i)
      m.parameters()[t.offset + i] = (gain ? 1.0 : 0.0) + n(rng);
  }
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
      double& p = m.parameters()[t.offset + i];
      const double saved = p;
      p = saved + h;
      m.forward(tk::view_of(batch));
      const double up = m.last_loss();
      p = saved - h;
      m.forward(tk::view_of(batch));
      const double down = m.last_loss();
      p = saved;
      const double numeric = (up - down) / (2 * h);
      const double a = analytic[t.offset + i];
      const double err = std::abs(a - numeric) / std::max({std::abs(a), std::abs(numeric), 1e-4});
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
  const float first = m.forward(tk::view_of(batch));
  float last = first;
  for (int step = 0; step < 30; ++step) {
    m.zero_grad();
    last = m.forward_backward(tk::view_of(batch), 1.0f);
    auto p = m.parameters();
    auto g = m.gradients();
    for (std::size_t i = 0; i < p.size(); ++i) p[i] -= 0.5f * g[i];
  }
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
  const tk::host_batch batch = random_batch(2, 8, cfg.vocab_size, 5);
  m.zero_grad();
  const float loss = m.forward(tk::view_of(batch));
  EXPECT_TRUE(
      std::all_of(m.gradients().begin(), m.gradients().end(), [](float g) { return g == 0.0f; }));
  // Cross-entropy recomputed from the exposed logits over the V real tokens only.
  const auto logits = m.forward_logits(batch.inputs, 2, 8);
  ASSERT_EQ(logits.size(), std::size_t(16) * cfg.padded_vocab_size);
  double sum = 0;
  for (int r = 0; r < 16; ++r) {
    const float* row = logits.data() + std::size_t(r) * cfg.padded_vocab_size;
    const double mx = *std::max_element(row, row + cfg.vocab_size);
    double z = 0;
    for (int v = 0; v < cfg.vocab_size; ++v) z += std::exp(row[v] - mx);
    sum += std::log(z) - (row[batch.targets[r]] - mx);
  }
  EXPECT_NEAR(loss, sum / 16, 1e-4);
  // Causality: changing the last input token leaves earlier positions' logits alone.
  std::vector<float> before(logits.begin(), logits.end());
  std::vector<std::int32_t> changed = batch.inputs;
  changed[7] = (changed[7] + 1) % cfg.vocab_size;
  const auto after = m.forward_logits(changed, 2, 8);
  const std::size_t Vp = cfg.padded_vocab_size;
  EXPECT_TRUE(std::equal(after.begin(), after.begin() + 7 * Vp, before.begin()));
  EXPECT_FALSE(std::equal(after.begin() + 7 * Vp, after.begin() + 8 * Vp, before.begin() + 7 * Vp));
}

TEST(Gpt2Cpu, RejectsBadBatches) {
  const gpt2_config cfg = tiny_config();
  tk::model::gpt2_cpu m(cfg, 1);
  tk::host_batch b = random_batch(1, 4, cfg.vocab_size, 1);
  b.targets[2] = cfg.vocab_size;  // one past the end
  try {
    m.forward_backward(tk::view_of(b), 1.0f);
    FAIL() << "no exception";
  } catch (const tk::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("37"), std::string::npos) << e.what();
  }
  b.targets[2] = 0;
  b.inputs[1] = -1;
  EXPECT_THROW(m.forward(tk::view_of(b)), tk::config_error);
  const tk::host_batch long_batch = random_batch(1, cfg.max_seq_len + 1, cfg.vocab_size, 2);
  try {
    m.forward(tk::view_of(long_batch));
    FAIL() << "no exception";
  } catch (const tk::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("T=9"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tk::model::gpt2_cpu(gpt2_config{}, 1), tk::config_error);
}

TEST(Gpt2Cpu, StateCoversEveryParameterTensor) {
  tk::model::gpt2_cpu m(tiny_config(), 1);
  const auto st = m.state();
  const auto layout = m.parameter_layout();
  ASSERT_EQ(st.size(), layout.size());
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < st.size(); ++i) {
    EXPECT_EQ(st[i].name, "model." + layout[i].name);
    EXPECT_EQ(st[i].shape, layout[i].shape);
    EXPECT_EQ(st[i].type, tk::dtype::f32);
    EXPECT_EQ(reinterpret_cast<const float*>(st[i].data), m.parameters().data() + layout[i].offset);
    bytes += st[i].bytes();
  }
  EXPECT_EQ(bytes, m.parameters().size_bytes());
}
