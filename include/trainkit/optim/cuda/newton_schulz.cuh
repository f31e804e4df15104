// trainkit/optim/cuda/newton_schulz.cuh — Muon's Newton–Schulz iteration on the GPU: bf16, batched
// over matrices of one shape, on cuBLASLt, with no host synchronisation.
//
// The device counterpart of optim/detail/newton_schulz.hpp (fp32, Eigen), validated against its
// bf16 twin optim/detail/newton_schulz_bf16.hpp, which rounds at exactly the points this code
// does. For a batch of `count` matrices G (rows, cols), contiguous:
//   1. X = G / (‖G‖_F + 1e-7) in bf16, transposed when the matrix is tall, so X is (min, max) and
//      X·Xᵀ the small side: slices of 16 Ki squares summed by one block each (fp32, block_sum),
//      the slices added in order per matrix, then a tiled scaled copy (optim/detail/ns_tiling.hpp:
//      coalesced reads and writes, transposed through shared memory);
//   2. per step, three strided-batched cuBLASLt GEMMs (bf16 in, fp32 accumulation), the sums
//      folded into the epilogue D = α·P + β·C: A = X·Xᵀ; B = c·A·A + b·A (C = a copy of A);
//      X' = B·X + a·X (C = a copy of X);
//   3. X (transposed back when tall, by the same tiled copy) is the result, bf16.
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
#include <string>
#include <utility>

#include "trainkit/core/cuda/block_reduce.cuh"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/launch_checks.hpp"
#include "trainkit/core/linalg/gemm_cublaslt.cuh"
#include "trainkit/optim/detail/ns_coefficients.hpp"
#include "trainkit/optim/detail/ns_tiling.hpp"

namespace trainkit::optim::kernels {

using ns_bf16 = __nv_bfloat16;

namespace d = trainkit::optim::detail;

/// partial[b] = Σ g² over sum-of-squares block b's slice (detail::ns_slice_of), fp32. A template
/// so that several .cu files may include it (see gemm_cublaslt.cuh).
template <class = void>
__global__ void __launch_bounds__(d::ns_norm_threads)
    ns_sum_squares_kernel(const ns_bf16* g, float* partial, std::int64_t n) {
  __shared__ float scratch[32];
  const d::ns_slice sl = d::ns_slice_of(blockIdx.x, n);
  const ns_bf16* gm = g + sl.matrix * n;
  float sq = 0.0f;
  for (std::int64_t i = sl.begin + threadIdx.x; i < sl.end; i += blockDim.x) {
    const float v = __bfloat162float(gm[i]);
    sq += v * v;
  }
  sq = cuda::block_sum(sq, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = sq;
}

/// inv[m] = 1 / (sqrt(Σ_s partial[m, s]) + 1e-7), the slices added in order: one thread a matrix.
template <class = void>
__global__ void ns_inverse_norm_kernel(float* inv, const float* partial, std::int64_t slices,
                                       int count) {
  const int m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= count) return;
  float sq = 0.0f;
  for (std::int64_t s = 0; s < slices; ++s) sq += partial[std::int64_t(m) * slices + s];
  inv[m] = 1.0f / (sqrtf(sq) + 1e-7f);
}

/// dst[m] = src[m] · inv[m] (inv null: · 1) for src[m] (rows, cols), transposed to (cols, rows)
/// when `transpose`; 32×32 tiles through shared memory, so a warp's reads and writes are both 32
/// consecutive elements (detail::ns_load_cell / ns_store_cell).
template <class = void>
__global__ void __launch_bounds__(d::ns_tile* d::ns_tile_rows)
    ns_tile_copy_kernel(const ns_bf16* src, ns_bf16* dst, const float* inv, d::ns_tile_grid grid,
                        bool transpose) {
  __shared__ float tile[d::ns_tile][d::ns_tile + 1];  // +1: the transposed reads hit 32 banks
  const d::ns_tile_at t = d::ns_tile_of(blockIdx.x, grid);
  const int tx = threadIdx.x % d::ns_tile, ty = threadIdx.x / d::ns_tile;
  const std::int64_t n = std::int64_t(grid.rows) * grid.cols;
  const ns_bf16* sm = src + t.matrix * n;
  ns_bf16* dm = dst + t.matrix * n;
  const float scale = inv ? inv[t.matrix] : 1.0f;
#pragma unroll
  for (int k = 0; k < d::ns_tile_steps; ++k) {
    const d::ns_cell c = d::ns_load_cell(t, tx, ty, k);
    if (c.r < grid.rows && c.c < grid.cols)
      tile[ty + k * d::ns_tile_rows][tx] =
          __bfloat162float(sm[std::int64_t(c.r) * grid.cols + c.c]) * scale;
  }
  __syncthreads();
  const int out_rows = transpose ? grid.cols : grid.rows,
            out_cols = transpose ? grid.rows : grid.cols;
#pragma unroll
  for (int k = 0; k < d::ns_tile_steps; ++k) {
    const d::ns_store st = d::ns_store_cell(t, tx, ty, k, transpose);
    if (st.i < out_rows && st.j < out_cols)
      dm[std::int64_t(st.i) * out_cols + st.j] = __float2bfloat16(tile[st.slot_row][st.slot_col]);
  }
}

/// The normalisation (step 1 of the file comment): x[m] = g[m] / (‖g[m]‖_F + 1e-7), transposed
/// to (cols, rows) when `tall`. `partial` holds ns_norm_slices(rows·cols)·count floats, `inv`
/// count floats. Enqueued on `stream`.
inline void ns_normalize(const ns_bf16* g, ns_bf16* x, float* partial, float* inv, int rows,
                         int cols, int count, bool tall, cudaStream_t stream) {
  const std::int64_t n = std::int64_t(rows) * cols, slices = d::ns_norm_slices(n);
  ns_sum_squares_kernel<>
      <<<unsigned(slices * count), d::ns_norm_threads, 0, stream>>>(g, partial, n);
  TRAINKIT_CUDA_CHECK_LAUNCH("ns_sum_squares_kernel");
  constexpr int threads = 128;
  ns_inverse_norm_kernel<><<<unsigned((count + threads - 1) / threads), threads, 0, stream>>>(
      inv, partial, slices, count);
  TRAINKIT_CUDA_CHECK_LAUNCH("ns_inverse_norm_kernel");
  const d::ns_tile_grid grid = d::ns_tiles(rows, cols);
  ns_tile_copy_kernel<>
      <<<unsigned(grid.per_matrix * count), d::ns_tile * d::ns_tile_rows, 0, stream>>>(g, x, inv,
                                                                                       grid, tall);
  TRAINKIT_CUDA_CHECK_LAUNCH("ns_tile_copy_kernel (normalise)");
}

/// out[m] (rows, cols) = x[m]ᵀ for x[m] (cols, rows): the tall matrices' way back, tiled.
inline void ns_transpose_back(const ns_bf16* x, ns_bf16* out, int rows, int cols, int count,
                              cudaStream_t stream) {
  const d::ns_tile_grid grid = d::ns_tiles(cols, rows);  // the source is (cols, rows)
  ns_tile_copy_kernel<>
      <<<unsigned(grid.per_matrix * count), d::ns_tile * d::ns_tile_rows, 0, stream>>>(
          x, out, nullptr, grid, true);
  TRAINKIT_CUDA_CHECK_LAUNCH("ns_tile_copy_kernel (transpose back)");
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
    const std::int64_t n = std::int64_t(rows) * cols;
    cuda::require(detail::ns_tiles(rows, cols).per_matrix * count <= 0x7fffffff &&
                      detail::ns_norm_slices(n) * count <= 0x7fffffff,
                  who, "too many tiles in one batch (grid.x)");
  }

  /// out (count, rows, cols) = the orthogonalisation of g (count, rows, cols), both bf16 and
  /// contiguous in device memory (`out` may be `g`), `steps` iterations with coefficients `k`.
  /// Enqueued on `stream`.
  void run(const bf16_t* g, bf16_t* out, int rows, int cols, int count, int steps,
           cudaStream_t stream, detail::ns_coefficients k = detail::muon_quintic) {
    can_implement(rows, cols, count, steps);
    const bool tall = rows > cols;
    const int s = tall ? cols : rows, l = tall ? rows : cols;
    const std::size_t n = std::size_t(s) * std::size_t(l), sq = std::size_t(s) * std::size_t(s);
    grow(x_, n * std::size_t(count));
    grow(next_, n * std::size_t(count));
    grow(gram_, sq * std::size_t(count));
    grow(poly_, sq * std::size_t(count));

    const std::size_t slices = std::size_t(detail::ns_norm_slices(std::int64_t(n)));
    grow(norms_, (slices + 1) * std::size_t(count));  // the partials, then inv
    kernels::ns_normalize(g, x_.data(), norms_.data(), norms_.data() + slices * std::size_t(count),
                          rows, cols, count, tall, stream);
    bf16_t* x = x_.data();
    bf16_t* next = next_.data();
    for (int step = 0; step < steps; ++step) {
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
      kernels::ns_transpose_back(x, out, rows, cols, count, stream);
    } else {
      TRAINKIT_CUDA_CHECK(cudaMemcpyAsync(out, x, std::size_t(total) * sizeof(bf16_t),
                                          cudaMemcpyDeviceToDevice, stream));
    }
  }

 private:
  template <class T>
  static void grow(cuda::device_buffer<T>& b, std::size_t n) {
    if (b.size() < n) b = cuda::device_buffer<T>(n);
  }

  linalg::matmul_context* matmul_;
  cuda::device_buffer<bf16_t> x_, next_;     // (count, min, max)
  cuda::device_buffer<bf16_t> gram_, poly_;  // (count, min, min)
  cuda::device_buffer<float> norms_;         // the normalisation's partial sums, then 1/norms
};

}  // namespace trainkit::optim
