// bench/gpu/bench_gpu_attention.cu — causal attention forward and backward, timed apart, at GPT-2
// shapes (d12: C = 768, H = 12, hs 64; d48: C = 1600, H = 25, hs 64) and at head size 128 (C =
// 2048, H = 16): trainkit's flash kernels, cuDNN's fused attention (when the build found
// cudnn-frontend: the trainkit_cudnn_engine object registers it) and the naive kernels (T×T
// matrices), TFLOP/s with causal FLOPs counted: forward 2·B·H·T²·hs (two products, half the
// matrix), backward 2.5× that. Each engine prints one machine-readable line,
//   attn-result engine=flash case=hs128 B=.. T=.. H=.. hs=.. fwd_ms=.. bwd_ms=.. fwd_tflops=..
//   bwd_tflops=..
// which bench/gpu_check.sh sets beside PyTorch's SDPA (bench/gpu/torch_attention.py prints the same
// lines, engine=sdpa-flash and sdpa-cudnn) in one table, and the goals of issue 36 beside the
// figures: trainkit's flash forward >= 300 TFLOP/s and backward >= 200 at head size 128 (H100/H200,
// bf16, causal, T = 1024). Exits 0 without a device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <random>
#include <string_view>
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

constexpr double flash_fwd_goal = 300, flash_bwd_goal = 200;  // TFLOP/s at head size 128

struct timing {
  double fwd_ms, bwd_ms;
};

void print_engine(const char* name, const char* engine, int B, int T, int H, int hs, timing t,
                  double fwd_flops) {
  const double fwd_tf = fwd_flops / (t.fwd_ms * 1e9), bwd_tf = 2.5 * fwd_flops / (t.bwd_ms * 1e9);
  std::printf(
      "attn-result engine=%s case=%s B=%d T=%d H=%d hs=%d fwd_ms=%.3f bwd_ms=%.3f "
      "fwd_tflops=%.1f bwd_tflops=%.1f\n",
      engine, name, B, T, H, hs, t.fwd_ms, t.bwd_ms, fwd_tf, bwd_tf);
  if (std::string_view(engine) == "flash" && hs == 128)
    std::printf(
        "  %s flash hs 128: forward %.1f TFLOP/s (goal >= %.0f: %s), backward %.1f TFLOP/s "
        "(goal >= %.0f: %s)\n",
        name, fwd_tf, flash_fwd_goal, fwd_tf >= flash_fwd_goal ? "met" : "NOT met", bwd_tf,
        flash_bwd_goal, bwd_tf >= flash_bwd_goal ? "met" : "NOT met");
}

void run_case(const char* name, int B, int T, int C, int H) {
  const std::size_t n = std::size_t(B) * T * C, rows = std::size_t(B) * H * T;
  const std::size_t att = k::attention_matrix_elements(B, H, T);
  const int hs = C / H;
  auto qkv = random_device(3 * n, 1), dout = random_device(n, 2);
  device_buffer<k::bf16_t> out(n), dqkv(3 * n);
  const double fwd_flops = 2.0 * double(B) * H * double(T) * T * hs;

  device_buffer<float> lse(rows), delta(rows), dq(n);
  timing flash{};
  flash.fwd_ms = time_ms(
      [&] { k::flash_attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, H, H, 0); });
  flash.bwd_ms = time_ms([&] {  // on the forward's out and lse, left by the last forward
    k::flash_attention_backward(dqkv.data(), delta.data(), dq.data(), dout.data(), qkv.data(),
                                out.data(), lse.data(), B, T, C, H, H, 0);
  });
  print_engine(name, "flash", B, T, H, hs, flash, fwd_flops);

  if (const k::attention_engine_factory make = k::cudnn_attention_factory()) {
    const auto cudnn = make(/*deterministic=*/true);  // what gpt_fineweb runs by default
    timing t{};
    t.fwd_ms =
        time_ms([&] { cudnn->forward(out.data(), lse.data(), qkv.data(), B, T, C, H, H, 0); });
    t.bwd_ms = time_ms([&] {
      cudnn->backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, C, H, H,
                      0);
    });
    print_engine(name, "cudnn", B, T, H, hs, t, fwd_flops);
  } else {
    std::printf("  %s cudnn: not built (pip install nvidia-cudnn-frontend where --build runs)\n",
                name);
  }

  k::matmul_context mm;
  device_buffer<k::bf16_t> qkvr(3 * n), p(att), dscores(att), heads(n), dqkvr(3 * n);
  device_buffer<float> scores(att);
  const k::attention_buffers buf{qkvr.data(),    p.data(),     scores.data(),
                                 dscores.data(), heads.data(), dqkvr.data()};
  timing naive{};
  naive.fwd_ms =
      time_ms([&] { k::attention_forward(mm, out.data(), qkv.data(), buf, B, T, C, H, 0); });
  naive.bwd_ms =
      time_ms([&] { k::attention_backward(mm, dqkv.data(), dout.data(), buf, B, T, C, H, 0); });
  print_engine(name, "naive", B, T, H, hs, naive, fwd_flops);
}

}  // namespace

int main() {
  if (!trainkit::cuda::device_present()) {
    std::printf("bench_gpu_attention: no CUDA device present; nothing measured\n");
    return 0;
  }
  try {
    // The same shapes as bench/gpu/torch_attention.py's.
    run_case("d12", 16, 1024, 768, 12);
    run_case("d48", 4, 1024, 1600, 25);
    run_case("hs128", 8, 1024, 2048, 16);
  } catch (const std::exception& e) {
    std::printf("bench_gpu_attention: failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
