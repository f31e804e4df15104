// bench/gpu/bench_gpu_attention.cu — causal attention forward + backward at GPT-2 shapes (d12:
// C = 768, H = 12, hs 64; d48: C = 1600, H = 25, hs 64): trainkit's flash kernels, cuDNN's fused
// attention (when the build found cudnn-frontend: the trainkit_cudnn_engine object registers it)
// and the naive kernels (T×T matrices), TFLOP/s with causal FLOPs counted: forward 2·B·H·T²·hs (two
// products, half the matrix), backward 2.5× that. Prints the goal beside the figure; exits 0
// without a device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <random>
#include <vector>

#include "trainkit/core/bf16.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/device.hpp"
#include "trainkit/model/cuda/attention.cuh"
#include "trainkit/model/cuda/attention_engine.hpp"
#include "trainkit/model/cuda/flash_attention.cuh"

namespace k = trainkit::model::kernels;
using trainkit::cuda::device_buffer;

namespace {

device_buffer<k::bf16_t> random_device(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<trainkit::bf16> h(n);
  for (auto& x : h) x = trainkit::bf16::from_float(d(rng));
  device_buffer<k::bf16_t> b(n);
  TRAINKIT_CUDA_CHECK(cudaMemcpy(b.data(), h.data(), n * 2, cudaMemcpyHostToDevice));
  return b;
}

// Median of `reps` timed runs after 3 warm-ups, in milliseconds.
double time_ms(const std::function<void()>& f, int reps = 10) {
  cudaEvent_t a, b;
  TRAINKIT_CUDA_CHECK(cudaEventCreate(&a));
  TRAINKIT_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    TRAINKIT_CUDA_CHECK(cudaEventRecord(a));
    f();
    TRAINKIT_CUDA_CHECK(cudaEventRecord(b));
    TRAINKIT_CUDA_CHECK(cudaEventSynchronize(b));
    float m = 0;
    TRAINKIT_CUDA_CHECK(cudaEventElapsedTime(&m, a, b));
    ms.push_back(m);
  }
  TRAINKIT_CUDA_CHECK(cudaEventDestroy(a));
  TRAINKIT_CUDA_CHECK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void run_case(const char* name, int B, int T, int C, int H) {
  const std::size_t n = std::size_t(B) * T * C, rows = std::size_t(B) * H * T;
  const std::size_t att = k::attention_matrix_elements(B, H, T);
  auto qkv = random_device(3 * n, 1), dout = random_device(n, 2);
  device_buffer<k::bf16_t> out(n), dqkv(3 * n);
  const double flops = 3.5 * 2.0 * double(B) * H * double(T) * T * (C / H);

  device_buffer<float> lse(rows), delta(rows), dq(n);
  const double flash = time_ms([&] {
    k::flash_attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, H, H, 0);
    k::flash_attention_backward(dqkv.data(), delta.data(), dq.data(), dout.data(), qkv.data(),
                                out.data(), lse.data(), B, T, C, H, H, 0);
  });
  const double flash_tf = flops / (flash * 1e9);
  std::printf("%-5s B=%-2d T=%d flash  %8.2f ms  %6.1f TFLOP/s  goal >= 150  %s\n", name, B, T,
              flash, flash_tf, flash_tf >= 150 ? "met" : "NOT met");

  if (const k::attention_engine_factory make = k::cudnn_attention_factory()) {
    const auto cudnn = make(/*deterministic=*/true);  // what gpt_fineweb runs by default
    const double ms = time_ms([&] {
      cudnn->forward(out.data(), lse.data(), qkv.data(), B, T, C, H, H, 0);
      cudnn->backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, C, H, H,
                      0);
    });
    const double tf = flops / (ms * 1e9);
    std::printf("%-5s B=%-2d T=%d cudnn  %8.2f ms  %6.1f TFLOP/s  goal >= 250  %s\n", name, B, T,
                ms, tf, tf >= 250 ? "met" : "NOT met");
  } else {
    std::printf("%-5s B=%-2d T=%d cudnn  not built (pip install nvidia-cudnn-frontend)\n", name, B,
                T);
  }

  k::matmul_context mm;
  device_buffer<k::bf16_t> qkvr(3 * n), p(att), dscores(att), heads(n), dqkvr(3 * n);
  device_buffer<float> scores(att);
  const k::attention_buffers buf{qkvr.data(),    p.data(),     scores.data(),
                                 dscores.data(), heads.data(), dqkvr.data()};
  const double naive = time_ms([&] {
    k::attention_forward(mm, out.data(), qkv.data(), buf, B, T, C, H, 0);
    k::attention_backward(mm, dqkv.data(), dout.data(), buf, B, T, C, H, 0);
  });
  std::printf("%-5s B=%-2d T=%d naive  %8.2f ms  %6.1f TFLOP/s  (cross-check; flash %.2fx)\n", name,
              B, T, naive, flops / (naive * 1e9), naive / flash);
}

}  // namespace

int main() {
  if (!trainkit::cuda::device_present()) {
    std::printf("bench_gpu_attention: no CUDA device present; nothing measured\n");
    return 0;
  }
  try {
    run_case("d12", 16, 1024, 768, 12);
    run_case("d48", 4, 1024, 1600, 25);
  } catch (const std::exception& e) {
    std::printf("bench_gpu_attention: failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
