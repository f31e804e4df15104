// trainkit/optim/cuda/newton_schulz.cuh — Muon's Newton–Schulz iteration on the GPU: bf16, batched
// over matrices of one shape, on cuBLASLt, with no host synchronisation.
//
// The device counterpart of optim/detail/newton_schulz.hpp (fp32, Eigen), validated against its
// bf16 twin optim/detail/newton_schulz_bf16.hpp, which rounds at exactly the points this code
// does. For a batch of `count` matrices G (rows, cols), contiguous:
//   1. one block per matrix sums its squares (fp32, block_sum) and writes X = G / (‖G‖_F + 1e-7)
//      in bf16, transposed when the matrix is tall, so X is (min, max) and X·Xᵀ the small side;
//   2. per step, three strided-batched cuBLASLt GEMMs (bf16 in, fp32 accumulation), the sums
//      folded into the epilogue D = α·P + β·C: A = X·Xᵀ; B = c·A·A + b·A (C = a copy of A);
//      X' = B·X + a·X (C = a copy of X);
//   3. X (transposed back when tall) is the result, bf16.
// Everything is enqueued on the caller's stream. Work buffers grow on the first call with a larger
// batch (cudaMalloc, which may synchronise); a training step of fixed shapes allocates nothing
// after its first. cuBLASLt's autotuning times each new GEMM shape once (matmul_context).
// Never run on a GPU yet: compiled here, tested against the twin by tests/optim/test_muon_cuda.cu
// on a device machine.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "trainkit/core/cuda/block_reduce.cuh"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/launch_checks.hpp"
#include "trainkit/core/linalg/gemm_cublaslt.cuh"
#include "trainkit/optim/detail/ns_coefficients.hpp"

namespace trainkit::optim::kernels {

using ns_bf16 = __nv_bfloat16;

inline constexpr int ns_normalize_threads = 512;

/// x[m] = g[m] / (‖g[m]‖_F + 1e-7) for matrix m = blockIdx.x, transposed to (cols, rows) when
/// `tall`. A template so that several .cu files may include it (see gemm_cublaslt.cuh).
template <class = void>
__global__ void ns_normalize_kernel(const ns_bf16* g, ns_bf16* x, int rows, int cols, bool tall) {
  __shared__ float scratch[32];
  const std::int64_t n = std::int64_t(rows) * cols;
  const ns_bf16* gm = g + std::int64_t(blockIdx.x) * n;
  ns_bf16* xm = x + std::int64_t(blockIdx.x) * n;
  float sq = 0.0f;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = __bfloat162float(gm[i]);
    sq += v * v;
  }
  const float inv = 1.0f / (sqrtf(cuda::block_sum(sq, scratch)) + 1e-7f);
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const std::int64_t r = i / cols, c = i % cols;
    xm[tall ? c * rows + r : i] = __float2bfloat16(__bfloat162float(gm[i]) * inv);
  }
}

/// out[m] (rows, cols) = x[m]ᵀ for x[m] (cols, rows): the tall matrices' way back.
template <class = void>
__global__ void ns_transpose_kernel(const ns_bf16* x, ns_bf16* out, int rows, int cols,
                                    std::int64_t total) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // over out
  if (i >= total) return;
  const std::int64_t n = std::int64_t(rows) * cols, m = i / n, e = i % n;
  const std::int64_t r = e / cols, c = e % cols;
  out[i] = x[m * n + c * rows + r];
}

}  // namespace trainkit::optim::kernels

namespace trainkit::optim {

/// The batched bf16 Newton–Schulz iteration on one stream (one per optimizer; not thread safe).
class newton_schulz_cuda {
 public:
  using bf16_t = __nv_bfloat16;

  explicit newton_schulz_cuda(linalg::matmul_context& matmul) : matmul_(&matmul) {}

  /// Throws config_error when the shape cannot run.
  static void can_implement(int rows, int cols, int count, int steps) {
    constexpr const char* who = "newton_schulz_cuda";
    cuda::require(rows > 0 && cols > 0 && count > 0, who, [&] {
      return "empty batch: " + std::to_string(count) + " matrices of " + std::to_string(rows) +
             " x " + std::to_string(cols);
    });
    cuda::require(steps >= 1, who, "needs at least one step");
    cuda::require(count <= 65535 * 1024, who, "too many matrices in one batch");
  }

  /// out (count, rows, cols) = the orthogonalisation of g (count, rows, cols), both bf16 and
  /// contiguous in device memory (`out` may be `g`), `steps` iterations with coefficients `k`.
  /// Enqueued on `stream`.
  void run(const bf16_t* g, bf16_t* out, int rows, int cols, int count, int steps,
           cudaStream_t stream, detail::ns_coefficients k = detail::muon_quintic) {
    const std::vector<detail::ns_coefficients> iterations(std::size_t(steps < 0 ? 0 : steps), k);
    run(g, out, rows, cols, count, std::span<const detail::ns_coefficients>(iterations), stream);
  }

  /// The same with one iteration per entry of `iterations`, each with its own coefficients (the
  /// Polar Express schedule, optim/muon_orthogonalizer.hpp): they are the GEMMs' α and β, host
  /// values, so a schedule costs nothing over the fixed quintic.
  void run(const bf16_t* g, bf16_t* out, int rows, int cols, int count,
           std::span<const detail::ns_coefficients> iterations, cudaStream_t stream) {
    const int steps = int(iterations.size());
    can_implement(rows, cols, count, steps);
    const bool tall = rows > cols;
    const int s = tall ? cols : rows, l = tall ? rows : cols;
    const std::size_t n = std::size_t(s) * std::size_t(l), sq = std::size_t(s) * std::size_t(s);
    grow(x_, n * std::size_t(count));
    grow(next_, n * std::size_t(count));
    grow(gram_, sq * std::size_t(count));
    grow(poly_, sq * std::size_t(count));

    kernels::ns_normalize_kernel<>
        <<<count, kernels::ns_normalize_threads, 0, stream>>>(g, x_.data(), rows, cols, tall);
    TRAINKIT_CUDA_CHECK_LAUNCH("ns_normalize_kernel");
    bf16_t* x = x_.data();
    bf16_t* next = next_.data();
    for (const detail::ns_coefficients& k : iterations) {
      linalg::matmul_arguments gram;  // A = X·Xᵀ (s, s)
      gram.a = x;
      gram.b = x;
      gram.trans_b = true;
      gram.d = gram_.data();
      gram.m = s, gram.n = s, gram.k = l;
      gram.lda = l, gram.ldb = l, gram.ldd = s;
      gram.batch = count, gram.stride_a = std::int64_t(n), gram.stride_b = std::int64_t(n);
      gram.stride_d = std::int64_t(sq);
      matmul_->run(gram, stream);

      TRAINKIT_CUDA_CHECK(cudaMemcpyAsync(poly_.data(), gram_.data(),
                                          sq * std::size_t(count) * sizeof(bf16_t),
                                          cudaMemcpyDeviceToDevice, stream));
      linalg::matmul_arguments poly;  // B = c·A·A + b·A (s, s)
      poly.a = gram_.data();
      poly.b = gram_.data();
      poly.d = poly_.data();
      poly.m = s, poly.n = s, poly.k = s;
      poly.lda = s, poly.ldb = s, poly.ldd = s;
      poly.batch = count, poly.stride_a = std::int64_t(sq), poly.stride_b = std::int64_t(sq);
      poly.stride_d = std::int64_t(sq);
      poly.alpha = k.c, poly.beta = k.b;
      matmul_->run(poly, stream);

      TRAINKIT_CUDA_CHECK(cudaMemcpyAsync(next, x, n * std::size_t(count) * sizeof(bf16_t),
                                          cudaMemcpyDeviceToDevice, stream));
      linalg::matmul_arguments step_x;  // X' = B·X + a·X (s, l)
      step_x.a = poly_.data();
      step_x.b = x;
      step_x.d = next;
      step_x.m = s, step_x.n = l, step_x.k = s;
      step_x.lda = s, step_x.ldb = l, step_x.ldd = l;
      step_x.batch = count, step_x.stride_a = std::int64_t(sq), step_x.stride_b = std::int64_t(n);
      step_x.stride_d = std::int64_t(n);
      step_x.alpha = 1.0f, step_x.beta = k.a;
      matmul_->run(step_x, stream);
      std::swap(x, next);
    }
    const std::int64_t total = std::int64_t(n) * count;
    if (tall) {
      constexpr int threads = 256;
      kernels::ns_transpose_kernel<>
          <<<unsigned((total + threads - 1) / threads), threads, 0, stream>>>(x, out, rows, cols,
                                                                              total);
      TRAINKIT_CUDA_CHECK_LAUNCH("ns_transpose_kernel");
    } else {
      TRAINKIT_CUDA_CHECK(cudaMemcpyAsync(out, x, std::size_t(total) * sizeof(bf16_t),
                                          cudaMemcpyDeviceToDevice, stream));
    }
  }

 private:
  static void grow(cuda::device_buffer<bf16_t>& b, std::size_t n) {
    if (b.size() < n) b = cuda::device_buffer<bf16_t>(n);
  }

  linalg::matmul_context* matmul_;
  cuda::device_buffer<bf16_t> x_, next_;     // (count, min, max)
  cuda::device_buffer<bf16_t> gram_, poly_;  // (count, min, min)
};

}  // namespace trainkit::optim
