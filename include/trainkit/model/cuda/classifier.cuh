// trainkit/model/cuda/classifier.cuh — fused softmax, cross-entropy and logit gradient.
//
// One block per row of the bf16 logits (B·T, Vp): a first pass keeps a running (max, sum of
// exponentials) per thread over the V real columns (the online softmax of Milakov & Gimelshein,
// 2018), merged across the block in a fixed order; the loss is log(sum) + max − logit[target].
// With backward, a second pass overwrites the row in place with
// dloss·(softmax − onehot(target)) and zeroes the padded columns [V, Vp) — so no fp32 probability
// matrix for the batch ever exists, and the LM-head backward GEMMs read the gradient where the
// logits were. A target outside [0, V) raises the device flag and yields loss 0 and a zero row.
// CPU reference: softmax_crossentropy in cpu/kernels.hpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "trainkit/core/cuda/bf16.cuh"
#include "trainkit/core/cuda/block_reduce.cuh"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/launch_checks.hpp"

namespace trainkit::model::kernels {

using namespace trainkit::cuda;  // bf16 packs, reductions, launch checks

// 512 threads: at Vp = 50304 each thread handles ~12 16-byte vectors per pass, enough loads in
// flight per thread without starving the grid of blocks. Not tuned on a GPU yet.
inline constexpr int classifier_threads = 512;

// The softmax runs in base 2 on y = x·log2(e): exp2f is the hardware's native exponential
// (expf is exp2f of a product split for accuracy), and ln Σ e^x = ln 2 · (m + log2 Σ 2^(y − m)).
inline constexpr float classifier_log2e = 1.4426950408889634f;
inline constexpr float classifier_ln2 = 0.6931471805599453f;

__device__ inline void online_update(float& m, float& s, float y) {
  if (y > m) {
    s = s * exp2f(m - y) + 1.0f;
    m = y;
  } else {
    s += exp2f(y - m);
  }
}

template <class = void>
__global__ void __launch_bounds__(classifier_threads)
    classifier_kernel(bf16_t* logits, float* losses, const std::int32_t* targets, int* bad_target,
                      int V, int Vp, float dloss, bool backward) {
  __shared__ float scratch[warp_size];
  const std::int64_t row = blockIdx.x;
  bf16_t* x = logits + row * Vp;
  const int target = targets[row];
  const bool valid = target >= 0 && target < V;
  const float target_logit = valid ? __bfloat162float(x[target]) : 0.0f;  // read before writes
  const int vectors = Vp / pack;
  float m = -INFINITY, s = 0.0f;
  for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
    const bf16x8 xv = load8(x + std::int64_t(v) * pack);
#pragma unroll
    for (int k = 0; k < pack; ++k)
      if (v * pack + k < V) online_update(m, s, __bfloat162float(xv.v[k]) * classifier_log2e);
  }
  const float block_m = block_max(m, scratch);  // of y = x·log2(e)
  const float scaled = m == -INFINITY ? 0.0f : s * exp2f(m - block_m);
  const float sum = block_sum(scaled, scratch);
  if (threadIdx.x == 0) {
    losses[row] = valid ? (log2f(sum) + block_m) * classifier_ln2 - target_logit : 0.0f;
    if (!valid) *bad_target = 1;
  }
  if (!backward) return;
  const float inv = 1.0f / sum;
  for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
    bf16x8 xv = load8(x + std::int64_t(v) * pack);
#pragma unroll
    for (int k = 0; k < pack; ++k) {
      const int j = v * pack + k;
      float d = 0.0f;
      if (valid && j < V)
        d = dloss * (exp2f(__bfloat162float(xv.v[k]) * classifier_log2e - block_m) * inv -
                     (j == target ? 1.0f : 0.0f));
      xv.v[k] = __float2bfloat16(d);
    }
    store8(x + std::int64_t(v) * pack, xv);
  }
}

/// Per-row losses (N) of logits (N, Vp); with backward, logits become dloss·(p − onehot).
inline void classifier(bf16_t* logits, float* losses, const std::int32_t* targets, int* bad_target,
                       int N, int V, int Vp, float dloss, bool backward, cudaStream_t s) {
  constexpr const char* who = "classifier";
  require(Vp % pack == 0 && V <= Vp && V > 0, who, "Vp must be a multiple of 8 and ≥ V");
  require(aligned_to(logits, 16), who, "logits must be 16-byte aligned");
  classifier_kernel<><<<unsigned(N), classifier_threads, 0, s>>>(
      logits, losses, targets, bad_target, V, Vp, dloss, backward);
  TRAINKIT_CUDA_CHECK_LAUNCH("classifier_kernel");
}

}  // namespace trainkit::model::kernels
