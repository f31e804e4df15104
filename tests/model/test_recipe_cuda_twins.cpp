// The CPU twins of the recipe's CUDA kernels (detail/recipe_cuda_twins.hpp: value-embedding mix,
// U-net skip add, their backwards and the block partials of their scalar gradients) against the
// recipe's CPU kernels (model/recipe/value_embeddings.hpp, unet_skips.hpp, pinned to PyTorch by
// test_recipe_kernels' fixtures), in double: ‖twin − cpu‖/‖cpu‖ below 1e-2 (bf16 roundings where
// the kernels store bf16; measured ≤ 1.9e-3), the scalar gradients' fp32 partial sums to 1e-4
// relative and their stored bf16 values to 4e-3 (half a bf16 ulp). Shapes: Llama d12's value width
// (KV·hs = 384, N = 1000 rows, several blocks of partials) and a ragged one (C 24, N 37: a partial
// block). The per-token sum of `scaled` (what encoder_backward_buckets does on the device) gives
// the table gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "trainkit/core/bf16.hpp"
#include "trainkit/model/detail/recipe_cuda_twins.hpp"
#include "trainkit/model/recipe/unet_skips.hpp"
#include "trainkit/model/recipe/value_embeddings.hpp"

namespace d = trainkit::model::detail;
namespace rc = trainkit::model::recipe;

namespace {

std::vector<float> random_bf16(std::size_t n, unsigned seed, float spread = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, spread);
  std::vector<float> v(n);
  for (auto& x : v) x = d::recipe_round(dist(rng));
  return v;
}

double relative(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

struct case_t {
  int N, C, V, ld;  // ld: the value rows' stride inside fused rows (≥ C)
};

void check_value_mix(case_t k, unsigned seed) {
  const int N = k.N, C = k.C, V = k.V, ld = k.ld;
  const float l0 = 0.75f, l1 = d::recipe_round(0.3f);
  auto v = random_bf16(std::size_t(N) * ld, seed);
  const auto table = random_bf16(std::size_t(V) * C, seed + 1);
  const auto dout = random_bf16(std::size_t(N) * ld, seed + 2);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(N));
  std::mt19937 rng(seed + 3);
  for (auto& t : tokens) t = std::int32_t(rng() % unsigned(V / 2));  // repeats: the sums matter

  // The CPU kernels in double.
  const std::vector<double> vd(v.begin(), v.end()), td(table.begin(), table.end()),
      gd(dout.begin(), dout.end());
  std::vector<double> want_out(std::size_t(N) * ld, 0.0), want_dv(std::size_t(N) * ld, 0.0),
      want_dtable(std::size_t(V) * C, 0.0), want_dl(2, 0.0);
  rc::value_embed_forward(want_out.data(), ld, vd.data(), ld, td.data(), tokens.data(), N, C,
                          double(l0), double(l1));
  rc::value_embed_backward(want_dv.data(), ld, want_dtable.data(), want_dl.data(), gd.data(), ld,
                           vd.data(), ld, td.data(), tokens.data(), N, C, double(l0), double(l1));

  // The twins (what the kernels do), on the value columns of the rows.
  auto mixed = v;
  std::vector<float> saved(std::size_t(N) * C);
  d::value_mix_forward_twin(mixed.data(), ld, saved.data(), table.data(), tokens.data(), N, C, l0,
                            l1);
  auto dv = dout;
  std::vector<float> scaled(std::size_t(N) * C), partials(2 * d::recipe_blocks(std::size_t(N) * C)),
      dl(2, 0.0f);
  d::value_mix_backward_twin(dv.data(), ld, scaled.data(), partials.data(), saved.data(),
                             table.data(), tokens.data(), N, C, l0, l1);
  d::add_partials_twin(dl.data(), partials.data(), d::recipe_blocks(std::size_t(N) * C), 2);
  std::vector<float> dtable(std::size_t(V) * C, 0.0f);  // the bucket kernel: per-token sums
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      dtable[std::size_t(tokens[n]) * C + c] += scaled[std::size_t(n) * C + c];

  auto cols = [&](const auto& rows) {  // the value columns of (N, ld) rows
    std::vector<double> r;
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c) r.push_back(double(rows[std::size_t(n) * ld + c]));
    return r;
  };
  auto colsf = [&](const std::vector<float>& rows) {
    std::vector<float> r;
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c) r.push_back(rows[std::size_t(n) * ld + c]);
    return r;
  };
  const double e_out = relative(colsf(mixed), cols(want_out));
  const double e_dv = relative(colsf(dv), cols(want_dv));
  const double e_dt = relative(dtable, want_dtable);
  const double e_l0 = std::abs(dl[0] - want_dl[0]) / std::abs(want_dl[0]);
  const double e_l1 = std::abs(dl[1] - want_dl[1]) / std::abs(want_dl[1]);
  const std::size_t blocks = d::recipe_blocks(std::size_t(N) * C);
  double s0 = 0, s1 = 0;  // the partials before the bf16 store
  for (std::size_t b = 0; b < blocks; ++b) s0 += partials[b], s1 += partials[blocks + b];
  const double e_s0 = std::abs(s0 - want_dl[0]) / std::abs(want_dl[0]);
  const double e_s1 = std::abs(s1 - want_dl[1]) / std::abs(want_dl[1]);
  std::printf(
      "value mix N=%d C=%d: out %.2e dv %.2e dtable %.2e dlambda %.2e %.2e (partials "
      "%.2e %.2e)\n",
      N, C, e_out, e_dv, e_dt, e_l0, e_l1, e_s0, e_s1);
  EXPECT_LT(e_out, 1e-2);
  EXPECT_LT(e_dv, 1e-2);
  EXPECT_LT(e_dt, 1e-2);
  EXPECT_LT(e_s0, 1e-4);
  EXPECT_LT(e_s1, 1e-4);
  EXPECT_LT(e_l0, 4e-3);
  EXPECT_LT(e_l1, 4e-3);
  EXPECT_EQ(saved, colsf(v)) << "v_saved holds the unmixed values";
  // Columns outside the value part are untouched.
  for (int n = 0; n < N; ++n)
    for (int c = C; c < ld; ++c) {
      ASSERT_EQ(mixed[std::size_t(n) * ld + c], v[std::size_t(n) * ld + c]);
      ASSERT_EQ(dv[std::size_t(n) * ld + c], dout[std::size_t(n) * ld + c]);
    }
}

TEST(RecipeCudaTwins, ValueMixMatchesTheRecipeKernel) {
  check_value_mix({1000, 384, 512, 1536}, 11);  // d12: KV·hs = 384 of a 1536-wide QKV row
  check_value_mix({37, 24, 40, 24}, 12);        // ragged, dense rows, a partial block
}

void check_skip(std::size_t n, unsigned seed) {
  const float w = d::recipe_round(0.6f);
  const auto x = random_bf16(n, seed), skip = random_bf16(n, seed + 1),
             dx = random_bf16(n, seed + 2);
  const auto dskip0 = random_bf16(n, seed + 3);  // the skip's gradient so far (accumulated)
  std::vector<double> want_x(x.begin(), x.end()), want_ds(dskip0.begin(), dskip0.end());
  const std::vector<double> sd(skip.begin(), skip.end()), gd(dx.begin(), dx.end());
  double want_dw = 0.0;
  rc::unet_skip_forward(want_x.data(), sd.data(), std::ptrdiff_t(n), double(w));
  rc::unet_skip_backward(want_ds.data(), &want_dw, gd.data(), sd.data(), std::ptrdiff_t(n),
                         double(w));

  auto got_x = x, got_ds = dskip0;
  std::vector<float> partials(d::recipe_blocks(n)), dw(1, 0.0f);
  d::skip_add_forward_twin(got_x.data(), skip.data(), n, w);
  d::skip_add_backward_twin(got_ds.data(), partials.data(), dx.data(), skip.data(), n, w);
  d::add_partials_twin(dw.data(), partials.data(), d::recipe_blocks(n), 1);
  const double e_x = relative(got_x, want_x), e_ds = relative(got_ds, want_ds);
  const double e_w = std::abs(dw[0] - want_dw) / std::abs(want_dw);
  double sum = 0;
  for (float p : partials) sum += p;
  const double e_p = std::abs(sum - want_dw) / std::abs(want_dw);
  std::printf("skip n=%zu: x %.2e dskip %.2e dw %.2e (partials %.2e)\n", n, e_x, e_ds, e_w, e_p);
  EXPECT_LT(e_x, 1e-2);
  EXPECT_LT(e_ds, 1e-2);
  EXPECT_LT(e_p, 1e-4);
  EXPECT_LT(e_w, 4e-3);
}

TEST(RecipeCudaTwins, SkipAddMatchesTheRecipeKernel) {
  check_skip(std::size_t(1024) * 768, 21);  // B·T = 1024 rows of d12's C
  check_skip(37 * 24, 22);                  // a partial block
}

TEST(RecipeCudaTwins, PartialBlocksCoverEveryChunkOnce) {
  for (std::size_t n :
       {std::size_t(8), std::size_t(2048), std::size_t(2056), std::size_t(786432)}) {
    const std::size_t blocks = d::recipe_blocks(n);
    EXPECT_GE(blocks * d::recipe_block * d::recipe_pack, n);
    EXPECT_LT((blocks - 1) * d::recipe_block * d::recipe_pack, n);
  }
}

}  // namespace
