// GPU tests of the Llama family's CUDA kernels (model/llama/cuda_kernels.cuh) against their CPU
// twins (detail/llama_cuda_twins.hpp, themselves held to llama_cpu's fp32 kernels by
// tests/model/test_llama_cuda_twins.cpp), on random bf16-representable inputs, outputs poisoned
// (NaN) first, at the d12 shape (B·T = 2·1024 rows, C = 768, H = 12, KV = 6, hs = 64, F = 2048)
// and ragged ones (37 rows: a partial backward chunk; C = 264: a partial 256-channel pass;
// hs = 16: one 8-pair group per half), and RMSNorm and QK-norm on rows with mean(x²) below ε,
// where putting ε outside the root would show. The twins round where the kernels round, so what
// differs is the order of fp32 sums (a warp's butterfly against a loop), rsqrtf, expf's last ulp
// and FMA contraction: at most an ulp on a few elements. Tolerance: ‖gpu − twin‖/‖twin‖ < 2e-3,
// five times below the 1e-2 the twins meet against fp32 and far below an indexing slip (~1); the
// residual written by the forward must equal the twin's bit for bit (one rounding of a + b), v's
// slots must come back untouched from RoPE, and RMSNorm backward must repeat bit for bit.
// Every test skips without a CUDA device.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "gpu_test_support.cuh"
#include "trainkit/model/detail/llama_cuda_twins.hpp"
#include "trainkit/model/llama/cuda_kernels.cuh"
#include "trainkit/model/llama/cuda_memory.hpp"

namespace {

namespace k = trainkit::model::kernels;
namespace d = trainkit::model::detail;
using namespace trainkit::test_gpu;

constexpr double tol_twin = 2e-3;
constexpr float eps = 1e-5f;

struct rows_cols {
  int N, C;
};

TEST(CudaLlamaKernels, RmsnormForwardWithResidual) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(11);
  struct rms_case {
    int N, C;
    float sd;
  };
  // The last case has mean(x²) ≈ 2e-6 < ε: there ε's place (inside the root or not) shows.
  for (const auto& [N, C, sd] :
       {rms_case{2048, 768, 1.0f}, rms_case{37, 264, 1.0f}, rms_case{16, 768, 1e-3f}})
    for (const bool gain : {true, false}) {
      const fvec a = random_bf16(std::size_t(N) * C, rng, sd), b = random_bf16(a.size(), rng, sd),
                 w = random_bf16(std::size_t(C), rng, 0.5f);
      fvec want_res(a.size()), want(a.size()), want_rstd(static_cast<std::size_t>(N));
      d::rmsnorm_forward_twin(want_res.data(), want.data(), want_rstd.data(), a.data(), b.data(),
                              gain ? w.data() : nullptr, N, C, eps);
      auto da = to_device(a), db = to_device(b), dw = to_device(w);
      auto res = poisoned(a.size()), out = poisoned(a.size());
      auto rstd = poisoned_f32(static_cast<std::size_t>(N));
      k::rmsnorm_forward(dev(res), dev(out), rstd.data(), dev(da), dev(db),
                         gain ? dev(dw) : nullptr, N, C, eps, nullptr);
      EXPECT_EQ(to_host(res), want_res) << N << "x" << C;
      EXPECT_LT(relative_error(to_host(out), want), tol_twin) << N << "x" << C << " gain " << gain;
      EXPECT_LT(relative_error(to_host_raw(rstd), want_rstd), 1e-5) << N << "x" << C;

      auto out2 = poisoned(a.size());  // no residual: the final norm, on the stored stream
      k::rmsnorm_forward(nullptr, dev(out2), nullptr, dev(res), nullptr, gain ? dev(dw) : nullptr,
                         N, C, eps, nullptr);
      EXPECT_LT(relative_error(to_host(out2), want), tol_twin) << N << "x" << C;
    }
}

TEST(CudaLlamaKernels, RmsnormBackwardDeterministic) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(12);
  for (const auto& [N, C] : {rows_cols{2048, 768}, rows_cols{37, 264}})
    for (const bool gain : {true, false}) {
      const fvec x = random_bf16(std::size_t(N) * C, rng), w = random_bf16(std::size_t(C), rng),
                 dout = random_bf16(x.size(), rng), dinp0 = random_bf16(x.size(), rng),
                 dw0 = random_bf16(std::size_t(C), rng, 0.1f);
      fvec scratch(x.size()), rstd(static_cast<std::size_t>(N));
      const float* wp = gain ? w.data() : nullptr;
      d::rmsnorm_forward_twin(nullptr, scratch.data(), rstd.data(), x.data(), nullptr, wp, N, C,
                              eps);
      fvec want_d = dinp0, want_w = dw0;
      d::rmsnorm_backward_twin(want_d.data(), gain ? want_w.data() : nullptr, dout.data(), x.data(),
                               wp, rstd.data(), N, C);
      auto dx = to_device(x), ddout = to_device(dout), dwt = to_device(w);
      auto drstd = to_device_raw(rstd);
      auto partial = poisoned_f32(k::rmsnorm_partial_floats(std::size_t(N), C));
      fvec first_d, first_w;
      for (int run = 0; run < 2; ++run) {
        auto dinp = to_device(dinp0), dw = to_device(dw0);
        k::rmsnorm_backward(dev(dinp), gain ? dev(dw) : nullptr, gain ? partial.data() : nullptr,
                            dev(ddout), dev(dx), gain ? dev(dwt) : nullptr, drstd.data(), N, C,
                            nullptr);
        const fvec got_d = to_host(dinp), got_w = to_host(dw);
        if (run == 0) {
          // increments, so the residual gradient already in dinp cannot hide an error
          fvec inc_got(x.size()), inc_want(x.size());
          for (std::size_t i = 0; i < x.size(); ++i) {
            inc_got[i] = got_d[i] - dinp0[i];
            inc_want[i] = want_d[i] - dinp0[i];
          }
          EXPECT_LT(relative_error(inc_got, inc_want), 4 * tol_twin) << N << "x" << C;
          EXPECT_LT(relative_error(got_w, want_w), tol_twin) << N << "x" << C;
          if (gain) {  // the dw reduce adds the partials in its twin's order: bit for bit
            const fvec parts = to_host_raw(partial);
            const std::size_t width = std::size_t(C);
            fvec sums(width), reduced(width);
            d::rmsnorm_dw_reduce_twin(sums.data(), parts.data(), int(parts.size() / width), C);
            for (std::size_t c = 0; c < reduced.size(); ++c)
              reduced[c] = d::round_to_bf16(dw0[c] + sums[c]);
            EXPECT_EQ(got_w, reduced) << "dw vs rmsnorm_dw_reduce_twin, " << N << "x" << C;
          }
          first_d = got_d;
          first_w = got_w;
        } else {
          EXPECT_EQ(got_d, first_d) << "dinp must repeat bit for bit";
          EXPECT_EQ(got_w, first_w) << "dw must repeat bit for bit";
        }
      }
    }
}

// No device needed: the arena's scratch for the RMSNorm backward (llama/cuda_memory.hpp, host-only)
// is what the kernel needs (rmsnorm.cuh), whatever the rows and width.
TEST(CudaLlamaKernels, ArenaRmsnormScratchIsWhatTheKernelNeeds) {
  for (const std::size_t N :
       {std::size_t(1), std::size_t(31), std::size_t(32), std::size_t(33), std::size_t(32768)})
    for (const int C : {8, 264, 768, 2048})
      EXPECT_EQ(trainkit::model::llama_rmsnorm_partial_floats(N, C),
                k::rmsnorm_partial_floats(N, C))
          << N << " rows x " << C;
}

struct qkv_shape {
  int B, T, H, KV, hs;
};
constexpr qkv_shape qkv_shapes[] = {{2, 1024, 12, 6, 64}, {3, 37, 4, 1, 16}};

TEST(CudaLlamaKernels, RopeForwardBackwardOnFusedQkv) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(13);
  for (const auto& [B, T, H, KV, hs] : qkv_shapes) {
    const int N = B * T;
    const std::int64_t D = std::int64_t(H + 2 * KV) * hs;
    const d::rope_table table(T + 5, hs, 10000.0f);  // more positions than used
    auto cos = to_device_raw(table.cos), sin = to_device_raw(table.sin);
    const k::rope_device_table dtab{cos.data(), sin.data(), table.T, table.half};
    for (const bool inverse : {false, true}) {
      const fvec qkv = random_bf16(std::size_t(N) * std::size_t(D), rng);
      fvec want = qkv;
      d::rope_twin(want.data(), table, N, T, H + KV, hs, D, inverse);
      auto dq = to_device(qkv);
      if (inverse)
        k::rope_backward(dev(dq), dtab, N, T, H, KV, hs, nullptr);
      else
        k::rope_forward(dev(dq), dtab, N, T, H, KV, hs, nullptr);
      const fvec got = to_host(dq);
      EXPECT_LT(relative_error(got, want), tol_twin) << B << "x" << T << " inv " << inverse;
      std::size_t moved = 0;  // v untouched
      for (int r = 0; r < N; ++r)
        for (std::int64_t i = std::int64_t(H + KV) * hs; i < D; ++i)
          moved += got[std::size_t(r * D + i)] != qkv[std::size_t(r * D + i)];
      EXPECT_EQ(moved, 0u);
    }
  }
}

TEST(CudaLlamaKernels, QkNormForwardBackward) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(14);
  for (const auto& [B, T, H, KV, hs] : qkv_shapes) {
    const int N = B * T, heads = H + KV;
    const std::int64_t D = std::int64_t(H + 2 * KV) * hs;
    const float sd = hs == 16 ? 1e-3f : 1.0f;  // the ragged shape also has mean(x²) < ε
    const fvec qkv = random_bf16(std::size_t(N) * std::size_t(D), rng, sd),
               dy = random_bf16(qkv.size(), rng);
    fvec want = qkv, want_rstd(std::size_t(N) * std::size_t(heads));
    d::head_rmsnorm_forward_twin(want.data(), want_rstd.data(), N, heads, hs, D, eps);
    auto dq = to_device(qkv);
    auto rstd = poisoned_f32(want_rstd.size());
    k::head_rmsnorm_forward(dev(dq), rstd.data(), N, heads, hs, D, eps, nullptr);
    const fvec y = to_host(dq);
    EXPECT_LT(relative_error(y, want), tol_twin) << B << "x" << T;
    EXPECT_LT(relative_error(to_host_raw(rstd), want_rstd), 1e-5) << B << "x" << T;

    fvec want_d = dy;  // backward from the kernel's own y, so both sides read the same values
    d::head_rmsnorm_backward_twin(want_d.data(), y.data(), want_rstd.data(), N, heads, hs, D);
    auto ddy = to_device(dy);
    k::head_rmsnorm_backward(dev(ddy), dev(dq), rstd.data(), N, heads, hs, D, nullptr);
    EXPECT_LT(relative_error(to_host(ddy), want_d), tol_twin) << B << "x" << T;
  }
}

TEST(CudaLlamaKernels, SwigluForwardBackward) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(15);
  for (const auto& [N, F] : {rows_cols{2048, 2048}, rows_cols{37, 72}}) {
    const fvec fc = random_bf16(std::size_t(N) * 2 * F, rng, 2.0f),
               dout = random_bf16(std::size_t(N) * F, rng);
    fvec want(std::size_t(N) * F), want_d(fc.size());
    d::swiglu_forward_twin(want.data(), fc.data(), N, F);
    d::swiglu_backward_twin(want_d.data(), fc.data(), dout.data(), N, F);
    auto dfc_in = to_device(fc), ddout = to_device(dout);
    auto out = poisoned(want.size()), dfc = poisoned(fc.size());
    k::swiglu_forward(dev(out), dev(dfc_in), N, F, nullptr);
    k::swiglu_backward(dev(dfc), dev(dfc_in), dev(ddout), N, F, nullptr);
    EXPECT_LT(relative_error(to_host(out), want), tol_twin) << N << "x" << F;
    EXPECT_LT(relative_error(to_host(dfc), want_d), tol_twin) << N << "x" << F;
  }
}

TEST(CudaLlamaKernels, ReluSquaredForwardBackwardInPlace) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(16);
  for (const std::int64_t n : {std::int64_t(2048) * 2048, std::int64_t(37) * 72}) {
    const fvec x = random_bf16(std::size_t(n), rng), dout = random_bf16(std::size_t(n), rng);
    fvec want(x.size()), want_d(x.size());
    d::relu_squared_forward_twin(want.data(), x.data(), n);
    d::relu_squared_backward_twin(want_d.data(), x.data(), dout.data(), n);
    auto dx = to_device(x), dd = to_device(dout);
    auto out = poisoned(x.size());
    k::relu_squared_forward(dev(out), dev(dx), n, nullptr);
    k::relu_squared_backward(dev(dd), dev(dx), dev(dd), n, nullptr);  // dinp aliases dout
    EXPECT_LT(relative_error(to_host(out), want), tol_twin) << n;
    EXPECT_LT(relative_error(to_host(dd), want_d), tol_twin) << n;
  }
}

}  // namespace
