// Tests for the CPU twin of the flash-attention kernels
// (model/detail/flash_attention_reference.hpp) against the naive attention the CPU GPT-2 uses
// (detail/gpt2_cpu_kernels.hpp): output, the saved log-sum-exp and all three gradients, in double
// (where only the summation order differs) and float, at T that are and are not multiples of the
// tile, head sizes 64 and 128.
#include "trainkit/model/detail/flash_attention_reference.hpp"  // first: compiles on its own

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

#include "trainkit/model/detail/gpt2_cpu_kernels.hpp"

namespace k = trainkit::model::detail;

namespace {

template <class S>
std::vector<S> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<S> v(n);
  for (auto& x : v) x = S(d(rng));
  return v;
}

template <class S>
double max_abs_diff(const std::vector<S>& a, const std::vector<S>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(double(a[i]))) return INFINITY;
    m = std::max(m, std::abs(double(a[i]) - double(b[i])));
  }
  return m;
}

struct shape {
  int B, T, C, H;
};

template <class S>
void check_against_naive(shape s, double tol, unsigned seed) {
  const auto [B, T, C, H] = s;
  const std::size_t n = std::size_t(B) * T * C;
  // Scores of spread 2-3 make the softmax peaked enough that the running maximum changes
  // between tiles, which is what the online rescaling is for.
  auto qkv = random_values<S>(3 * n, seed);
  for (auto& x : qkv) x *= S(1.5);
  const auto dout = random_values<S>(n, seed + 1);

  std::vector<S> att(std::size_t(B) * H * T * T), scratch(att.size()), out_naive(n),
      dqkv_naive(3 * n);
  k::attention_forward(out_naive.data(), att.data(), qkv.data(), B, T, C, H);
  k::attention_backward(dqkv_naive.data(), scratch.data(), dout.data(), qkv.data(), att.data(), B,
                        T, C, H);

  const S poison = std::numeric_limits<S>::quiet_NaN();
  std::vector<S> out(n, poison), lse(std::size_t(B) * H * T, poison), dqkv(3 * n, poison);
  k::flash_attention_forward_reference(out.data(), lse.data(), qkv.data(), B, T, C, H);
  EXPECT_LT(max_abs_diff(out, out_naive), tol) << "forward, T=" << T << " C=" << C << " H=" << H;

  // lse = log Σ_j≤t exp(q·k_j·scale), straight from the definition.
  const int hs = C / H;
  const double scale = 1.0 / std::sqrt(double(hs));
  std::vector<S> lse_direct(lse.size());
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) {
        const S* q = qkv.data() + (std::size_t(b) * T + t) * 3 * C + h * hs;
        std::vector<double> x(t + 1);
        double mx = -INFINITY;
        for (int j = 0; j <= t; ++j) {
          const S* kk = qkv.data() + (std::size_t(b) * T + j) * 3 * C + C + h * hs;
          double dot = 0;
          for (int d = 0; d < hs; ++d) dot += double(q[d]) * kk[d];
          x[j] = dot * scale;
          mx = std::max(mx, x[j]);
        }
        double sum = 0;
        for (double xj : x) sum += std::exp(xj - mx);
        lse_direct[(std::size_t(b) * H + h) * T + t] = S(mx + std::log(sum));
      }
  EXPECT_LT(max_abs_diff(lse, lse_direct), tol) << "lse, T=" << T;

  k::flash_attention_backward_reference(dqkv.data(), dout.data(), qkv.data(), out.data(),
                                        lse.data(), B, T, C, H);
  // dq, dk and dv separately, so a slip in one of them is named.
  for (int part = 0; part < 3; ++part) {
    std::vector<S> a, e;
    for (std::size_t r = 0; r < std::size_t(B) * T; ++r)
      for (int c = 0; c < C; ++c) {
        a.push_back(dqkv[r * 3 * C + part * C + c]);
        e.push_back(dqkv_naive[r * 3 * C + part * C + c]);
      }
    EXPECT_LT(max_abs_diff(a, e), tol) << "d"
                                       << "qkv"[part] << ", T=" << T << " C=" << C << " H=" << H;
  }
}

// T a multiple of the tile, T one short and one past it, T under one tile; hs 64 and 128.
const shape shapes[] = {{2, 128, 128, 2}, {1, 127, 128, 2}, {1, 129, 256, 2}, {2, 67, 128, 1},
                        {1, 200, 256, 4}, {1, 1, 64, 1},    {1, 37, 64, 1}};

TEST(FlashAttentionReference, MatchesNaiveAttentionInDouble) {
  unsigned seed = 11;
  for (const shape& s : shapes) check_against_naive<double>(s, 1e-10, seed += 3);
}

TEST(FlashAttentionReference, MatchesNaiveAttentionInFloat) {
  unsigned seed = 41;
  for (const shape& s : shapes) check_against_naive<float>(s, 2e-4, seed += 3);
}

TEST(FlashAttentionReference, TileSkipsCoverTheCausalTriangle) {
  // Query tile qt needs keys up to its last row; key tile kt is needed from its first key on.
  constexpr int Bq = k::flash_tiles::block_q, Bk = k::flash_tiles::block_k;
  for (int qt = 0; qt < 20; ++qt) {
    const int last_row = qt * Bq + Bq - 1;
    EXPECT_EQ(k::flash_last_key_tile(qt), last_row / Bk);
  }
  for (int kt = 0; kt < 20; ++kt) EXPECT_EQ(k::flash_first_query_tile(kt), kt * Bk / Bq);
}

}  // namespace
