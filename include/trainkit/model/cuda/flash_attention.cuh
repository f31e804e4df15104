// trainkit/model/cuda/flash_attention.cuh — trainkit's own causal flash attention, forward and
// backward, without a T×T matrix.
//
// bf16 in and out, fp32 accumulation on tensor cores. The tiling, the base-2 online softmax and
// the saved log-sum-exp are those of the CPU twin detail/flash_attention_reference.hpp, which is
// tested against the naive attention; the twin's header comment states the algorithm. Reads q,
// k, v straight from the QKV GEMM's (B, T, (H + 2·KV)·hs) output and writes (B, T, C), C = H·hs:
// no permute kernels. Grouped-query attention (KV < H, detail/attention_heads.hpp): query head h
// reads k, v head h / (H / KV); GPT-2 is KV = H, 3C a row.
//
// Forward, in the manner of FlashAttention-2 (Dao 2023, §3.1): one block of 4 warps per (query
// tile of 64 rows, batch·head), warp w owns rows 16w..16w+15 and keeps everything of them in
// registers: Q as mma A fragments (loaded once), S = Q·Kᵀ as eight m16n8 fp32 accumulators, the
// running max and sum of its two rows per lane (row statistics reduce over the quad with two
// `shfl.xor`), O as hs/8 accumulators. P is rounded to bf16 straight from S's accumulators into
// the A fragments of P·V (an m16n8 accumulator pair is exactly one A fragment: no shared memory
// round trip). Products are `mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32` (inline PTX); operands
// come from shared memory by `ldmatrix` (`.trans` for V) out of unpadded tiles whose 16-byte
// chunks are XOR-swizzled, so neither ldmatrix nor the copies meet bank conflicts. K and V tiles
// arrive by `cp.async` into two stages: tile j+1 is in flight while tile j is multiplied; rows
// past T are zero-filled by the copy. Only the diagonal key tile is masked; later tiles are never
// visited. The index arithmetic (swizzle, ldmatrix lane addresses, accumulator rows and columns,
// the diagonal test) lives in detail/flash_mma_layout.hpp, shared with a lane-level CPU
// emulation of this kernel (tests/cuda/flash_mma_port.hpp). Shared memory: Q + 2 × (K, V) =
// 40 KiB (hs 64) / 80 KiB (hs 128), where the WMMA version needed 71 / 111 KiB.
// Backward: a pre-pass computes D = rowsum(dout ∘ out); one block per (key tile, batch·KV head)
// keeps dK and dV in shared fp32 and visits, for each query head of the group in turn, the query
// tiles that see its keys (detail::flash_backward_visit), recomputing P from the saved
// log-sum-exp, so dK and dV sum over the group in fp32 and are written once, without atomics; dQ is
// added with fp32 atomics into a (B, T, C) float buffer that a last pass rounds into dqkv. Products
// through WMMA (16×16×16 bf16) on padded tiles; all tiles arrive by cp.async (zero-filled past T).
// Where a second stage of the q and dout tiles fits without losing a block per SM (hs 128: 170 →
// 204 KiB, one block either way), the next query tile's q and dout are prefetched while this one is
// worked on; at hs 64 (105.5 KiB, two blocks per SM) a second stage (+18 KiB) would leave one block
// per SM, so it is not taken.
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
#include "trainkit/model/detail/attention_heads.hpp"
#include "trainkit/model/detail/flash_attention_reference.hpp"
#include "trainkit/model/detail/flash_mma_layout.hpp"

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

// Q, then K and V in two stages each; tiles are block_q × hs bf16 without padding (swizzled).
template <int hs>
struct forward_smem {
  static constexpr std::size_t tile = std::size_t(block_q) * hs * 2;
  static constexpr std::size_t q = 0;
  static constexpr std::size_t k = q + tile;      // stages at k and k + tile
  static constexpr std::size_t v = k + 2 * tile;  // stages at v and v + tile
  static constexpr std::size_t bytes = v + 2 * tile;
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
  static constexpr std::size_t one_stage = delta + block_q * 4;
  // A second stage of q and dout for the next query tile, taken only where it costs no block
  // per SM (Hopper: 228 KiB per SM, 1 KiB reserved per block, at most 227 KiB per block).
  static constexpr std::size_t stage_bytes = 2 * std::size_t(block_q) * ld_h * 2;
  static constexpr int blocks_per_sm(std::size_t b) { return int(228 * 1024 / (b + 1024)); }
  static constexpr bool prefetch =
      one_stage + stage_bytes <= 227 * 1024 &&
      blocks_per_sm(one_stage + stage_bytes) == blocks_per_sm(one_stage);
  static constexpr std::size_t q_next = one_stage;  // used only when prefetch
  static constexpr std::size_t dy_next = q_next + std::size_t(block_q) * ld_h * 2;
  static constexpr std::size_t bytes = prefetch ? one_stage + stage_bytes : one_stage;
};
static_assert(backward_smem<64>::blocks_per_sm(backward_smem<64>::bytes) == 2,
              "two hs-64 backward blocks must fit one SM");
static_assert(!backward_smem<64>::prefetch && backward_smem<128>::prefetch,
              "the prefetch choice the header comment and docs/cuda.md describe");

namespace lay = detail::flash_mma;

__device__ inline std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global → shared without passing through registers; `valid` false writes zeros (the
// source is not read: a garbage V row times a zero probability could be NaN).
__device__ inline void copy16_async(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ inline void commit_copies() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Wait until at most `Pending` committed groups of this thread are still in flight.
template <int Pending>
__device__ inline void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

// block_q × hs bf16 from a (·, stride) matrix starting at row `first` into a swizzled shared tile
// (lay::swizzled); rows at or past T become zeros.
template <int hs>
__device__ inline void copy_tile_async(bf16_t* dst, const bf16_t* src, std::int64_t stride,
                                       int first, int T) {
  constexpr int per_thread = block_q * hs / lay::chunk / threads;
  static_assert(per_thread * threads * lay::chunk == block_q * hs);
#pragma unroll
  for (int i = 0; i < per_thread; ++i) {
    const int r = lay::copy_row(int(threadIdx.x), i, threads, hs);
    const int c = lay::copy_col(int(threadIdx.x), i, threads, hs);
    const bool valid = first + r < T;
    copy16_async(dst + lay::swizzled(r, c, hs),
                 src + std::int64_t(valid ? first + r : 0) * stride + c, valid);
  }
}

// block_q × hs bf16 into a padded shared tile (rows hs + pad_h long, for WMMA): the same chunk
// per thread as copy_tile_async (lay::copy_row/copy_col), unswizzled.
template <int hs>
__device__ inline void copy_padded_tile_async(bf16_t* dst, const bf16_t* src, std::int64_t stride,
                                              int first, int T) {
  constexpr int per_thread = block_q * hs / lay::chunk / threads;
  static_assert(per_thread * threads * lay::chunk == block_q * hs);
#pragma unroll
  for (int i = 0; i < per_thread; ++i) {
    const int r = lay::copy_row(int(threadIdx.x), i, threads, hs);
    const int c = lay::copy_col(int(threadIdx.x), i, threads, hs);
    const bool valid = first + r < T;
    copy16_async(dst + r * (hs + pad_h) + c, src + std::int64_t(valid ? first + r : 0) * stride + c,
                 valid);
  }
}

// ldmatrix .x4: four 8 × 8 bf16 matrices, lanes 8j..8j+7 giving the row addresses of matrix j.
__device__ inline void ldmatrix_x4(std::uint32_t (&r)[4], const bf16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}
__device__ inline void ldmatrix_x4_trans(std::uint32_t (&r)[4], const bf16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}

// d (16 × 8 fp32) += a (16 × 16 bf16, row) · b (16 × 8 bf16, col).
__device__ inline void mma_m16n8k16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                    std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats rounded to bf16 in one register, `lo` in the low half (the lower column of a
// fragment pair).
__device__ inline std::uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  std::uint32_t r;
  memcpy(&r, &v, sizeof r);
  return r;
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

/// Forward: out (B, T, C) bf16 and lse (B, H, T) fp32 (natural log) from qkv
/// (B, T, (H + 2·KV)·hs).
template <int hs>
__global__ void __launch_bounds__(flash::threads)
    flash_attention_forward_kernel(bf16_t* out, float* lse, const bf16_t* qkv, int T, int C, int H,
                                   int KV) {
  using namespace flash;
  using L = forward_smem<hs>;
  static_assert(block_q == block_k, "one tile size for Q, K and V");
  constexpr int tile = block_q * hs;  // elements
  extern __shared__ __align__(128) unsigned char smem[];
  bf16_t* sq = reinterpret_cast<bf16_t*>(smem + L::q);
  bf16_t* sk = reinterpret_cast<bf16_t*>(smem + L::k);
  bf16_t* sv = reinterpret_cast<bf16_t*>(smem + L::v);

  // The last query tiles visit the most key tiles: launch them first so they do not finish last.
  const int qt = int(gridDim.x) - 1 - int(blockIdx.x);
  const int bh = blockIdx.y, b = bh / H, h = bh % H;
  const int q0 = qt * block_q, last = detail::flash_last_key_tile(qt);
  const detail::attention_heads heads{H, KV, hs};
  const std::int64_t row = heads.row();
  const bf16_t* base = qkv + std::int64_t(b) * T * row;
  const bf16_t* q = base + heads.q_col(h);
  const bf16_t* k = base + heads.k_col(h);  // the group's k, v head
  const bf16_t* v = base + heads.v_col(h);
  const int warp = threadIdx.x / warp_size, lane = threadIdx.x % warp_size;
  const int r0 = warp * 16;  // this warp's rows of the tile
  const float scale_log2 = rsqrtf(float(hs)) * log2e;

  copy_tile_async<hs>(sq, q, row, q0, T);
  copy_tile_async<hs>(sk, k, row, 0, T);
  copy_tile_async<hs>(sv, v, row, 0, T);
  commit_copies();

  std::uint32_t qa[hs / 16][4];         // this warp's Q strip, A fragments per 16 dims
  float o[hs / 8][4] = {};              // O (16 × hs)
  float m[2] = {-INFINITY, -INFINITY};  // running max of rows lane/4 and lane/4 + 8 (base 2)
  float l[2] = {0.0f, 0.0f};            // this lane's share of their running sums

  for (int kt = 0; kt <= last; ++kt) {
    const int stage = kt & 1;
    // The next K, V tiles into the other stage, whose readers passed the barrier at the end of
    // the previous iteration; then wait for this tile's group only.
    if (kt < last) {
      copy_tile_async<hs>(sk + (stage ^ 1) * tile, k, row, (kt + 1) * block_k, T);
      copy_tile_async<hs>(sv + (stage ^ 1) * tile, v, row, (kt + 1) * block_k, T);
      commit_copies();
      wait_copies<1>();
    } else {
      wait_copies<0>();
    }
    __syncthreads();
    if (kt == 0) {
#pragma unroll
      for (int kk = 0; kk < hs / 16; ++kk)
        ldmatrix_x4(qa[kk], sq + lay::swizzled(r0 + lay::ldsm_a_row(lane),
                                               16 * kk + lay::ldsm_a_col(lane), hs));
    }
    const bf16_t* ks = sk + stage * tile;
    const bf16_t* vs = sv + stage * tile;

    // S (16 × 64) = Q strip · Kᵀ.
    float s[block_k / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < hs / 16; ++kk)
#pragma unroll
      for (int np = 0; np < block_k / 16; ++np) {
        std::uint32_t kb[4];
        ldmatrix_x4(kb, ks + lay::swizzled(16 * np + lay::ldsm_bt_row(lane),
                                           16 * kk + lay::ldsm_bt_col(lane), hs));
        mma_m16n8k16(s[2 * np], qa[kk], kb[0], kb[1]);
        mma_m16n8k16(s[2 * np + 1], qa[kk], kb[2], kb[3]);
      }

    // Base 2, the causal mask on the diagonal tile only, row maxima over the quad.
    const bool diagonal = kt == qt;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < block_k / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float x = s[n][i] * scale_log2;
        if (diagonal &&
            !lay::diagonal_visible(r0 + lay::acc_row(lane, i), 8 * n + lay::acc_col(lane, i)))
          x = -INFINITY;
        s[n][i] = x;
        mx[i / 2] = fmaxf(mx[i / 2], x);
      }
    float corr[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      mx[half] = fmaxf(mx[half], __shfl_xor_sync(full_mask, mx[half], 1));
      mx[half] = fmaxf(mx[half], __shfl_xor_sync(full_mask, mx[half], 2));
      // Column k0 ≤ t of every visited tile is unmasked: the new maximum is finite.
      const float m_new = fmaxf(m[half], mx[half]);
      corr[half] = exp2f(m[half] - m_new);
      m[half] = m_new;
    }
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < block_k / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        s[n][i] = exp2f(s[n][i] - m[i / 2]);
        sum[i / 2] += s[n][i];
      }
#pragma unroll
    for (int half = 0; half < 2; ++half) l[half] = l[half] * corr[half] + sum[half];
#pragma unroll
    for (int n = 0; n < hs / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[n][i] *= corr[i / 2];

        // O += P · V: the accumulators of key columns 16kk..16kk+15 are one A fragment.
#pragma unroll
    for (int kk = 0; kk < block_k / 16; ++kk) {
      const std::uint32_t pa[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]),
                                   pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                                   pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < hs / 16; ++dp) {
        std::uint32_t vb[4];
        ldmatrix_x4_trans(vb, vs + lay::swizzled(16 * kk + lay::ldsm_a_row(lane),
                                                 16 * dp + lay::ldsm_a_col(lane), hs));
        mma_m16n8k16(o[2 * dp], pa, vb[0], vb[1]);
        mma_m16n8k16(o[2 * dp + 1], pa, vb[2], vb[3]);
      }
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }

  // Row sums over the quad; out = O / l as bf16 pairs, lse = (m + log2 l)·ln 2.
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    l[half] += __shfl_xor_sync(full_mask, l[half], 1);
    l[half] += __shfl_xor_sync(full_mask, l[half], 2);
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int t = q0 + r0 + lay::acc_row(lane, 2 * half);
    if (t >= T) continue;
    const float inv = 1.0f / l[half];
    bf16_t* y = out + (std::int64_t(b) * T + t) * C + std::int64_t(h) * hs;
#pragma unroll
    for (int n = 0; n < hs / 8; ++n) {
      *reinterpret_cast<__nv_bfloat162*>(y + 8 * n + lay::acc_col(lane, 2 * half)) =
          __floats2bfloat162_rn(o[n][2 * half] * inv, o[n][2 * half + 1] * inv);
    }
    if (lay::acc_col(lane, 2 * half) == 0)
      lse[std::int64_t(bh) * T + t] = (m[half] + log2f(l[half])) * ln2;
  }
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

/// Backward: dk, dv written into dqkv (B, T, (H + 2·KV)·hs), summed over the group; dq added
/// into dq_accum (B, T, C) fp32, which must be zero on entry.
template <int hs>
__global__ void __launch_bounds__(flash::threads)
    flash_attention_backward_kernel(bf16_t* dqkv, float* dq_accum, const bf16_t* dout,
                                    const bf16_t* qkv, const float* lse, const float* delta, int T,
                                    int C, int H, int KV) {
  using namespace flash;
  using L = backward_smem<hs>;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16_t* sk = reinterpret_cast<bf16_t*>(smem + L::k);
  bf16_t* sv = reinterpret_cast<bf16_t*>(smem + L::v);
  // q and dout of the query tile in hand; with prefetch, stage 1 receives the next one.
  // (selected, not indexed: an indexed pointer array would live in local memory)
  auto sq_stage = [&](int stage) {
    return reinterpret_cast<bf16_t*>(smem + (stage ? L::q_next : L::q));
  };
  auto sdy_stage = [&](int stage) {
    return reinterpret_cast<bf16_t*>(smem + (stage ? L::dy_next : L::dy));
  };
  float* ss = reinterpret_cast<float*>(smem + L::s);
  bf16_t* sp = reinterpret_cast<bf16_t*>(smem + L::p);
  bf16_t* sds = reinterpret_cast<bf16_t*>(smem + L::ds);
  float* sdk = reinterpret_cast<float*>(smem + L::dk);
  float* sdv = reinterpret_cast<float*>(smem + L::dv);
  float* slse = reinterpret_cast<float*>(smem + L::lse);
  float* sdelta = reinterpret_cast<float*>(smem + L::delta);

  // The first key tiles are seen by the most query tiles: launch them first.
  const int kt = blockIdx.x;
  const int bg = blockIdx.y, b = bg / KV, g = bg % KV;  // batch row, k and v head
  const int k0 = kt * block_k;
  const detail::attention_heads heads{H, KV, hs};
  const std::int64_t row = heads.row();
  const std::int64_t batch = std::int64_t(b) * T * row;
  const bf16_t* k = qkv + batch + heads.k_col_of(g);
  const bf16_t* v = qkv + batch + heads.v_col_of(g);
  // Query head h's q, dout, dq accumulator and (B, H, T) statistics.
  auto q_of = [&](int h) { return qkv + batch + heads.q_col(h); };
  auto dy_of = [&](int h) { return dout + std::int64_t(b) * T * C + heads.q_col(h); };
  auto stats_of = [&](int h) { return (std::int64_t(b) * H + h) * T; };
  const int warp = threadIdx.x / warp_size, lane = threadIdx.x % warp_size;
  const int r0 = warp * 16;  // this warp's query rows of S, and its keys of dK and dV
  const float scale = rsqrtf(float(hs));
  const float scale_log2 = scale * log2e;

  const int first_qt = detail::flash_first_query_tile(kt);
  const int query_tiles = detail::flash_tile_count(T, block_q);
  // (query head of the group, query tile) pairs, heads in turn: dK and dV collect the group.
  const int steps = heads.group() * (query_tiles - first_qt);
  const int h0 = heads.first_query_head(g);
  copy_padded_tile_async<hs>(sk, k, row, k0, T);
  copy_padded_tile_async<hs>(sv, v, row, k0, T);
  copy_padded_tile_async<hs>(sq_stage(0), q_of(h0), row, first_qt * block_q, T);
  copy_padded_tile_async<hs>(sdy_stage(0), dy_of(h0), C, first_qt * block_q, T);
  commit_copies();
  for (int i = threadIdx.x; i < block_k * L::ld_a; i += blockDim.x) sdk[i] = sdv[i] = 0.0f;

  for (int step = 0; step < steps; ++step) {
    const detail::flash_backward_step at =
        detail::flash_backward_visit(step, first_qt, query_tiles);
    const int h = h0 + at.member, q0 = at.qt * block_q;
    const bf16_t* q = q_of(h);
    const bf16_t* dy = dy_of(h);
    float* dq = dq_accum + std::int64_t(b) * T * C + heads.q_col(h);
    const int stage = L::prefetch ? step & 1 : 0;
    __syncthreads();  // the previous query tile is done with (its q, dout, lse and D)
    const bool next = L::prefetch && step + 1 < steps;
    if (!L::prefetch && step > 0) {
      copy_padded_tile_async<hs>(sq_stage(0), q, row, q0, T);
      copy_padded_tile_async<hs>(sdy_stage(0), dy, C, q0, T);
      commit_copies();
    }
    if (next) {  // the next query tile's q and dout land while this one is worked on
      const detail::flash_backward_step to =
          detail::flash_backward_visit(step + 1, first_qt, query_tiles);
      copy_padded_tile_async<hs>(sq_stage(stage ^ 1), q_of(h0 + to.member), row, to.qt * block_q,
                                 T);
      copy_padded_tile_async<hs>(sdy_stage(stage ^ 1), dy_of(h0 + to.member), C, to.qt * block_q,
                                 T);
      commit_copies();
    }
    const std::int64_t stats = stats_of(h);
    for (int r = threadIdx.x; r < block_q; r += blockDim.x) {
      const bool real = q0 + r < T;
      slse[r] = real ? lse[stats + q0 + r] * log2e : 0.0f;  // base 2
      sdelta[r] = real ? delta[stats + q0 + r] : 0.0f;
    }
    if (next)
      wait_copies<1>();
    else
      wait_copies<0>();
    __syncthreads();
    const bf16_t* sq = sq_stage(stage);
    const bf16_t* sdy = sdy_stage(stage);

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
    store8(dqkv + batch + std::int64_t(j) * row + heads.k_col_of(g) + d, xk);
    store8(dqkv + batch + std::int64_t(j) * row + heads.v_col_of(g) + d, xv);
  }
}

/// dqkv[:, :, 0:C] (bf16, rows `row` apart) = dq_accum (B, T, C) fp32.
template <class Accum>
__global__ void flash_attention_dq_kernel(bf16_t* dqkv, const Accum* dq_accum, int BT, int C,
                                          int row) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= std::int64_t(BT) * C) return;
  const std::int64_t r = i / C, c = i % C;
  dqkv[r * row + c] = __float2bfloat16(dq_accum[i]);
}

namespace flash {

/// Throws config_error unless the kernels can run this shape on these pointers.
inline void can_implement(const void* qkv, const void* other, int B, int T, int C, int H, int KV) {
  const char* name = "flash_attention";
  require(B > 0 && T > 0 && H > 0 && KV > 0, name, "B, T, H and KV must be positive");
  require(C % H == 0, name, [&] { return "C = " + std::to_string(C) + " is not a multiple of H"; });
  require(H % KV == 0, name, [&] {
    return "H = " + std::to_string(H) +
           " query heads is not a multiple of KV = " + std::to_string(KV) + " key/value heads";
  });
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
void forward(bf16_t* out, float* lse, const bf16_t* qkv, int B, int T, int C, int H, int KV,
             cudaStream_t stream) {
  constexpr std::size_t bytes = forward_smem<hs>::bytes;
  opt_in_shared(flash_attention_forward_kernel<hs>, bytes);
  const dim3 grid(detail::flash_tile_count(T, block_q), B * H);
  flash_attention_forward_kernel<hs><<<grid, threads, bytes, stream>>>(out, lse, qkv, T, C, H, KV);
  TRAINKIT_CUDA_CHECK_LAUNCH("flash_attention_forward_kernel");
}

template <int hs>
void backward(bf16_t* dqkv, float* delta, float* dq_accum, const bf16_t* dout, const bf16_t* qkv,
              const bf16_t* out, const float* lse, int B, int T, int C, int H, int KV,
              cudaStream_t stream) {
  const std::int64_t rows = std::int64_t(B) * T * H;
  flash_attention_delta_kernel<hs>
      <<<ceil_div(std::size_t(rows) * warp_size, 256), 256, 0, stream>>>(delta, dout, out, B, T, C,
                                                                         H);
  TRAINKIT_CUDA_CHECK_LAUNCH("flash_attention_delta_kernel");
  TRAINKIT_CUDA_CHECK(cudaMemsetAsync(dq_accum, 0, std::size_t(B) * T * C * sizeof(float), stream));
  constexpr std::size_t bytes = backward_smem<hs>::bytes;
  opt_in_shared(flash_attention_backward_kernel<hs>, bytes);
  const dim3 grid(detail::flash_tile_count(T, block_k), B * KV);
  flash_attention_backward_kernel<hs>
      <<<grid, threads, bytes, stream>>>(dqkv, dq_accum, dout, qkv, lse, delta, T, C, H, KV);
  TRAINKIT_CUDA_CHECK_LAUNCH("flash_attention_backward_kernel");
  const std::size_t n = std::size_t(B) * T * C;
  flash_attention_dq_kernel<float>
      <<<ceil_div(n, 256), 256, 0, stream>>>(dqkv, dq_accum, B * T, C, (H + 2 * KV) * (C / H));
  TRAINKIT_CUDA_CHECK_LAUNCH("flash_attention_dq_kernel");
}

}  // namespace flash

/// Causal attention forward: out (B, T, C) and lse (B, H, T) fp32 from qkv
/// (B, T, (H + 2·KV)·hs), head size hs = C / H of 64 or 128, KV dividing H (KV = H: GPT-2's
/// (B, T, 3C)). lse is what the backward needs besides qkv and out.
inline void flash_attention_forward(bf16_t* out, float* lse, const bf16_t* qkv, int B, int T, int C,
                                    int H, int KV, cudaStream_t stream) {
  flash::can_implement(qkv, out, B, T, C, H, KV);
  if (C / H == 64)
    flash::forward<64>(out, lse, qkv, B, T, C, H, KV, stream);
  else
    flash::forward<128>(out, lse, qkv, B, T, C, H, KV, stream);
}

/// Causal attention backward: dqkv (B, T, (H + 2·KV)·hs) assigned, dk and dv summed over each
/// group of H / KV query heads. Scratch: delta (B, H, T) fp32 and dq_accum (B, T, C) fp32.
inline void flash_attention_backward(bf16_t* dqkv, float* delta, float* dq_accum,
                                     const bf16_t* dout, const bf16_t* qkv, const bf16_t* out,
                                     const float* lse, int B, int T, int C, int H, int KV,
                                     cudaStream_t stream) {
  flash::can_implement(qkv, dout, B, T, C, H, KV);
  require(aligned_to(dqkv, 16) && aligned_to(out, 16), "flash_attention",
          "dqkv and out must be 16-byte aligned");
  if (C / H == 64)
    flash::backward<64>(dqkv, delta, dq_accum, dout, qkv, out, lse, B, T, C, H, KV, stream);
  else
    flash::backward<128>(dqkv, delta, dq_accum, dout, qkv, out, lse, B, T, C, H, KV, stream);
}

}  // namespace trainkit::model::kernels
