// trainkit/model/cuda/flash_attention.cuh — trainkit's own causal flash attention, forward and
// backward, without a T×T matrix.
//
// bf16 in and out, fp32 accumulation, tensor cores through WMMA (16×16×16 bf16 fragments). The
// tiling, the base-2 online softmax and the saved log-sum-exp are those of the CPU twin
// detail/flash_attention_reference.hpp, which is tested against the naive attention; the twin's
// header comment states the algorithm. Reads q, k, v straight from the QKV GEMM's (B, T, 3C)
// output and writes (B, T, C): no permute kernels.
//
// Forward: one block of 4 warps per (query tile of 64 rows, batch·head); warp w owns rows
// 16w..16w+15. K and V tiles pass through shared memory; scores go fragment → shared fp32, the
// softmax runs there, P is rounded to bf16 for the P·V product, O stays in shared fp32 so the
// rescale by 2^(m − m') touches known rows (WMMA fragments have no documented element order).
// Key tiles past the query tile's diagonal are never visited.
// Backward: a pre-pass computes D = rowsum(dout ∘ out); one block per (key tile, batch·head)
// keeps dK and dV in shared fp32 and visits only the query tiles that see its keys, recomputing
// P from the saved log-sum-exp; dQ is added with fp32 atomics into a (B, T, C) float buffer that
// a last pass rounds into dqkv. Shared memory: forward 71 KiB (hs 64) / 111 KiB (hs 128),
// backward 105.5 / 170 KiB (S, dP and the dQ strip share one buffer, P stays in registers), within
// the 227 KiB of an H100/H200 SM (opted in per kernel): two blocks per SM at hs 64 in both passes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "trainkit/core/cuda/bf16.cuh"
#include "trainkit/core/cuda/block_reduce.cuh"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/launch_checks.hpp"
#include "trainkit/model/detail/flash_attention_reference.hpp"

namespace trainkit::model::kernels {

using namespace trainkit::cuda;  // bf16 packs, reductions, launch checks

namespace flash {

using tiles = detail::flash_tiles;
inline constexpr int block_q = tiles::block_q;
inline constexpr int block_k = tiles::block_k;
inline constexpr int warps = block_q / 16;  // one warp per 16 query rows (or keys)
inline constexpr int threads = warps * warp_size;
static_assert(block_q == 64 && block_k == 64, "the warp partition below assumes 64×64 tiles");
// Rows of shared tiles are padded so that consecutive rows start in different banks; the pads
// keep every fragment pointer 32-byte aligned (WMMA's requirement): 16 rows of (hs + 8) bf16 or
// (64 + 4) floats are multiples of 32 bytes.
inline constexpr int pad_h = 8;  // bf16 elements
inline constexpr int pad_f = 4;  // float elements
inline constexpr float log2e = float(detail::flash_log2e);
inline constexpr float ln2 = float(detail::flash_ln2);

template <int hs>
struct forward_smem {
  static constexpr int ld_h = hs + pad_h;       // q, k, v tiles (bf16)
  static constexpr int ld_s = block_k + pad_f;  // scores (float)
  static constexpr int ld_p = block_k + pad_h;  // probabilities (bf16)
  static constexpr int ld_o = hs + pad_f;       // output accumulator (float)
  static constexpr std::size_t q = 0;
  static constexpr std::size_t k = q + std::size_t(block_q) * ld_h * 2;
  static constexpr std::size_t v = k + std::size_t(block_k) * ld_h * 2;
  static constexpr std::size_t s = v + std::size_t(block_k) * ld_h * 2;
  static constexpr std::size_t p = s + std::size_t(block_q) * ld_s * 4;
  static constexpr std::size_t o = p + std::size_t(block_q) * ld_p * 2;
  static constexpr std::size_t m = o + std::size_t(block_q) * ld_o * 4;
  static constexpr std::size_t l = m + block_q * 4;
  static constexpr std::size_t corr = l + block_q * 4;
  static constexpr std::size_t bytes = corr + block_q * 4;
};

// The scores S, then dP, then the dQ strip share one fp32 buffer: each warp uses only its own 16
// rows of it, and keeps its P in registers while dP overwrites S. Without a separate dP buffer the
// hs-64 backward needs 105.5 KiB, so two blocks fit an SM's 228 KiB (it needed 122.5: one).
template <int hs>
struct backward_smem {
  static constexpr int ld_h = hs + pad_h;       // k, v, q, dout tiles (bf16)
  static constexpr int ld_s = block_k + pad_f;  // scores, then dP, then a dQ strip (float)
  static constexpr int ld_p = block_k + pad_h;  // P, dS (bf16)
  static constexpr int ld_a = hs + pad_f;       // dK, dV accumulators (float)
  static constexpr std::size_t k = 0;
  static constexpr std::size_t v = k + std::size_t(block_k) * ld_h * 2;
  static constexpr std::size_t q = v + std::size_t(block_k) * ld_h * 2;
  static constexpr std::size_t dy = q + std::size_t(block_q) * ld_h * 2;
  static constexpr std::size_t s = dy + std::size_t(block_q) * ld_h * 2;
  static constexpr std::size_t p = s + std::size_t(block_q) * ld_s * 4;
  static constexpr std::size_t ds = p + std::size_t(block_q) * ld_p * 2;
  static constexpr std::size_t dk = ds + std::size_t(block_q) * ld_p * 2;
  static constexpr std::size_t dv = dk + std::size_t(block_k) * ld_a * 4;
  static constexpr std::size_t lse = dv + std::size_t(block_k) * ld_a * 4;
  static constexpr std::size_t delta = lse + block_q * 4;
  static constexpr std::size_t bytes = delta + block_q * 4;
};
// Hopper: 228 KiB of shared memory per SM, 1 KiB of it reserved per block.
static_assert(2 * (backward_smem<64>::bytes + 1024) <= 228 * 1024,
              "two hs-64 backward blocks must fit one SM");

// rows × hs bf16 from a (·, stride) matrix starting at row `first` into a padded shared tile;
// rows at or past T become zeros (a garbage V row times a zero probability could be NaN).
template <int hs>
__device__ inline void load_tile(bf16_t* dst, const bf16_t* src, std::int64_t stride, int first,
                                 int rows, int T) {
  constexpr int chunks = hs / pack;
  for (int i = threadIdx.x; i < rows * chunks; i += blockDim.x) {
    const int r = i / chunks, c = (i % chunks) * pack;
    bf16x8 x;
    if (first + r < T) {
      x = load8(src + std::int64_t(first + r) * stride + c);
    } else {
      for (int e = 0; e < pack; ++e) x.v[e] = __float2bfloat16(0.0f);
    }
    store8(dst + r * (hs + pad_h) + c, x);
  }
}

namespace wmma = nvcuda::wmma;
using frag_a_row = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16_t, wmma::row_major>;
using frag_a_col = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16_t, wmma::col_major>;
using frag_b_row = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16_t, wmma::row_major>;
using frag_b_col = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16_t, wmma::col_major>;
using frag_acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// (16 × 64) fp32 at `out` (ld ld_out) = a (16 × hs, row-major, ld ld_a) · bᵀ where b is (64 × hs)
// row-major (ld ld_b): a warp's strip of q·kᵀ or dout·vᵀ.
template <int hs>
__device__ inline void strip_times_transposed(float* out, int ld_out, const bf16_t* a, int ld_a,
                                              const bf16_t* b, int ld_b) {
  for (int n = 0; n < block_k / 16; ++n) {
    frag_acc acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < hs / 16; ++kk) {
      frag_a_row fa;
      frag_b_col fb;  // bᵀ(d, key) = b[key·ld_b + d]: column-major
      wmma::load_matrix_sync(fa, a + kk * 16, ld_a);
      wmma::load_matrix_sync(fb, b + std::size_t(n) * 16 * ld_b + kk * 16, ld_b);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(out + n * 16, acc, ld_out, wmma::mem_row_major);
  }
}

}  // namespace flash

/// Forward: out (B, T, C) bf16 and lse (B, H, T) fp32 (natural log) from qkv (B, T, 3C).
template <int hs>
__global__ void __launch_bounds__(flash::threads)
    flash_attention_forward_kernel(bf16_t* out, float* lse, const bf16_t* qkv, int T, int C,
                                   int H) {
  using namespace flash;
  using L = forward_smem<hs>;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16_t* sq = reinterpret_cast<bf16_t*>(smem + L::q);
  bf16_t* sk = reinterpret_cast<bf16_t*>(smem + L::k);
  bf16_t* sv = reinterpret_cast<bf16_t*>(smem + L::v);
  float* ss = reinterpret_cast<float*>(smem + L::s);
  bf16_t* sp = reinterpret_cast<bf16_t*>(smem + L::p);
  float* so = reinterpret_cast<float*>(smem + L::o);
  float* sm = reinterpret_cast<float*>(smem + L::m);
  float* sl = reinterpret_cast<float*>(smem + L::l);
  float* scorr = reinterpret_cast<float*>(smem + L::corr);

  // The last query tiles visit the most key tiles: launch them first so they do not finish last.
  const int qt = int(gridDim.x) - 1 - int(blockIdx.x);
  const int bh = blockIdx.y, b = bh / H, h = bh % H;
  const int q0 = qt * block_q;
  const std::int64_t row = 3 * std::int64_t(C);
  const bf16_t* q = qkv + std::int64_t(b) * T * row + std::int64_t(h) * hs;
  const bf16_t* k = q + C;
  const bf16_t* v = q + 2 * C;
  const int warp = threadIdx.x / warp_size, lane = threadIdx.x % warp_size;
  const float scale_log2 = rsqrtf(float(hs)) * log2e;

  load_tile<hs>(sq, q, row, q0, block_q, T);
  for (int i = threadIdx.x; i < block_q * L::ld_o; i += blockDim.x) so[i] = 0.0f;
  for (int i = threadIdx.x; i < block_q; i += blockDim.x) {
    sm[i] = -INFINITY;
    sl[i] = 0.0f;
  }

  for (int kt = 0; kt <= detail::flash_last_key_tile(qt); ++kt) {
    const int k0 = kt * block_k;
    __syncthreads();  // every warp is done with the previous K and V tiles
    load_tile<hs>(sk, k, row, k0, block_k, T);
    load_tile<hs>(sv, v, row, k0, block_k, T);
    __syncthreads();

    const int r0 = warp * 16;  // this warp's rows of the tile
    strip_times_transposed<hs>(ss + r0 * L::ld_s, L::ld_s, sq + r0 * L::ld_h, L::ld_h, sk, L::ld_h);
    __syncwarp();
    // Online softmax, one row at a time, two columns per lane.
    for (int r = r0; r < r0 + 16; ++r) {
      const int t = q0 + r;
      float x[2];
      for (int e = 0; e < 2; ++e) {
        const int c = lane + e * warp_size, j = k0 + c;
        x[e] = (j <= t && j < T) ? ss[r * L::ld_s + c] * scale_log2 : -INFINITY;
      }
      // Column k0 ≤ q0 ≤ t is never masked: the maximum is finite.
      const float m_new = fmaxf(sm[r], warp_max(fmaxf(x[0], x[1])));
      float sum = 0.0f;
      for (int e = 0; e < 2; ++e) {
        const float p = exp2f(x[e] - m_new);
        sp[r * L::ld_p + lane + e * warp_size] = __float2bfloat16(p);
        sum += p;
      }
      sum = warp_sum(sum);
      __syncwarp();  // every lane has read sm[r] before lane 0 changes it
      if (lane == 0) {
        const float correction = exp2f(sm[r] - m_new);
        sl[r] = sl[r] * correction + sum;
        sm[r] = m_new;
        scorr[r] = correction;
      }
    }
    __syncwarp();
    for (int i = lane; i < 16 * hs; i += warp_size) {
      const int r = r0 + i / hs, d = i % hs;
      so[r * L::ld_o + d] *= scorr[r];
    }
    __syncwarp();
    // o (16 × hs) += p (16 × 64) · v (64 × hs)
    for (int n = 0; n < hs / 16; ++n) {
      frag_acc acc;
      float* o_tile = so + r0 * L::ld_o + n * 16;
      wmma::load_matrix_sync(acc, o_tile, L::ld_o, wmma::mem_row_major);
      for (int kk = 0; kk < block_k / 16; ++kk) {
        frag_a_row fa;
        frag_b_row fb;
        wmma::load_matrix_sync(fa, sp + r0 * L::ld_p + kk * 16, L::ld_p);
        wmma::load_matrix_sync(fb, sv + kk * 16 * L::ld_h + n * 16, L::ld_h);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(o_tile, acc, L::ld_o, wmma::mem_row_major);
    }
  }
  __syncthreads();
  constexpr int chunks = hs / pack;
  for (int i = threadIdx.x; i < block_q * chunks; i += blockDim.x) {
    const int r = i / chunks, c = (i % chunks) * pack, t = q0 + r;
    if (t >= T) continue;
    const float inv = 1.0f / sl[r];
    bf16x8 y;
    for (int e = 0; e < pack; ++e) y.v[e] = __float2bfloat16(so[r * L::ld_o + c + e] * inv);
    store8(out + (std::int64_t(b) * T + t) * C + std::int64_t(h) * hs + c, y);
  }
  for (int r = threadIdx.x; r < block_q; r += blockDim.x)
    if (q0 + r < T) lse[std::int64_t(bh) * T + q0 + r] = (sm[r] + log2f(sl[r])) * ln2;
}

/// D (B, H, T) = rowsum(dout ∘ out) per head: one warp per (b, t, h).
template <int hs>
__global__ void flash_attention_delta_kernel(float* delta, const bf16_t* dout, const bf16_t* out,
                                             int B, int T, int C, int H) {
  const std::int64_t w = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / warp_size;
  const int lane = threadIdx.x % warp_size;
  if (w >= std::int64_t(B) * T * H) return;
  const int h = int(w % H);
  const std::int64_t bt = w / H;
  const std::int64_t off = bt * C + std::int64_t(h) * hs;
  float acc = 0.0f;
  for (int d = lane; d < hs; d += warp_size)
    acc += __bfloat162float(dout[off + d]) * __bfloat162float(out[off + d]);
  acc = warp_sum(acc);
  const std::int64_t b = bt / T, t = bt % T;
  if (lane == 0) delta[(b * H + h) * T + t] = acc;
}

/// Backward: dk, dv written into dqkv (B, T, 3C); dq added into dq_accum (B, T, C) fp32, which
/// must be zero on entry.
template <int hs>
__global__ void __launch_bounds__(flash::threads)
    flash_attention_backward_kernel(bf16_t* dqkv, float* dq_accum, const bf16_t* dout,
                                    const bf16_t* qkv, const float* lse, const float* delta, int T,
                                    int C, int H) {
  using namespace flash;
  using L = backward_smem<hs>;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16_t* sk = reinterpret_cast<bf16_t*>(smem + L::k);
  bf16_t* sv = reinterpret_cast<bf16_t*>(smem + L::v);
  bf16_t* sq = reinterpret_cast<bf16_t*>(smem + L::q);
  bf16_t* sdy = reinterpret_cast<bf16_t*>(smem + L::dy);
  float* ss = reinterpret_cast<float*>(smem + L::s);
  bf16_t* sp = reinterpret_cast<bf16_t*>(smem + L::p);
  bf16_t* sds = reinterpret_cast<bf16_t*>(smem + L::ds);
  float* sdk = reinterpret_cast<float*>(smem + L::dk);
  float* sdv = reinterpret_cast<float*>(smem + L::dv);
  float* slse = reinterpret_cast<float*>(smem + L::lse);
  float* sdelta = reinterpret_cast<float*>(smem + L::delta);

  // The first key tiles are seen by the most query tiles: launch them first.
  const int kt = blockIdx.x;
  const int bh = blockIdx.y, b = bh / H, h = bh % H;
  const int k0 = kt * block_k;
  const std::int64_t row = 3 * std::int64_t(C);
  const std::int64_t head = std::int64_t(b) * T * row + std::int64_t(h) * hs;
  const bf16_t* q = qkv + head;
  const bf16_t* k = q + C;
  const bf16_t* v = q + 2 * C;
  const bf16_t* dy = dout + std::int64_t(b) * T * C + std::int64_t(h) * hs;
  float* dq = dq_accum + std::int64_t(b) * T * C + std::int64_t(h) * hs;
  const int warp = threadIdx.x / warp_size, lane = threadIdx.x % warp_size;
  const int r0 = warp * 16;  // this warp's query rows of S, and its keys of dK and dV
  const float scale = rsqrtf(float(hs));
  const float scale_log2 = scale * log2e;

  load_tile<hs>(sk, k, row, k0, block_k, T);
  load_tile<hs>(sv, v, row, k0, block_k, T);
  for (int i = threadIdx.x; i < block_k * L::ld_a; i += blockDim.x) sdk[i] = sdv[i] = 0.0f;

  const int query_tiles = detail::flash_tile_count(T, block_q);
  for (int qt = detail::flash_first_query_tile(kt); qt < query_tiles; ++qt) {
    const int q0 = qt * block_q;
    __syncthreads();  // the previous query tile is done with
    load_tile<hs>(sq, q, row, q0, block_q, T);
    load_tile<hs>(sdy, dy, C, q0, block_q, T);
    for (int r = threadIdx.x; r < block_q; r += blockDim.x) {
      const bool real = q0 + r < T;
      slse[r] = real ? lse[std::int64_t(bh) * T + q0 + r] * log2e : 0.0f;  // base 2
      sdelta[r] = real ? delta[std::int64_t(bh) * T + q0 + r] : 0.0f;
    }
    __syncthreads();

    // S = q·kᵀ (this warp's strip), P from it into registers (and bf16 for dV's product); then
    // dP = dout·vᵀ into the same strip, dS from P and dP.
    constexpr int per_lane = 16 * block_k / warp_size;
    float p[per_lane];
    strip_times_transposed<hs>(ss + r0 * L::ld_s, L::ld_s, sq + r0 * L::ld_h, L::ld_h, sk, L::ld_h);
    __syncwarp();
#pragma unroll
    for (int e = 0; e < per_lane; ++e) {
      const int i = lane + e * warp_size;
      const int r = r0 + i / block_k, c = i % block_k, t = q0 + r, j = k0 + c;
      p[e] = (t < T && j <= t) ? exp2f(ss[r * L::ld_s + c] * scale_log2 - slse[r])  // j ≤ t < T
                               : 0.0f;
      sp[r * L::ld_p + c] = __float2bfloat16(p[e]);
    }
    __syncwarp();  // every lane has read its scores before dP overwrites them
    strip_times_transposed<hs>(ss + r0 * L::ld_s, L::ld_s, sdy + r0 * L::ld_h, L::ld_h, sv,
                               L::ld_h);
    __syncwarp();
#pragma unroll
    for (int e = 0; e < per_lane; ++e) {
      const int i = lane + e * warp_size;
      const int r = r0 + i / block_k, c = i % block_k;
      const float ds = p[e] * (ss[r * L::ld_s + c] - sdelta[r]) * scale;  // 0 where P is
      sds[r * L::ld_p + c] = __float2bfloat16(ds);
    }
    __syncthreads();  // dV and dK need every warp's rows of P and dS

    // dV (keys r0.., hs) += Pᵀ · dout and dK += dSᵀ · q: Pᵀ(key, t) = P[t·ld + key] is
    // column-major.
    for (int n = 0; n < hs / 16; ++n) {
      frag_acc acc_v, acc_k;
      float* dv_tile = sdv + r0 * L::ld_a + n * 16;
      float* dk_tile = sdk + r0 * L::ld_a + n * 16;
      wmma::load_matrix_sync(acc_v, dv_tile, L::ld_a, wmma::mem_row_major);
      wmma::load_matrix_sync(acc_k, dk_tile, L::ld_a, wmma::mem_row_major);
      for (int kk = 0; kk < block_q / 16; ++kk) {
        frag_a_col fp, fds;
        frag_b_row fdy, fq;
        wmma::load_matrix_sync(fp, sp + kk * 16 * L::ld_p + r0, L::ld_p);
        wmma::load_matrix_sync(fds, sds + kk * 16 * L::ld_p + r0, L::ld_p);
        wmma::load_matrix_sync(fdy, sdy + kk * 16 * L::ld_h + n * 16, L::ld_h);
        wmma::load_matrix_sync(fq, sq + kk * 16 * L::ld_h + n * 16, L::ld_h);
        wmma::mma_sync(acc_v, fp, fdy, acc_v);
        wmma::mma_sync(acc_k, fds, fq, acc_k);
      }
      wmma::store_matrix_sync(dv_tile, acc_v, L::ld_a, wmma::mem_row_major);
      wmma::store_matrix_sync(dk_tile, acc_k, L::ld_a, wmma::mem_row_major);
    }
    // dQ (rows r0.., hs) += dS · k, 64 columns at a time through this warp's strip of ss (its
    // dP is already consumed), then atomically into the fp32 accumulator.
    for (int n0 = 0; n0 < hs; n0 += block_k) {
      for (int n = 0; n < block_k / 16; ++n) {
        frag_acc acc;
        wmma::fill_fragment(acc, 0.0f);
        for (int kk = 0; kk < block_k / 16; ++kk) {
          frag_a_row fds;
          frag_b_row fk;
          wmma::load_matrix_sync(fds, sds + r0 * L::ld_p + kk * 16, L::ld_p);
          wmma::load_matrix_sync(fk, sk + kk * 16 * L::ld_h + n0 + n * 16, L::ld_h);
          wmma::mma_sync(acc, fds, fk, acc);
        }
        wmma::store_matrix_sync(ss + r0 * L::ld_s + n * 16, acc, L::ld_s, wmma::mem_row_major);
      }
      __syncwarp();
      for (int i = lane; i < 16 * block_k; i += warp_size) {
        const int r = r0 + i / block_k, c = i % block_k, t = q0 + r;
        if (t < T) atomicAdd(dq + std::int64_t(t) * C + n0 + c, ss[r * L::ld_s + c]);
      }
      __syncwarp();
    }
  }
  __syncthreads();
  constexpr int chunks = hs / pack;
  for (int i = threadIdx.x; i < block_k * chunks; i += blockDim.x) {
    const int c = i / chunks, d = (i % chunks) * pack, j = k0 + c;
    if (j >= T) continue;
    bf16x8 xk, xv;
    for (int e = 0; e < pack; ++e) {
      xk.v[e] = __float2bfloat16(sdk[c * L::ld_a + d + e]);
      xv.v[e] = __float2bfloat16(sdv[c * L::ld_a + d + e]);
    }
    store8(dqkv + head + std::int64_t(j) * row + C + d, xk);
    store8(dqkv + head + std::int64_t(j) * row + 2 * C + d, xv);
  }
}

/// dqkv[:, :, 0:C] (bf16) = dq_accum (B, T, C) fp32.
template <class Accum>
__global__ void flash_attention_dq_kernel(bf16_t* dqkv, const Accum* dq_accum, int BT, int C) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= std::int64_t(BT) * C) return;
  const std::int64_t r = i / C, c = i % C;
  dqkv[r * 3 * C + c] = __float2bfloat16(dq_accum[i]);
}

namespace flash {

/// Throws config_error unless the kernels can run this shape on these pointers.
inline void can_implement(const void* qkv, const void* other, int B, int T, int C, int H) {
  const char* name = "flash_attention";
  require(B > 0 && T > 0 && H > 0, name, "B, T and H must be positive");
  require(C % H == 0, name, [&] { return "C = " + std::to_string(C) + " is not a multiple of H"; });
  const int hs = C / H;
  require(hs == 64 || hs == 128, name,
          [&] { return "head size " + std::to_string(hs) + " (only 64 and 128 are built)"; });
  require(aligned_to(qkv, 16) && aligned_to(other, 16), name,
          "qkv, out and dout must be 16-byte aligned");
}

template <class Kernel>
inline void opt_in_shared(Kernel kernel, std::size_t bytes) {
  TRAINKIT_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

template <int hs>
void forward(bf16_t* out, float* lse, const bf16_t* qkv, int B, int T, int C, int H,
             cudaStream_t stream) {
  constexpr std::size_t bytes = forward_smem<hs>::bytes;
  opt_in_shared(flash_attention_forward_kernel<hs>, bytes);
  const dim3 grid(detail::flash_tile_count(T, block_q), B * H);
  flash_attention_forward_kernel<hs><<<grid, threads, bytes, stream>>>(out, lse, qkv, T, C, H);
  TRAINKIT_CUDA_CHECK_LAUNCH("flash_attention_forward_kernel");
}

template <int hs>
void backward(bf16_t* dqkv, float* delta, float* dq_accum, const bf16_t* dout, const bf16_t* qkv,
              const bf16_t* out, const float* lse, int B, int T, int C, int H,
              cudaStream_t stream) {
  const std::int64_t rows = std::int64_t(B) * T * H;
  flash_attention_delta_kernel<hs>
      <<<ceil_div(std::size_t(rows) * warp_size, 256), 256, 0, stream>>>(delta, dout, out, B, T, C,
                                                                         H);
  TRAINKIT_CUDA_CHECK_LAUNCH("flash_attention_delta_kernel");
  TRAINKIT_CUDA_CHECK(cudaMemsetAsync(dq_accum, 0, std::size_t(B) * T * C * sizeof(float), stream));
  constexpr std::size_t bytes = backward_smem<hs>::bytes;
  opt_in_shared(flash_attention_backward_kernel<hs>, bytes);
  const dim3 grid(detail::flash_tile_count(T, block_k), B * H);
  flash_attention_backward_kernel<hs>
      <<<grid, threads, bytes, stream>>>(dqkv, dq_accum, dout, qkv, lse, delta, T, C, H);
  TRAINKIT_CUDA_CHECK_LAUNCH("flash_attention_backward_kernel");
  const std::size_t n = std::size_t(B) * T * C;
  flash_attention_dq_kernel<float><<<ceil_div(n, 256), 256, 0, stream>>>(dqkv, dq_accum, B * T, C);
  TRAINKIT_CUDA_CHECK_LAUNCH("flash_attention_dq_kernel");
}

}  // namespace flash

/// Causal attention forward: out (B, T, C) and lse (B, H, T) fp32 from qkv (B, T, 3C), head size
/// C / H of 64 or 128. lse is what the backward needs besides qkv and out.
inline void flash_attention_forward(bf16_t* out, float* lse, const bf16_t* qkv, int B, int T, int C,
                                    int H, cudaStream_t stream) {
  flash::can_implement(qkv, out, B, T, C, H);
  if (C / H == 64)
    flash::forward<64>(out, lse, qkv, B, T, C, H, stream);
  else
    flash::forward<128>(out, lse, qkv, B, T, C, H, stream);
}

/// Causal attention backward: dqkv (B, T, 3C) assigned. Scratch: delta (B, H, T) fp32 and
/// dq_accum (B, T, C) fp32.
inline void flash_attention_backward(bf16_t* dqkv, float* delta, float* dq_accum,
                                     const bf16_t* dout, const bf16_t* qkv, const bf16_t* out,
                                     const float* lse, int B, int T, int C, int H,
                                     cudaStream_t stream) {
  flash::can_implement(qkv, dout, B, T, C, H);
  require(aligned_to(dqkv, 16) && aligned_to(out, 16), "flash_attention",
          "dqkv and out must be 16-byte aligned");
  if (C / H == 64)
    flash::backward<64>(dqkv, delta, dq_accum, dout, qkv, out, lse, B, T, C, H, stream);
  else
    flash::backward<128>(dqkv, delta, dq_accum, dout, qkv, out, lse, B, T, C, H, stream);
}

}  // namespace trainkit::model::kernels
