// Tests for the CPU twin of the flash-attention kernels
// (model/detail/flash_attention_reference.hpp) against the naive attention the CPU GPT-2 uses
// (cpu/kernels.hpp): output, the saved log-sum-exp and all three gradients, in double
// (where only the summation order differs) and float, at T that are and are not multiples of the
// tile, head sizes 64 and 128. With grouped-query attention (KV < H) against llama_cpu's naive
// GQA attention (cpu/rmsnorm_rope_kernels.hpp, held to transformers' fixtures), and the twin's
// group order (flash_backward_visit) walked over whole grids.
// Slip planted while writing the GQA case (reverted): attention_heads::kv_head taking h % KV
// instead of h / (H / KV) fails every GQA shape with two or more KV heads (out off by ~1).
#include "trainkit/model/detail/flash_attention_reference.hpp"  // first: compiles on its own

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

#include "../cuda/gqa_expand.hpp"
#include "trainkit/model/cpu/kernels.hpp"
#include "trainkit/model/cpu/rmsnorm_rope_kernels.hpp"

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
  k::flash_attention_forward_reference(out.data(), lse.data(), qkv.data(), B, T, C, H, H);
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
                                        lse.data(), B, T, C, H, H);
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

struct gqa_case {
  int B, T, H, KV, hs;
};

// The twin with KV < H against llama_cpu's naive GQA attention: out, lse (from the definition,
// with query head h reading k head h / (H / KV)), dq, and dk, dv summed over each group.
template <class S>
void check_gqa_against_naive(gqa_case g, double tol, unsigned seed) {
  const auto [B, T, H, KV, hs] = g;
  const int C = H * hs, row = (H + 2 * KV) * hs;
  const std::size_t n = std::size_t(B) * T * C, nqkv = std::size_t(B) * T * row;
  auto qkv = random_values<S>(nqkv, seed);
  for (auto& x : qkv) x *= S(1.5);
  const auto dout = random_values<S>(n, seed + 1);
  const k::gqa_shape shape{B, T, H, KV, hs};
  std::vector<S> att(std::size_t(B) * H * T * T), scratch(att.size()), out_naive(n),
      dqkv_naive(nqkv);
  k::gqa_attention_forward(out_naive.data(), att.data(), qkv.data(), shape);
  k::gqa_attention_backward(dqkv_naive.data(), scratch.data(), dout.data(), qkv.data(), att.data(),
                            shape);

  const S poison = std::numeric_limits<S>::quiet_NaN();
  std::vector<S> out(n, poison), lse(std::size_t(B) * H * T, poison), dqkv(nqkv, poison);
  k::flash_attention_forward_reference(out.data(), lse.data(), qkv.data(), B, T, C, H, KV);
  EXPECT_LT(max_abs_diff(out, out_naive), tol) << "forward, T=" << T << " H=" << H << " KV=" << KV;
  const double scale = 1.0 / std::sqrt(double(hs));
  std::vector<S> lse_direct(lse.size());
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) {
        const S* q = qkv.data() + (std::size_t(b) * T + t) * row + h * hs;
        const int kvh = h / (H / KV);
        double mx = -INFINITY, sum = 0;
        std::vector<double> x(std::size_t(t) + 1);
        for (int j = 0; j <= t; ++j) {
          const S* kk = qkv.data() + (std::size_t(b) * T + j) * row + (H + kvh) * hs;
          double dot = 0;
          for (int d = 0; d < hs; ++d) dot += double(q[d]) * kk[d];
          x[std::size_t(j)] = dot * scale;
          mx = std::max(mx, x[std::size_t(j)]);
        }
        for (double xj : x) sum += std::exp(xj - mx);
        lse_direct[(std::size_t(b) * H + h) * T + t] = S(mx + std::log(sum));
      }
  EXPECT_LT(max_abs_diff(lse, lse_direct), tol) << "lse, T=" << T << " H=" << H << " KV=" << KV;

  k::flash_attention_backward_reference(dqkv.data(), dout.data(), qkv.data(), out.data(),
                                        lse.data(), B, T, C, H, KV);
  const int width[3] = {H * hs, KV * hs, KV * hs}, first[3] = {0, H * hs, (H + KV) * hs};
  for (int part = 0; part < 3; ++part) {
    std::vector<S> a, e;
    for (std::size_t r = 0; r < std::size_t(B) * T; ++r)
      for (int c = 0; c < width[part]; ++c) {
        a.push_back(dqkv[r * row + first[part] + c]);
        e.push_back(dqkv_naive[r * row + first[part] + c]);
      }
    EXPECT_LT(max_abs_diff(a, e), tol) << "d"
                                       << "qkv"[part] << ", T=" << T << " H=" << H << " KV=" << KV;
  }
}

// Groups of 2, 3 and 4 (one KV head: multi-query); T on, off and under the tile; hs 64 and 128;
// and KV = H, where the twin must still be GPT-2's.
const gqa_case gqa_cases[] = {{2, 67, 4, 2, 64}, {1, 129, 6, 2, 64}, {1, 128, 4, 1, 128},
                              {2, 17, 4, 1, 64}, {1, 130, 6, 3, 64}, {1, 70, 2, 2, 64}};

TEST(FlashAttentionReference, GroupedQueryMatchesNaiveGqaInDouble) {
  unsigned seed = 71;
  for (const gqa_case& g : gqa_cases) check_gqa_against_naive<double>(g, 1e-10, seed += 3);
}

TEST(FlashAttentionReference, GroupedQueryMatchesNaiveGqaInFloat) {
  unsigned seed = 91;
  for (const gqa_case& g : gqa_cases) check_gqa_against_naive<float>(g, 2e-4, seed += 3);
}

// The GPU attention tests check GQA through MHA on repeated k, v heads (tests/cuda/gqa_expand.hpp):
// that route must be llama_cpu's naive GQA attention, gradients included.
TEST(FlashAttentionReference, RepeatedKvHeadsThroughMhaAreGqa) {
  namespace tg = trainkit::test_gpu;
  for (const gqa_case& g : gqa_cases) {
    const auto [B, T, H, KV, hs] = g;
    const int C = H * hs, row = (H + 2 * KV) * hs;
    const auto qkv = random_values<float>(std::size_t(B) * T * row, 5);
    const auto dout = random_values<float>(std::size_t(B) * T * C, 6);
    std::vector<float> att(std::size_t(B) * H * T * T), scratch(att.size());
    std::vector<float> out_gqa(std::size_t(B) * T * C), dqkv_gqa(qkv.size());
    const k::gqa_shape shape{B, T, H, KV, hs};
    k::gqa_attention_forward(out_gqa.data(), att.data(), qkv.data(), shape);
    k::gqa_attention_backward(dqkv_gqa.data(), scratch.data(), dout.data(), qkv.data(), att.data(),
                              shape);
    const auto mha = tg::expand_gqa(qkv, B * T, H, KV, hs);
    std::vector<float> out_mha(out_gqa.size()), dmha(mha.size());
    k::attention_forward(out_mha.data(), att.data(), mha.data(), B, T, C, H);
    k::attention_backward(dmha.data(), scratch.data(), dout.data(), mha.data(), att.data(), B, T, C,
                          H);
    EXPECT_LT(max_abs_diff(out_mha, out_gqa), 1e-5) << "T=" << T << " H=" << H << " KV=" << KV;
    EXPECT_LT(max_abs_diff(tg::fold_gqa_gradient(dmha, B * T, H, KV, hs), dqkv_gqa), 1e-4)
        << "T=" << T << " H=" << H << " KV=" << KV;
    for (int part = 0; part < 3; ++part)  // the part views agree on widths and offsets
      EXPECT_EQ(tg::part_of_gqa(dqkv_gqa, B * T, H, KV, hs, part).size(),
                std::size_t(B) * T * (part == 0 ? H : KV) * hs);
  }
}

TEST(FlashAttentionReference, HeadMapPutsEachGroupOnItsOwnKvHead) {
  // Query heads h of one group read one k, v head; consecutive groups read consecutive heads;
  // columns of q | k | v tile the row without overlap.
  for (int KV : {1, 2, 3, 4})
    for (int group : {1, 2, 3, 4}) {
      const k::attention_heads heads{KV * group, KV, 64};
      std::vector<int> cover(std::size_t(heads.row()), 0), readers(std::size_t(KV), 0);
      for (int h = 0; h < heads.H; ++h) {
        ++readers[std::size_t(heads.kv_head(h))];
        EXPECT_EQ(heads.kv_head(h), h / group);
        EXPECT_EQ(heads.first_query_head(heads.kv_head(h)) + h % group, h);
        for (int d = 0; d < heads.hs; ++d) ++cover[std::size_t(heads.q_col(h) + d)];
      }
      for (int g = 0; g < KV; ++g) {
        EXPECT_EQ(readers[std::size_t(g)], group) << "KV=" << KV << " group=" << group;
        for (int d = 0; d < heads.hs; ++d) {
          ++cover[std::size_t(heads.k_col_of(g) + d)];
          ++cover[std::size_t(heads.v_col_of(g) + d)];
        }
      }
      EXPECT_EQ(std::count(cover.begin(), cover.end(), 1), heads.row());
    }
}

TEST(FlashAttentionReference, BackwardVisitCoversEveryHeadAndQueryTileOnce) {
  // A backward block (key tile kt, k, v head g) must visit each (query head of the group, query
  // tile ≥ first) exactly once, heads in order.
  for (int group : {1, 2, 4})
    for (int query_tiles : {1, 3, 16})
      for (int kt = 0; kt < query_tiles; ++kt) {
        const int first = k::flash_first_query_tile(kt), steps = group * (query_tiles - first);
        std::vector<int> seen(std::size_t(group) * query_tiles, 0);
        int last_member = 0;
        for (int i = 0; i < steps; ++i) {
          const auto [member, qt] = k::flash_backward_visit(i, first, query_tiles);
          ASSERT_TRUE(member >= 0 && member < group && qt >= first && qt < query_tiles);
          EXPECT_GE(member, last_member);
          last_member = member;
          ++seen[std::size_t(member) * query_tiles + qt];
        }
        EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), steps);
      }
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
