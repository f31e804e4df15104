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
// Not for users: optim/muon_cuda.hpp and optim/sharded_muon_cuda.hpp are the interface.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "trainkit/core/cuda/check.hpp"

namespace trainkit::optim::kernels {

/// One Muon matrix as the kernels see it (rows × cols elements).
struct matrix_entry {
  std::uint64_t offset = 0;        // first element in the model's flat buffer
  std::uint64_t state_offset = 0;  // first element in the packed momentum / master buffers
  std::uint64_t work_offset = 0;   // first element in the shape-grouped work buffer
  float shape_scale = 1.0f;        // √max(1, rows/cols)
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

/// master ← master·keep − (rate·shape_scale)·O; param ← bf16(master) (nearest even), with O the
/// orthogonalised update in the work buffer. keep = 1 − rate·λ (decoupled weight decay).
template <class = void>
__global__ void __launch_bounds__(muon_threads)
    muon_apply_kernel(__nv_bfloat16* params, float* master, const __nv_bfloat16* work,
                      const matrix_entry* table, int count, std::uint64_t total, float rate,
                      float keep) {
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  for (std::uint64_t i = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const matrix_entry& m = find_matrix(table, count, i);
    const std::uint64_t e = i - m.state_offset;
    const float step = __fmul_rn(rate, m.shape_scale);
    const float o = __bfloat162float(work[m.work_offset + e]);
    const float updated = __fsub_rn(__fmul_rn(master[i], keep), __fmul_rn(step, o));
    master[i] = updated;
    params[m.offset + e] = __float2bfloat16_rn(updated);
  }
}

inline void muon_apply(__nv_bfloat16* params, float* master, const __nv_bfloat16* work,
                       const matrix_entry* table, int count, std::uint64_t total, float rate,
                       float keep, cudaStream_t s) {
  if (total == 0) return;
  muon_apply_kernel<><<<muon_blocks(total), muon_threads, 0, s>>>(params, master, work, table,
                                                                  count, total, rate, keep);
  TRAINKIT_CUDA_CHECK_LAUNCH("muon_apply_kernel");
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
