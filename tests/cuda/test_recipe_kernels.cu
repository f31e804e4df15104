// GPU tests of the recipe's point-wise kernels (model/cuda/recipe.cuh: value-embedding mix, U-net
// skip add, their backwards) against their CPU twins (detail/recipe_cuda_twins.hpp), which
// test_model_recipe_cuda_twins holds to the recipe's CPU kernels (pinned to PyTorch). Outputs
// poisoned first; stored values within 2e-3 relative of the twin (the same fp32 math and roundings:
// only FMA contraction differs), scalar gradients within 1e-4 relative (another order of the
// block's fp32 sum), the same bits run to run (no atomics). Compiled into test_cuda_llama_kernels
// (whose every test bench/gpu_check.sh runs, one process each). Never run: no device yet.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gpu_test_support.cuh"
#include "trainkit/model/cuda/recipe.cuh"
#include "trainkit/model/detail/recipe_cuda_twins.hpp"

namespace {

namespace k = trainkit::model::kernels;
namespace d = trainkit::model::detail;
using namespace trainkit::test_gpu;

constexpr double tol_twin = 2e-3;
constexpr double tol_scalar = 1e-4;

TEST(CudaRecipeKernels, ValueMixMatchesTwin) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(71);
  struct shape {
    int N, C, V, ld;
  };
  for (const auto& [N, C, V, ld] : {shape{2048, 384, 512, 1536}, shape{37, 24, 40, 24}}) {
    const fvec v = random_bf16(std::size_t(N) * ld, rng),
               table = random_bf16(std::size_t(V) * C, rng),
               dout = random_bf16(std::size_t(N) * ld, rng),
               lambda = {0.75f, d::recipe_round(0.3f)};
    const auto tokens = random_tokens(std::size_t(N), V, rng);
    // Twin.
    fvec want_v = v, want_saved(std::size_t(N) * C), want_dv = dout, want_scaled(want_saved.size());
    fvec partials(k::value_mix_partial_floats(N, C)), want_dl = {0.5f, -0.25f};
    d::value_mix_forward_twin(want_v.data(), ld, want_saved.data(), table.data(), tokens.data(), N,
                              C, lambda[0], lambda[1]);
    d::value_mix_backward_twin(want_dv.data(), ld, want_scaled.data(), partials.data(),
                               want_saved.data(), table.data(), tokens.data(), N, C, lambda[0],
                               lambda[1]);
    d::add_partials_twin(want_dl.data(), partials.data(), partials.size() / 2, 2);
    // Kernels.
    auto dv_ = to_device(v), dtab = to_device(table), dg = to_device(dout),
         dlam = to_device(lambda);
    auto dtok = to_device_raw(tokens);
    auto saved = poisoned(want_saved.size()), scaled = poisoned(want_scaled.size());
    auto dl = to_device(fvec{0.5f, -0.25f});
    auto part = poisoned_f32(partials.size());
    k::value_mix_forward(dev(dv_), ld, dev(saved), dev(dtab), dtok.data(), N, C, V, dev(dlam),
                         nullptr);
    EXPECT_LT(relative_error(to_host(dv_), want_v), tol_twin) << N << "x" << C;
    EXPECT_EQ(to_host(saved), want_saved) << "the unmixed values, as they were";
    k::value_mix_backward(dev(dg), ld, dev(scaled), dev(dl), part.data(), dev(saved), dev(dtab),
                          dtok.data(), N, C, V, dev(dlam), nullptr);
    EXPECT_LT(relative_error(to_host(dg), want_dv), tol_twin);
    EXPECT_LT(relative_error(to_host(scaled), want_scaled), tol_twin);
    const fvec got_dl = to_host(dl);
    for (int j = 0; j < 2; ++j)
      EXPECT_NEAR(got_dl[std::size_t(j)], want_dl[std::size_t(j)],
                  tol_scalar * std::abs(want_dl[std::size_t(j)]) + 1e-2f)
          << "dlambda" << j;  // + one bf16 ulp of the stored gradient
  }
}

TEST(CudaRecipeKernels, SkipAddMatchesTwinAndRepeatsBitForBit) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(72);
  for (const std::size_t n : {std::size_t(2048) * 768, std::size_t(37) * 24}) {
    const fvec x = random_bf16(n, rng), skip = random_bf16(n, rng), dx = random_bf16(n, rng),
               ds0 = random_bf16(n, rng), w = {d::recipe_round(0.6f)};
    fvec want_x = x, want_ds = ds0, partials(k::skip_add_partial_floats(n)), want_dw = {0.125f};
    d::skip_add_forward_twin(want_x.data(), skip.data(), n, w[0]);
    d::skip_add_backward_twin(want_ds.data(), partials.data(), dx.data(), skip.data(), n, w[0]);
    d::add_partials_twin(want_dw.data(), partials.data(), partials.size(), 1);
    auto dxx = to_device(x), dskip = to_device(skip), ddx = to_device(dx), dw_ = to_device(w);
    fvec first_ds, first_dw;
    for (int run = 0; run < 2; ++run) {
      auto ds = to_device(ds0), dw = to_device(fvec{0.125f});
      auto part = poisoned_f32(partials.size());
      k::skip_add_backward(dev(ds), dev(dw), part.data(), dev(ddx), dev(dskip), n, dev(dw_),
                           nullptr);
      const fvec got_ds = to_host(ds), got_dw = to_host(dw);
      EXPECT_LT(relative_error(got_ds, want_ds), tol_twin) << n;
      EXPECT_NEAR(got_dw[0], want_dw[0], tol_scalar * std::abs(want_dw[0]) + 1e-2f);
      if (run == 0)
        first_ds = got_ds, first_dw = got_dw;
      else
        EXPECT_EQ(got_dw, first_dw) << "no atomics: the same bits twice";
    }
    k::skip_add_forward(dev(dxx), dev(dskip), n, dev(dw_), nullptr);
    EXPECT_LT(relative_error(to_host(dxx), want_x), tol_twin) << n;
  }
}

TEST(CudaRecipeKernels, RejectsMisalignedShapes) {
  // No device: the checks run before any launch.
  EXPECT_THROW(
      k::value_mix_forward(nullptr, 12, nullptr, nullptr, nullptr, 4, 12, 10, nullptr, nullptr),
      trainkit::config_error);
  EXPECT_THROW(k::skip_add_forward(nullptr, nullptr, 12, nullptr, nullptr), trainkit::config_error);
}

}  // namespace
