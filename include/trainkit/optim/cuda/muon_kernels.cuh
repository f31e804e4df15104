// trainkit/optim/cuda/muon_kernels.cuh — the element-wise kernels of muon_cuda around its batched
// Newton–Schulz iteration (newton_schulz.cuh): Nesterov momentum into a shape-grouped bf16 work
// buffer, and the scaled, decayed update of the fp32 master weights and bf16 parameters.
//
// Both kernels run over every element of every Muon matrix, indexed as the packed momentum is
// (matrices in layout order, muon_matrices), and find an element's matrix by a binary search over
// a device table of `matrix_entry` (GPT-2 d48 has 192 matrices: 8 probes). The arithmetic is
// muon_cpu's, in its order, with explicitly rounded operations (__fmul_rn/__fadd_rn/__fsub_rn) so
// that nvcc does not contract them into FMAs: the host twin (optim/detail/muon_cuda_twin.hpp)
// computes the same floats. The clipping factor is read from device memory (the trainer's clipping
// step wrote it on the same stream). The sharded form's gather packs its matrices into, and
// unpacks every matrix from, the packed bf16 buffer the ranks broadcast (muon_pack, muon_unpack).
// The variants of muon_config: NorMuon's per-line scales (normuon_kernel, one block per matrix,
// between the Newton–Schulz call and the apply kernel, which multiplies O by its line's scale)
// and cautious weight decay (a flag of the apply kernel); muon_cuda_twin.hpp is their host twin.
// Not for users: optim/muon_cuda.hpp and optim/sharded_muon_cuda.hpp are the interface.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "trainkit/core/cuda/block_reduce.cuh"
#include "trainkit/core/cuda/check.hpp"

namespace trainkit::optim::kernels {

/// One Muon matrix as the kernels see it (rows × cols elements).
struct matrix_entry {
  std::uint64_t offset = 0;        // first element in the model's flat buffer
  std::uint64_t state_offset = 0;  // first element in the packed momentum / master buffers
  std::uint64_t work_offset = 0;   // first element in the shape-grouped work buffer
  float shape_scale = 1.0f;        // √max(1, rows/cols)
  std::uint64_t line_offset = 0;   // NorMuon: first of its lines in the packed second moment
  std::int32_t rows = 0, cols = 0;
};

inline constexpr int muon_threads = 256;

/// The entry holding packed element i: the last whose state_offset ≤ i. Host-callable too, so
/// the CPU tests can walk the kernels' indexing (tests/optim/test_sharded_muon_cuda.cu).
__host__ __device__ inline const matrix_entry& find_matrix(const matrix_entry* table, int count,
                                                           std::uint64_t i) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (table[mid].state_offset <= i)
      lo = mid;
    else
      hi = mid - 1;
  }
  return table[lo];
}

/// Settings of the momentum kernel, one step's worth (host-side arguments, passed by value).
struct muon_momentum_params {
  float beta = 0.0f, one_minus_beta = 1.0f;
  bool nesterov = true;
};

/// buf ← buf + (1−β)·(g·factor − buf); work ← bf16(Nesterov ? g + β·(buf − g) : buf), for each of
/// the `total` packed elements.
template <class = void>
__global__ void __launch_bounds__(muon_threads)
    muon_momentum_kernel(const __nv_bfloat16* grads, float* momentum, __nv_bfloat16* work,
                         const matrix_entry* table, int count, std::uint64_t total,
                         const float* norm_and_factor, const muon_momentum_params k) {
  const float factor = norm_and_factor[1];
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  for (std::uint64_t i = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const matrix_entry& m = find_matrix(table, count, i);
    const std::uint64_t e = i - m.state_offset;
    const float g = __fmul_rn(__bfloat162float(grads[m.offset + e]), factor);
    const float buf =
        __fadd_rn(momentum[i], __fmul_rn(k.one_minus_beta, __fsub_rn(g, momentum[i])));
    momentum[i] = buf;
    const float u = k.nesterov ? __fadd_rn(g, __fmul_rn(k.beta, __fsub_rn(buf, g))) : buf;
    work[m.work_offset + e] = __float2bfloat16_rn(u);
  }
}

inline unsigned muon_blocks(std::uint64_t total) {
  const std::uint64_t blocks = (total + muon_threads - 1) / muon_threads;
  return unsigned(blocks < 65536 ? blocks : 65536);
}

inline void muon_momentum(const __nv_bfloat16* grads, float* momentum, __nv_bfloat16* work,
                          const matrix_entry* table, int count, std::uint64_t total,
                          const float* norm_and_factor, const muon_momentum_params& k,
                          cudaStream_t s) {
  if (total == 0) return;
  muon_momentum_kernel<><<<muon_blocks(total), muon_threads, 0, s>>>(
      grads, momentum, work, table, count, total, norm_and_factor, k);
  TRAINKIT_CUDA_CHECK_LAUNCH("muon_momentum_kernel");
}

/// The variants' part of the apply step: NorMuon's per-line scales (nullptr: off) and cautious
/// weight decay.
struct muon_apply_variants {
  const float* line_scale = nullptr;  // (lines,) written by normuon_kernel
  bool cautious = false;
};

/// NorMuon's line of element e of matrix m: its row when rows ≥ cols, else its column.
__host__ __device__ inline std::uint64_t normuon_line(const matrix_entry& m, std::uint64_t e) {
  return m.rows >= m.cols ? e / std::uint64_t(m.cols) : e % std::uint64_t(m.cols);
}

/// master ← master·keep − (rate·shape_scale)·O; param ← bf16(master) (nearest even), with O the
/// orthogonalised update in the work buffer (times its line's NorMuon scale when given). keep =
/// 1 − rate·λ (decoupled weight decay), applied only where O·master ≥ 0 when cautious.
template <class = void>
__global__ void __launch_bounds__(muon_threads)
    muon_apply_kernel(__nv_bfloat16* params, float* master, const __nv_bfloat16* work,
                      const matrix_entry* table, int count, std::uint64_t total, float rate,
                      float keep, const muon_apply_variants v) {
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  for (std::uint64_t i = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const matrix_entry& m = find_matrix(table, count, i);
    const std::uint64_t e = i - m.state_offset;
    const float step = __fmul_rn(rate, m.shape_scale);
    float o = __bfloat162float(work[m.work_offset + e]);
    if (v.line_scale) o = __fmul_rn(o, v.line_scale[m.line_offset + normuon_line(m, e)]);
    const float before = master[i];
    const bool decay = !v.cautious || __fmul_rn(o, before) >= 0.0f;
    const float decayed = decay ? __fmul_rn(before, keep) : before;
    const float updated = __fsub_rn(decayed, __fmul_rn(step, o));
    master[i] = updated;
    params[m.offset + e] = __float2bfloat16_rn(updated);
  }
}

inline void muon_apply(__nv_bfloat16* params, float* master, const __nv_bfloat16* work,
                       const matrix_entry* table, int count, std::uint64_t total, float rate,
                       float keep, cudaStream_t s, const muon_apply_variants& v = {}) {
  if (total == 0) return;
  muon_apply_kernel<><<<muon_blocks(total), muon_threads, 0, s>>>(params, master, work, table,
                                                                  count, total, rate, keep, v);
  TRAINKIT_CUDA_CHECK_LAUNCH("muon_apply_kernel");
}

inline constexpr int normuon_threads = 256;

/// NorMuon (optim/muon_cpu.hpp has the formula and its sources) for matrix blockIdx.x of the
/// table: per line l (a warp at a time) the mean of O² over the bf16 O in the work buffer,
/// second_moment[l] ← v + (1−β₂)·(mean − v), s_l = 1/√max(v, 1e-10); then, the block's sums of
/// the lines' squares and of squares·s_l² giving factor = ‖O‖_F / max(‖O·s‖_F, 1e-10),
/// line_scale[l] = s_l·factor for the apply kernel. Warps take lines in turn and the block sums
/// in warp order, so the result is deterministic.
template <class = void>
__global__ void __launch_bounds__(normuon_threads)
    normuon_kernel(const __nv_bfloat16* work, float* second_moment, float* line_scale,
                   const matrix_entry* table, float one_minus_beta2) {
  __shared__ float scratch[32];
  const matrix_entry& m = table[blockIdx.x];
  const bool by_rows = m.rows >= m.cols;
  const int lines = by_rows ? m.rows : m.cols, reduced = by_rows ? m.cols : m.rows;
  const int lane = int(threadIdx.x) % cuda::warp_size, warp = int(threadIdx.x) / cuda::warp_size;
  const int warps = int(blockDim.x) / cuda::warp_size;
  const __nv_bfloat16* o = work + m.work_offset;
  float norm_sq = 0.0f, scaled_sq = 0.0f;  // lane 0 of each warp: its lines' sums
  for (int l = warp; l < lines; l += warps) {
    float sum = 0.0f;
    for (int k = lane; k < reduced; k += cuda::warp_size) {
      const std::int64_t at = by_rows ? std::int64_t(l) * m.cols + k : std::int64_t(k) * m.cols + l;
      const float x = __bfloat162float(o[at]);
      sum = __fadd_rn(sum, __fmul_rn(x, x));
    }
    sum = cuda::warp_sum(sum);
    if (lane == 0) {
      float* v = second_moment + m.line_offset + l;
      const float mean = __fdiv_rn(sum, float(reduced));
      const float updated = __fadd_rn(*v, __fmul_rn(one_minus_beta2, __fsub_rn(mean, *v)));
      *v = updated;
      const float s = __fdiv_rn(1.0f, __fsqrt_rn(fmaxf(updated, 1e-10f)));
      line_scale[m.line_offset + l] = s;
      norm_sq = __fadd_rn(norm_sq, sum);
      scaled_sq = __fadd_rn(scaled_sq, __fmul_rn(sum, __fmul_rn(s, s)));
    }
  }
  const float total_sq = cuda::block_sum(norm_sq, scratch);
  const float total_scaled = cuda::block_sum(scaled_sq, scratch);
  const float factor = __fdiv_rn(__fsqrt_rn(total_sq), fmaxf(__fsqrt_rn(total_scaled), 1e-10f));
  for (int l = int(threadIdx.x); l < lines; l += int(blockDim.x))
    line_scale[m.line_offset + l] = __fmul_rn(line_scale[m.line_offset + l], factor);
}

inline void normuon(const __nv_bfloat16* work, float* second_moment, float* line_scale,
                    const matrix_entry* table, int count, float beta2, cudaStream_t s) {
  if (count == 0) return;
  normuon_kernel<><<<unsigned(count), normuon_threads, 0, s>>>(work, second_moment, line_scale,
                                                               table, 1.0f - beta2);
  TRAINKIT_CUDA_CHECK_LAUNCH("normuon_kernel");
}

/// master[i] = float(params[offset + e]) for each packed element (master weights from the model).
template <class = void>
__global__ void muon_load_master_kernel(float* master, const __nv_bfloat16* params,
                                        const matrix_entry* table, int count, std::uint64_t total) {
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  for (std::uint64_t i = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const matrix_entry& m = find_matrix(table, count, i);
    master[i] = __bfloat162float(params[m.offset + (i - m.state_offset)]);
  }
}

inline void muon_load_master(float* master, const __nv_bfloat16* params, const matrix_entry* table,
                             int count, std::uint64_t total, cudaStream_t s) {
  if (total == 0) return;
  muon_load_master_kernel<>
      <<<muon_blocks(total), muon_threads, 0, s>>>(master, params, table, count, total);
  TRAINKIT_CUDA_CHECK_LAUNCH("muon_load_master_kernel");
}

/// The send side of a sharded Muon's gather (optim/sharded_muon_cuda.hpp): packed[i] =
/// params[m.offset + (i − m.state_offset)] for i in [begin, end), this rank's piece of the packed
/// buffer of every matrix. `table` lists every matrix with its state offset in that buffer. The
/// host twin is optim::muon_pack (muon_matrices.hpp).
template <class = void>
__global__ void __launch_bounds__(muon_threads)
    muon_pack_kernel(const __nv_bfloat16* params, __nv_bfloat16* packed, const matrix_entry* table,
                     int count, std::uint64_t begin, std::uint64_t end) {
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  for (std::uint64_t i = begin + std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < end;
       i += stride) {
    const matrix_entry& m = find_matrix(table, count, i);
    packed[i] = params[m.offset + (i - m.state_offset)];
  }
}

inline void muon_pack(const __nv_bfloat16* params, __nv_bfloat16* packed, const matrix_entry* table,
                      int count, std::uint64_t begin, std::uint64_t end, cudaStream_t s) {
  if (end <= begin) return;
  muon_pack_kernel<>
      <<<muon_blocks(end - begin), muon_threads, 0, s>>>(params, packed, table, count, begin, end);
  TRAINKIT_CUDA_CHECK_LAUNCH("muon_pack_kernel");
}

/// The receive side: params[m.offset + (i − m.state_offset)] = packed[i] for every element of
/// every matrix (`total`). The host twin is optim::muon_unpack.
template <class = void>
__global__ void __launch_bounds__(muon_threads)
    muon_unpack_kernel(__nv_bfloat16* params, const __nv_bfloat16* packed,
                       const matrix_entry* table, int count, std::uint64_t total) {
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  for (std::uint64_t i = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const matrix_entry& m = find_matrix(table, count, i);
    params[m.offset + (i - m.state_offset)] = packed[i];
  }
}

inline void muon_unpack(__nv_bfloat16* params, const __nv_bfloat16* packed,
                        const matrix_entry* table, int count, std::uint64_t total, cudaStream_t s) {
  if (total == 0) return;
  muon_unpack_kernel<>
      <<<muon_blocks(total), muon_threads, 0, s>>>(params, packed, table, count, total);
  TRAINKIT_CUDA_CHECK_LAUNCH("muon_unpack_kernel");
}

}  // namespace trainkit::optim::kernels
