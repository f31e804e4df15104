// trainkit/model/cuda/attention.cuh — causal multi-head self-attention, forward and backward.
//
// Correctness first, as llm.c's non-cuDNN path: permute qkv (B, T, 3, H, hs) into q, k, v
// (B, H, T, hs); scores S = q·kᵀ for all B·H heads with one strided-batched GEMM (fp32 output, so
// the softmax sees unrounded scores); a causal softmax per row (scale 1/√hs, zero above the
// diagonal); y = P·v (batched GEMM); unpermute to (B, T, C). Backward mirrors it: dP = dy·vᵀ,
// dv = Pᵀ·dy, dS = P ⊙ (dP − rowsum(P ⊙ dP))·scale, dq = dS·k, dk = dSᵀ·q. The full T×T score
// matrix is computed (half of it masked): twice the FLOPs a flash kernel does, and B·H·T·T of
// scratch, the price of simple kernels. Rows of the T×T matrices have a leading dimension padded
// to a multiple of 8 (`attention_ld`) so the GEMMs get 16-byte-aligned rows at any T.
// CPU reference: attention_forward / attention_backward in cpu/kernels.hpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "trainkit/core/cuda/bf16.cuh"
#include "trainkit/core/cuda/block_reduce.cuh"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/launch_checks.hpp"
#include "trainkit/core/linalg/gemm_cublaslt.cuh"

namespace trainkit::model::kernels {

using namespace trainkit::cuda;    // bf16 packs, reductions, launch checks
using namespace trainkit::linalg;  // matmul_context, matmul_arguments, epilogue

/// Leading dimension of the (T, T) score and probability matrices.
constexpr int attention_ld(int T) {
  return (T + 7) / 8 * 8;
}

/// Elements of one (B, H, T, attention_ld(T)) buffer.
constexpr std::size_t attention_matrix_elements(int B, int H, int T) {
  return std::size_t(B) * H * T * attention_ld(T);
}

// qkv (B, T, 3, H, hs) → q, k, v (B, H, T, hs) each, stored one after another in qkvr.
template <class = void>
__global__ void permute_qkv_kernel(bf16_t* qkvr, const bf16_t* qkv, int B, int T, int H, int hs) {
  const std::int64_t n = std::int64_t(B) * H * T * hs;
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int d = int(i % hs);
  const int t = int((i / hs) % T);
  const int h = int((i / (std::int64_t(hs) * T)) % H);
  const std::int64_t b = i / (std::int64_t(hs) * T * H);
  const std::int64_t C = std::int64_t(H) * hs;
  const std::int64_t src = (b * T + t) * 3 * C + std::int64_t(h) * hs + d;
  qkvr[i] = qkv[src];
  qkvr[n + i] = qkv[src + C];
  qkvr[2 * n + i] = qkv[src + 2 * C];
}

// The inverse: dq, dk, dv (B, H, T, hs) (consecutive in dqkvr) → dqkv (B, T, 3, H, hs).
template <class = void>
__global__ void unpermute_qkv_kernel(bf16_t* dqkv, const bf16_t* dqkvr, int B, int T, int H,
                                     int hs) {
  const std::int64_t n = std::int64_t(B) * H * T * hs;
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int d = int(i % hs);
  const int t = int((i / hs) % T);
  const int h = int((i / (std::int64_t(hs) * T)) % H);
  const std::int64_t b = i / (std::int64_t(hs) * T * H);
  const std::int64_t C = std::int64_t(H) * hs;
  const std::int64_t dst = (b * T + t) * 3 * C + std::int64_t(h) * hs + d;
  dqkv[dst] = dqkvr[i];
  dqkv[dst + C] = dqkvr[n + i];
  dqkv[dst + 2 * C] = dqkvr[2 * n + i];
}

// (B, H, T, hs) ↔ (B, T, H, hs): to_heads = false gathers heads into rows (forward output),
// true scatters rows into heads (the gradient of the output, in backward).
template <class = void>
__global__ void heads_transpose_kernel(bf16_t* out, const bf16_t* in, int B, int T, int H, int hs,
                                       bool to_heads) {
  const std::int64_t n = std::int64_t(B) * H * T * hs;
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // heads index
  if (i >= n) return;
  const int d = int(i % hs);
  const int t = int((i / hs) % T);
  const int h = int((i / (std::int64_t(hs) * T)) % H);
  const std::int64_t b = i / (std::int64_t(hs) * T * H);
  const std::int64_t rows = (b * T + t) * std::int64_t(H) * hs + std::int64_t(h) * hs + d;
  if (to_heads)
    out[i] = in[rows];
  else
    out[rows] = in[i];
}

// One warp per row (bh, t): att[j] = softmax_j≤t(scale·S[j]), 0 for j > t (and in the padding).
template <class = void>
__global__ void causal_softmax_kernel(bf16_t* att, const float* scores, int rows, int T, int ld,
                                      float scale) {
  const int lane = threadIdx.x % warp_size;
  const std::int64_t row =
      std::int64_t(blockIdx.x) * (blockDim.x / warp_size) + threadIdx.x / warp_size;
  if (row >= rows) return;
  const int t = int(row % T);
  const float* s = scores + row * ld;
  bf16_t* p = att + row * ld;
  float m = -INFINITY;
  for (int j = lane; j <= t; j += warp_size) m = fmaxf(m, s[j]);
  m = warp_max(m) * scale;
  float sum = 0.0f;
  for (int j = lane; j <= t; j += warp_size) sum += expf(s[j] * scale - m);
  const float inv = 1.0f / warp_sum(sum);
  for (int j = lane; j < ld; j += warp_size)
    p[j] = __float2bfloat16(j <= t ? expf(s[j] * scale - m) * inv : 0.0f);
}

// One warp per row: dS[j] = P[j]·(dP[j] − Σ_i P[i]·dP[i])·scale for j ≤ t, 0 above.
template <class = void>
__global__ void causal_softmax_backward_kernel(bf16_t* dscores, const float* dprobs,
                                               const bf16_t* att, int rows, int T, int ld,
                                               float scale) {
  const int lane = threadIdx.x % warp_size;
  const std::int64_t row =
      std::int64_t(blockIdx.x) * (blockDim.x / warp_size) + threadIdx.x / warp_size;
  if (row >= rows) return;
  const int t = int(row % T);
  const float* dp = dprobs + row * ld;
  const bf16_t* p = att + row * ld;
  bf16_t* ds = dscores + row * ld;
  float dot = 0.0f;
  for (int j = lane; j <= t; j += warp_size) dot += __bfloat162float(p[j]) * dp[j];
  dot = warp_sum(dot);
  for (int j = lane; j < ld; j += warp_size)
    ds[j] = __float2bfloat16(j <= t ? __bfloat162float(p[j]) * (dp[j] - dot) * scale : 0.0f);
}

/// Scratch and stored buffers of one attention layer (sizes in elements).
struct attention_buffers {
  bf16_t* qkvr = nullptr;     // (3, B, H, T, hs) stored for backward
  bf16_t* att = nullptr;      // (B, H, T, ld) probabilities, stored for backward
  float* scores = nullptr;    // (B, H, T, ld) fp32 scratch: S forward, dP backward
  bf16_t* dscores = nullptr;  // (B, H, T, ld) bf16 scratch: dS (backward only)
  bf16_t* heads = nullptr;    // (B, H, T, hs) scratch: y forward, dy backward
  bf16_t* dqkvr = nullptr;    // (3, B, H, T, hs) scratch (backward only)
};

inline void check_attention(int B, int T, int C, int H, const char* who) {
  require(B > 0 && T > 0 && H > 0 && C % H == 0, who, "impossible shape");
  require((C / H) % pack == 0, who, "head size must be a multiple of 8");
}

/// out (B, T, C) = causal attention of qkv (B, T, 3C); fills buf.qkvr and buf.att.
inline void attention_forward(matmul_context& mm, bf16_t* out, const bf16_t* qkv,
                              const attention_buffers& buf, int B, int T, int C, int H,
                              cudaStream_t s) {
  check_attention(B, T, C, H, "attention_forward");
  const int hs = C / H, ld = attention_ld(T), BH = B * H;
  const std::int64_t n = std::int64_t(B) * T * C;
  constexpr int threads = 256;
  permute_qkv_kernel<>
      <<<ceil_div(std::size_t(n), threads), threads, 0, s>>>(buf.qkvr, qkv, B, T, H, hs);
  TRAINKIT_CUDA_CHECK_LAUNCH("permute_qkv_kernel");
  const bf16_t* q = buf.qkvr;
  const bf16_t* k = buf.qkvr + n;
  const bf16_t* v = buf.qkvr + 2 * n;

  matmul_arguments sc;  // S (T, T) = q (T, hs) · kᵀ, per head
  sc.a = q;
  sc.b = k;
  sc.trans_b = true;
  sc.d = buf.scores;
  sc.d_is_f32 = true;
  sc.m = T, sc.n = T, sc.k = hs;
  sc.lda = hs, sc.ldb = hs, sc.ldd = ld;
  sc.batch = BH;
  sc.stride_a = std::int64_t(T) * hs, sc.stride_b = std::int64_t(T) * hs;
  sc.stride_d = std::int64_t(T) * ld;
  mm.run(sc, s);

  const float scale = 1.0f / std::sqrt(float(hs));
  const unsigned rows_per_block = threads / warp_size;
  causal_softmax_kernel<><<<ceil_div(std::size_t(BH) * T, rows_per_block), threads, 0, s>>>(
      buf.att, buf.scores, BH * T, T, ld, scale);
  TRAINKIT_CUDA_CHECK_LAUNCH("causal_softmax_kernel");

  matmul_arguments pv;  // y (T, hs) = P (T, T) · v (T, hs), per head
  pv.a = buf.att;
  pv.b = v;
  pv.d = buf.heads;
  pv.m = T, pv.n = hs, pv.k = T;
  pv.lda = ld, pv.ldb = hs, pv.ldd = hs;
  pv.batch = BH;
  pv.stride_a = std::int64_t(T) * ld, pv.stride_b = std::int64_t(T) * hs;
  pv.stride_d = std::int64_t(T) * hs;
  mm.run(pv, s);

  heads_transpose_kernel<>
      <<<ceil_div(std::size_t(n), threads), threads, 0, s>>>(out, buf.heads, B, T, H, hs, false);
  TRAINKIT_CUDA_CHECK_LAUNCH("heads_transpose_kernel");
}

/// dqkv (B, T, 3C) (assigned) from dout (B, T, C), using buf.qkvr and buf.att from the forward.
inline void attention_backward(matmul_context& mm, bf16_t* dqkv, const bf16_t* dout,
                               const attention_buffers& buf, int B, int T, int C, int H,
                               cudaStream_t s) {
  check_attention(B, T, C, H, "attention_backward");
  const int hs = C / H, ld = attention_ld(T), BH = B * H;
  const std::int64_t n = std::int64_t(B) * T * C;
  const std::int64_t head_stride = std::int64_t(T) * hs, mat_stride = std::int64_t(T) * ld;
  constexpr int threads = 256;
  heads_transpose_kernel<>
      <<<ceil_div(std::size_t(n), threads), threads, 0, s>>>(buf.heads, dout, B, T, H, hs, true);
  TRAINKIT_CUDA_CHECK_LAUNCH("heads_transpose_kernel");
  const bf16_t* q = buf.qkvr;
  const bf16_t* k = buf.qkvr + n;
  const bf16_t* v = buf.qkvr + 2 * n;
  bf16_t* dq = buf.dqkvr;
  bf16_t* dk = buf.dqkvr + n;
  bf16_t* dv = buf.dqkvr + 2 * n;
  const bf16_t* dy = buf.heads;

  auto batched = [&](const bf16_t* a, bool ta, std::int64_t lda, std::int64_t sa, const bf16_t* b,
                     bool tb, std::int64_t ldb, std::int64_t sb, void* d, bool f32,
                     std::int64_t ldd, std::int64_t sd, int m, int nn, int kk) {
    matmul_arguments x;
    x.a = a, x.trans_a = ta, x.lda = lda, x.stride_a = sa;
    x.b = b, x.trans_b = tb, x.ldb = ldb, x.stride_b = sb;
    x.d = d, x.d_is_f32 = f32, x.ldd = ldd, x.stride_d = sd;
    x.m = m, x.n = nn, x.k = kk, x.batch = BH;
    mm.run(x, s);
  };
  // dP (T, T) = dy (T, hs) · vᵀ
  batched(dy, false, hs, head_stride, v, true, hs, head_stride, buf.scores, true, ld, mat_stride, T,
          T, hs);
  // dv (T, hs) = Pᵀ · dy
  batched(buf.att, true, ld, mat_stride, dy, false, hs, head_stride, dv, false, hs, head_stride, T,
          hs, T);
  const float scale = 1.0f / std::sqrt(float(hs));
  const unsigned rows_per_block = threads / warp_size;
  causal_softmax_backward_kernel<>
      <<<ceil_div(std::size_t(BH) * T, rows_per_block), threads, 0, s>>>(
          buf.dscores, buf.scores, buf.att, BH * T, T, ld, scale);
  TRAINKIT_CUDA_CHECK_LAUNCH("causal_softmax_backward_kernel");
  // dq (T, hs) = dS · k;  dk (T, hs) = dSᵀ · q
  batched(buf.dscores, false, ld, mat_stride, k, false, hs, head_stride, dq, false, hs, head_stride,
          T, hs, T);
  batched(buf.dscores, true, ld, mat_stride, q, false, hs, head_stride, dk, false, hs, head_stride,
          T, hs, T);
  unpermute_qkv_kernel<>
      <<<ceil_div(std::size_t(n), threads), threads, 0, s>>>(dqkv, buf.dqkvr, B, T, H, hs);
  TRAINKIT_CUDA_CHECK_LAUNCH("unpermute_qkv_kernel");
}

}  // namespace trainkit::model::kernels
