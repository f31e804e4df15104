// Tests for trainkit/model/sampling.hpp: greedy, top-k, temperature, seeds, padded columns, and
// generation with the CPU GPT-2 (length, range, reproducibility, sliding context).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include <trainkit/model/gpt2/cpu.hpp>
#include <trainkit/model/sampling.hpp>

namespace tk = trainkit;
using tk::model::sampling_config;

TEST(Sampling, TemperatureZeroIsArgmax) {
  std::vector<float> logits{0.1f, 2.0f, -1.0f, 1.9f};
  std::mt19937_64 rng(1);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(tk::model::sample_token<float>(logits, 4, {.temperature = 0}, rng), 1);
}

TEST(Sampling, TopKOnlyDrawsTheKMostLikely) {
  std::vector<float> logits{0.0f, 3.0f, 1.0f, 2.9f, 0.5f, 2.8f};
  std::mt19937_64 rng(2);
  std::set<int> seen;
  for (int i = 0; i < 2000; ++i)
    seen.insert(tk::model::sample_token<float>(logits, 6, {.temperature = 5.0f, .top_k = 3}, rng));
  EXPECT_EQ(seen, (std::set<int>{1, 3, 5}));
}

TEST(Sampling, FrequenciesFollowTheSoftmax) {
  const std::vector<double> logits{0.0, 1.0, 2.0};
  std::mt19937_64 rng(3);
  constexpr int draws = 60000;
  std::map<int, int> counts;
  for (int i = 0; i < draws; ++i)
    ++counts[tk::model::sample_token<double>(logits, 3, {.temperature = 1.0f}, rng)];
  const double z = 1 + std::exp(1.0) + std::exp(2.0);
  for (int k = 0; k < 3; ++k) {
    const double p = std::exp(double(k)) / z;
    const double sd = std::sqrt(draws * p * (1 - p));
    EXPECT_NEAR(counts[k], draws * p, 5 * sd) << k;  // 5 sigma: fails only if the law is wrong
  }
}

TEST(Sampling, PaddedColumnsAreNeverCandidates) {
  std::vector<float> logits{0.0f, 0.0f, 100.0f, 100.0f};  // V = 2, Vp = 4
  std::mt19937_64 rng(4);
  for (int i = 0; i < 200; ++i) EXPECT_LT(tk::model::sample_token<float>(logits, 2, {}, rng), 2);
  EXPECT_THROW(tk::model::sample_token<float>(logits, 5, {}, rng), tk::config_error);
  EXPECT_THROW(sampling_config{.temperature = -1}.validate(), tk::config_error);
}

namespace {
tk::model::gpt2_config tiny() {
  return {.max_seq_len = 8,
          .vocab_size = 50,
          .padded_vocab_size = 128,
          .num_layers = 1,
          .num_heads = 2,
          .channels = 16};
}
}  // namespace

TEST(Generate, LengthRangeAndSeed) {
  tk::model::gpt2_cpu m(tiny(), 3);
  const std::vector<std::int32_t> prompt{1, 2, 3};
  const auto a = tk::model::generate(m, prompt, 20, {.temperature = 1.0f, .seed = 9});
  const auto b = tk::model::generate(m, prompt, 20, {.temperature = 1.0f, .seed = 9});
  const auto c = tk::model::generate(m, prompt, 20, {.temperature = 1.0f, .seed = 10});
  ASSERT_EQ(a.size(), 20u);  // 3 + 20 > max_seq_len 8: the context slides
  for (auto t : a) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 50);
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Generate, GreedyFollowsTheModelsArgmax) {
  tk::model::gpt2_cpu m(tiny(), 5);
  const std::vector<std::int32_t> prompt{7};
  const auto out = tk::model::generate(m, prompt, 1, {.temperature = 0});
  const auto logits = m.forward_logits(prompt, 1, 1);
  int best = 0;
  for (int v = 1; v < 50; ++v)
    if (logits[std::size_t(v)] > logits[std::size_t(best)]) best = v;
  EXPECT_EQ(out.front(), best);
  EXPECT_THROW(tk::model::generate(m, std::span<const std::int32_t>{}, 1, {}), tk::config_error);
}
