// GPU test for trainkit/optim/cuda/newton_schulz.cuh: the batched bf16 Newton–Schulz iteration on
// cuBLASLt against its host twin (optim/detail/newton_schulz_bf16.hpp, which rounds to bf16 at
// the same points), on random matrices, wide, square and tall (transposed on the device), the
// output poisoned with NaN before the run. Skips without a device (ctest label `gpu`). Never run
// on a GPU yet.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "../cuda/gpu_test_env.hpp"
#include "trainkit/core/bf16.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/linalg/gemm_cublaslt.cuh"
#include "trainkit/optim/cuda/newton_schulz.cuh"
#include "trainkit/optim/detail/newton_schulz_bf16.hpp"

namespace tk = trainkit;

namespace {

// ‖a − b‖ / ‖b‖; infinity when `a` holds a non-finite value.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

TEST(NewtonSchulzCuda, BatchedBf16MatchesTheHostTwin) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  cudaStream_t stream = nullptr;
  TRAINKIT_CUDA_CHECK(cudaStreamCreate(&stream));
  tk::linalg::matmul_context matmul;
  tk::optim::newton_schulz_cuda ns(matmul);
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  struct shape {
    int rows, cols, count;
  };
  for (const shape sh : {shape{48, 80, 3}, shape{64, 64, 2}, shape{96, 40, 4}}) {
    const std::size_t n = std::size_t(sh.rows) * sh.cols, total = n * std::size_t(sh.count);
    std::vector<tk::bf16> host(total);
    std::vector<float> as_float(total);
    for (std::size_t i = 0; i < total; ++i) {
      host[i] = tk::bf16::from_float(normal(rng));
      as_float[i] = host[i].to_float();
    }
    tk::cuda::device_buffer<__nv_bfloat16> g(total), out(total);
    TRAINKIT_CUDA_CHECK(
        cudaMemcpyAsync(g.data(), host.data(), total * 2, cudaMemcpyHostToDevice, stream));
    out.fill_bytes_async(0xff, stream);  // NaN: every element must be written
    ns.run(g.data(), out.data(), sh.rows, sh.cols, sh.count, 5, stream);
    std::vector<tk::bf16> result(total);
    TRAINKIT_CUDA_CHECK(
        cudaMemcpyAsync(result.data(), out.data(), total * 2, cudaMemcpyDeviceToHost, stream));
    TRAINKIT_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int m = 0; m < sh.count; ++m) {
      std::vector<float> twin(n), got(n);
      tk::optim::detail::newton_schulz_bf16_reference(as_float.data() + std::size_t(m) * n,
                                                      twin.data(), sh.rows, sh.cols, 5);
      for (std::size_t i = 0; i < n; ++i) got[i] = result[std::size_t(m) * n + i].to_float();
      // The same roundings, differently ordered fp32 sums: a few bf16 ulps after 5 steps.
      EXPECT_LT(relative_error(got, twin), 2e-2) << sh.rows << "x" << sh.cols << " matrix " << m;
    }
  }
  TRAINKIT_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(NewtonSchulzCuda, RefusesAnEmptyBatch) {
  EXPECT_THROW(tk::optim::newton_schulz_cuda::can_implement(0, 8, 1, 5), tk::config_error);
  EXPECT_THROW(tk::optim::newton_schulz_cuda::can_implement(8, 8, 1, 0), tk::config_error);
  EXPECT_NO_THROW(tk::optim::newton_schulz_cuda::can_implement(8, 8, 3, 5));
}
