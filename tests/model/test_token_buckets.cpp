// tests/model/test_token_buckets.cpp — the host half of the CUDA GPT-2's deterministic embedding
// backward (model/detail/token_buckets.hpp) and the CPU twin of its kernel, on a Zipf-distributed
// batch like real text (a few tokens fill a large share of it), so the split of hot buckets over
// row groups is exercised. Runs without a GPU; tests/cuda/test_kernels.cu checks the kernel
// against the same twin bit for bit. Also the accuracy of the two wte backwards on such a batch:
// the bf16 atomics' twin (a rounding per add) against the buckets' (fp32 sums, one rounding).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "trainkit/model/detail/token_buckets.hpp"

namespace {

namespace k = trainkit::model::kernels;

// Token ids with P(rank r) ∝ 1 / (r + 1)^s, ranks shuffled over the vocabulary.
std::vector<std::int32_t> zipf_tokens(std::size_t n, int V, double s, std::mt19937_64& rng) {
  std::vector<double> w(static_cast<std::size_t>(V));
  for (int r = 0; r < V; ++r) w[std::size_t(r)] = 1.0 / std::pow(r + 1.0, s);
  std::discrete_distribution<int> rank(w.begin(), w.end());
  std::vector<std::int32_t> id(static_cast<std::size_t>(V));
  for (int v = 0; v < V; ++v) id[std::size_t(v)] = v;
  std::shuffle(id.begin(), id.end(), rng);
  std::vector<std::int32_t> t(n);
  for (auto& x : t) x = id[std::size_t(rank(rng))];
  return t;
}

TEST(TokenBuckets, GroupRowsByTokenInAscendingOrder) {
  const std::vector<std::int32_t> tokens{5, 3, 5, 9, 3, 5, 70};
  const auto b = k::make_token_buckets(tokens, 64);  // 70 is out of range: left out
  EXPECT_EQ(b.tokens, (std::vector<std::int32_t>{3, 5, 9}));
  EXPECT_EQ(b.offsets, (std::vector<std::int32_t>{0, 2, 5, 6}));
  EXPECT_EQ(b.rows, (std::vector<std::int32_t>{1, 4, 0, 2, 5, 3}));
  EXPECT_EQ(b.largest(), 3);
  EXPECT_EQ(b.packed(), (std::vector<std::int32_t>{3, 3, 5, 9, 0, 2, 5, 6, 1, 4, 0, 2, 5, 3}));
}

// Integer gradients keep every partial sum exact in fp32 and the result exact in bf16, so the
// twin must equal the plain per-token sum exactly: a row left out, counted twice or taken from
// another bucket shows as a difference, whichever row group it falls in.
TEST(TokenBuckets, TwinAddsEveryRowOfAZipfBatchExactlyOnce) {
  std::mt19937_64 rng(3);
  const int N = 4096, V = 50257, C = 16;
  const auto tokens = zipf_tokens(N, V, 1.1, rng);
  const auto b = k::make_token_buckets(tokens, V);
  // Real text's shape: the hottest token holds far more rows than there are row groups.
  ASSERT_GT(b.largest(), 50 * k::encoder_row_groups) << "not a Zipf-like batch";
  std::uniform_int_distribution<int> pm(-1, 1), small(-8, 8);
  std::vector<float> dout(std::size_t(N) * C), dwte(std::size_t(V) * C);
  for (auto& x : dout) x = float(pm(rng));
  for (auto& x : dwte) x = float(small(rng));
  std::vector<float> want = dwte;
  for (int row = 0; row < N; ++row)
    for (int c = 0; c < C; ++c)
      want[std::size_t(tokens[std::size_t(row)]) * C + std::size_t(c)] +=
          dout[std::size_t(row) * C + std::size_t(c)];
  for (const float x : want) ASSERT_LE(std::abs(x), 256.0f) << "past bf16's exact integers";
  k::encoder_backward_buckets_twin(dwte, dout, b, C);
  EXPECT_EQ(dwte, want);
}

// Real-valued gradients: the grouped order rounds differently from a row-by-row sum, but only
// within fp32 accumulation plus the one bf16 rounding per element.
TEST(TokenBuckets, TwinMatchesARowOrderSumOnRealValuedGradients) {
  std::mt19937_64 rng(4);
  const int N = 2048, V = 1000, C = 24;
  const auto tokens = zipf_tokens(N, V, 1.2, rng);
  const auto b = k::make_token_buckets(tokens, V);
  std::normal_distribution<float> n(0.0f, 1.0f);
  auto bf = [](double x) { return trainkit::bf16::from_float(float(x)).to_float(); };
  std::vector<float> dout(std::size_t(N) * C), dwte(std::size_t(V) * C);
  for (auto& x : dout) x = bf(n(rng));
  for (auto& x : dwte) x = bf(n(rng));
  std::vector<double> sum(dwte.begin(), dwte.end());
  for (int row = 0; row < N; ++row)
    for (int c = 0; c < C; ++c)
      sum[std::size_t(tokens[std::size_t(row)]) * C + std::size_t(c)] +=
          dout[std::size_t(row) * C + std::size_t(c)];
  k::encoder_backward_buckets_twin(dwte, dout, b, C);
  for (std::size_t i = 0; i < dwte.size(); ++i) {
    // One bf16 ulp (2^-7 relative) of slack: the exact sum may sit near a rounding boundary.
    ASSERT_NEAR(dwte[i], sum[i], std::abs(sum[i]) * 0x1p-7 + 1e-4) << "element " << i;
  }
}

// The reason the default path sums in buckets: on a micro-batch of real text's shape (16k tokens,
// the hottest seen ~2,000 times) the hot token's gradient summed with a bf16 rounding per add
// ends percents off the exact sum; the buckets' fp32 sums round once (2⁻⁹ relative).
TEST(TokenBuckets, AtomicAddsLoseTheHotTokensGradientTheBucketsKeepIt) {
  std::mt19937_64 rng(5);
  const int N = 16384, V = 50257, C = 8;
  const auto tokens = zipf_tokens(N, V, 1.1, rng);
  const auto b = k::make_token_buckets(tokens, V);
  ASSERT_GT(b.largest(), 1000) << "not a Zipf-like batch";
  std::size_t hot = 0;  // the bucket with the most rows
  for (std::size_t u = 0; u + 1 < b.offsets.size(); ++u)
    if (b.offsets[u + 1] - b.offsets[u] > b.offsets[hot + 1] - b.offsets[hot]) hot = u;
  // Signs at random: the running sum grows like √k, each add's rounding with it, and the errors
  // of n adds pile up to ~n·2⁻⁹/√12 against a sum of ~√n (the simulation: 3–6%).
  std::normal_distribution<float> n(0.0f, 1.0f);
  auto bf = [](double x) { return trainkit::bf16::from_float(float(x)).to_float(); };
  std::vector<float> dout(std::size_t(N) * C);
  for (auto& x : dout) x = bf(n(rng));
  std::vector<double> exact(std::size_t(V) * C, 0.0);
  for (int row = 0; row < N; ++row)
    for (int c = 0; c < C; ++c)
      exact[std::size_t(tokens[std::size_t(row)]) * C + std::size_t(c)] +=
          dout[std::size_t(row) * C + std::size_t(c)];
  std::vector<float> atomic(std::size_t(V) * C, 0.0f), buckets(std::size_t(V) * C, 0.0f);
  k::encoder_backward_atomic_twin(atomic, dout, tokens, V, C);
  k::encoder_backward_buckets_twin(buckets, dout, b, C);
  // Relative error of the hot token's row.
  auto hot_error = [&](const std::vector<float>& got) {
    double diff = 0, ref = 0;
    const std::size_t base = std::size_t(b.tokens[hot]) * C;
    for (std::size_t c = 0; c < std::size_t(C); ++c) {
      diff += std::pow(got[base + c] - exact[base + c], 2);
      ref += std::pow(exact[base + c], 2);
    }
    return std::sqrt(diff / ref);
  };
  const double atomic_err = hot_error(atomic), bucket_err = hot_error(buckets);
  std::printf("hot token: %d rows; relative error atomics %.4f, buckets %.5f\n",
              b.offsets[hot + 1] - b.offsets[hot], atomic_err, bucket_err);
  EXPECT_LT(bucket_err, 0x1p-8) << "the buckets round once";
  EXPECT_GT(atomic_err, 0.01) << "a bf16 rounding per add should lose percents here";
}

}  // namespace
