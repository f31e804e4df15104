// trainkit/model/cuda/flash_attention.cuh — trainkit's own causal flash attention, forward and
// backward, without a T×T matrix.
//
// bf16 in and out, fp32 accumulation on tensor cores. The tiling, the base-2 online softmax and the
// saved log-sum-exp are those of the CPU twin detail/flash_attention_reference.hpp, which is tested
// against the naive attention; the twin's header comment states the algorithm. Reads q, k, v
// straight from the QKV GEMM's (B, T, (H + 2·KV)·hs) output and writes (B, T, C), C = H·hs: no
// permute kernels. Grouped-query attention (KV < H, detail/attention_heads.hpp): query head h reads
// k, v head h / (H / KV); GPT-2 is KV = H, 3C a row.
//
// Forward, in the manner of FlashAttention-2 (Dao 2023, §3.1): one block of 4 warps per (query
// tile, batch·head); a warp owns 32 query rows at hs 64 (two m16 row groups, 128-row blocks: each K
// and V fragment serves both) and 16 at hs 128 (where two groups would spill), and keeps everything
// of each row group in registers: Q as mma A fragments (loaded once), S = Q·Kᵀ as eight m16n8 fp32
// accumulators, the running max and sum of its two rows per lane (row statistics reduce over the
// quad with two `shfl.xor`), O as hs/8 accumulators. P is rounded to bf16 straight from S's
// accumulators into the A fragments of P·V (an m16n8 accumulator pair is exactly one A fragment: no
// shared memory round trip). Products are `mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32` (inline
// PTX); operands come from shared memory by `ldmatrix` (`.trans` for V) out of unpadded tiles whose
// 16-byte chunks are XOR-swizzled, so neither ldmatrix nor the copies meet bank conflicts. K and V
// tiles arrive by `cp.async` into two stages: tile j+1 is in flight while tile j is multiplied;
// rows past T are zero-filled by the copy. Only key tiles crossing a row group's first row are
// masked; tiles past the block's last real query are never visited. The index arithmetic (swizzle,
// ldmatrix lane addresses, accumulator rows and columns, rows per warp, the last key tile, the
// causal test) lives in detail/flash_mma_layout.hpp, shared with a lane-level CPU emulation of this
// kernel (tests/cuda/flash_mma_port.hpp). Shared memory: Q + 2 × (K, V) = 48 KiB (hs 64, 128 query
// rows) / 80 KiB (hs 128), where the WMMA version needed 71 / 111 KiB.
//
// Backward, in the same style: a pre-pass computes D = rowsum(dout ∘ out); one block of 4 warps per
// (key tile, batch·KV head) visits, for each query head of the group in turn, the query tiles that
// see its keys (detail::flash_backward_visit), recomputing P from the saved log-sum-exp. Warp w
// owns keys 16w..16w+15 and works transposed (Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ), so Pᵀ and dSᵀ are register
// accumulators whose pairs are the A fragments of dV += Pᵀ·dO and dK += dSᵀ·Q: S, P, dP, dS, dK and
// dV never touch shared memory, and dK, dV sum over the group in fp32 and are written once, without
// atomics. dQ = dS·K takes dSᵀ through one small swizzled bf16 tile (ldmatrix .trans) and is added
// with fp32 atomics into a (B, T, C) float buffer that a last pass rounds into dqkv. mma.sync and
// ldmatrix from swizzled tiles as the forward; K and V stay, Q and dO arrive by cp.async into two
// stages (the next query tile lands while this one is worked on). Index arithmetic:
// detail/flash_mma_backward_layout.hpp, shared with the lane-level emulation
// tests/cuda/flash_mma_backward_port.hpp. Shared memory: 56.5 KiB (hs 64) / 104.5 KiB (hs 128),
// where the WMMA version with shared fp32 S, dP, dK, dV needed 105.5 / 204 KiB (one hs-128 block
// per SM; now two).
//
// Sliding window (the speedrun recipe's short layers; model/recipe/sliding_window_attention.hpp):
// a per-call `window` W > 0 has query i see keys i − W < j ≤ i. Each kernel has a windowed
// instantiation (template flag; W = 0 or ≥ T runs the windowless code, bit for bit today's): the
// forward starts at the key tile holding its block's first query's first visible key
// (lay::forward_first_key_tile) and the backward stops after the last query tile that reaches its
// key tile (bl::end_query_tile), so tiles wholly outside the window are skipped, not masked; the
// element test runs only where a row group (forward) or a warp's key strip (backward) crosses the
// diagonal or the window's left edge (lay::needs_window_mask). A windowed forward row may see no
// key of its first tiles, so its running max starts at −FLT_MAX instead of −inf (P = 2^−inf = 0,
// no −inf − −inf). The lane-level emulations take the window too (test_model_flash_window_port).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <string>

#include "trainkit/core/cuda/bf16.cuh"
#include "trainkit/core/cuda/block_reduce.cuh"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/launch_checks.hpp"
#include "trainkit/model/detail/attention_heads.hpp"
#include "trainkit/model/detail/flash_attention_reference.hpp"
#include "trainkit/model/detail/flash_mma_backward_layout.hpp"
#include "trainkit/model/detail/flash_mma_layout.hpp"

namespace trainkit::model::kernels {

using namespace trainkit::cuda;  // bf16 packs, reductions, launch checks

namespace flash {

using tiles = detail::flash_tiles;
inline constexpr int block_q = tiles::block_q;
inline constexpr int block_k = tiles::block_k;
inline constexpr int warps = block_q / 16;  // 4: a warp per 16 keys (backward), 16·groups rows
inline constexpr int threads = warps * warp_size;
static_assert(block_q == 64 && block_k == 64, "the warp partition below assumes 64×64 tiles");
inline constexpr float log2e = float(detail::flash_log2e);
inline constexpr float ln2 = float(detail::flash_ln2);

// Q (rows × hs: 128 rows at hs 64, 64 at hs 128), then K and V (block_k × hs) in two stages
// each; bf16 without padding (swizzled).
template <int hs>
struct forward_smem {
  static constexpr int rows = detail::flash_mma::forward_block_rows(hs);  // query rows
  static constexpr std::size_t q_tile = std::size_t(rows) * hs * 2;
  static constexpr std::size_t kv_tile = std::size_t(block_k) * hs * 2;
  static constexpr std::size_t q = 0;
  static constexpr std::size_t k = q + q_tile;       // stages at k and k + kv_tile
  static constexpr std::size_t v = k + 2 * kv_tile;  // stages at v and v + kv_tile
  static constexpr std::size_t bytes = v + 2 * kv_tile;
};
static_assert(forward_smem<64>::rows % block_q == 0 && forward_smem<128>::rows % block_q == 0,
              "Q arrives in 64-row parts");

// K and V of the key tile, Q and dO of the query tile in two stages each (tile j+1 lands while tile
// j is worked on), all block_q × hs bf16 swizzled; then the dSᵀ tile (block_k × block_q bf16,
// swizzled) through which dQ = dS·K gets its A operand, and the tile's lse and D. dK and dV live in
// registers, S, P, dP and dS too: 56.5 KiB (hs 64) / 104.5 KiB (hs 128), where the WMMA version
// with its shared fp32 S, dP, dK, dV needed 105.5 / 204 KiB.
template <int hs>
struct backward_smem {
  static constexpr std::size_t tile = std::size_t(block_q) * hs * 2;
  static constexpr std::size_t k = 0;
  static constexpr std::size_t v = k + tile;
  static constexpr std::size_t q = v + tile;       // stages at q and q + tile
  static constexpr std::size_t dy = q + 2 * tile;  // stages at dy and dy + tile
  static constexpr std::size_t ds = dy + 2 * tile;
  static constexpr std::size_t lse = ds + std::size_t(block_k) * block_q * 2;
  static constexpr std::size_t delta = lse + block_q * 4;
  static constexpr std::size_t bytes = delta + block_q * 4;
};
// Hopper: 228 KiB of shared memory per SM, 1 KiB of it reserved per block.
inline constexpr int blocks_per_sm_by_smem(std::size_t bytes) {
  return int(228 * 1024 / (bytes + 1024));
}
static_assert(blocks_per_sm_by_smem(backward_smem<128>::bytes) >= 2,
              "two hs-128 backward blocks must fit one SM's shared memory");
static_assert(blocks_per_sm_by_smem(backward_smem<64>::bytes) >= 3,
              "three hs-64 backward blocks must fit one SM's shared memory");

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

// p[0] += x, p[1] += y in global memory, atomically; p 8-byte aligned. Hopper has a vector fp32
// atomic add (one instruction for the pair, compute capability 9.0 and up).
__device__ inline void add_pair_atomic(float* p, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(p), make_float2(x, y));
#else
  atomicAdd(p, x);
  atomicAdd(p + 1, y);
#endif
}
namespace bl = detail::flash_mma_backward;

// The backward's Sᵀ or dPᵀ (16 rows r0.. of `a` × block_q rows of `b`, both block_q × hs swizzled
// tiles) into m16n8 accumulators: `a`'s A fragments (no .trans) each loaded once, `b`'s rows as
// B operands (bᵀ).
template <int hs>
__device__ inline void strip_times_transposed(float (&acc)[block_q / 8][4], const bf16_t* a,
                                              const bf16_t* b, int r0, int lane) {
  const int a_base = bl::swizzled(r0 + bl::ldsm_a_row(lane), bl::ldsm_a_col(lane), hs);
  const int b_base = bl::swizzled(bl::ldsm_bt_row(lane), bl::ldsm_bt_col(lane), hs);
#pragma unroll
  for (int kk = 0; kk < hs / 16; ++kk) {
    std::uint32_t fa[4];
    ldmatrix_x4(fa, a + bl::swizzled_step(a_base, 0, 16 * kk, hs));
#pragma unroll
    for (int np = 0; np < block_q / 16; ++np) {
      std::uint32_t fb[4];
      ldmatrix_x4(fb, b + bl::swizzled_step(b_base, 16 * np, 16 * kk, hs));
      mma_m16n8k16(acc[2 * np], fa, fb[0], fb[1]);
      mma_m16n8k16(acc[2 * np + 1], fa, fb[2], fb[3]);
    }
  }
}

// The A fragments of an m16 × block_q product operand from its m16n8 fp32 accumulators, rounded
// to bf16: the accumulators of columns 16kk..16kk+15 are fragment kk (register j holds
// accumulator 2kk + j/2's c(2(j%2)), c(2(j%2)+1)).
__device__ inline void accumulators_as_a(std::uint32_t (&xa)[block_q / 16][4],
                                         const float (&x)[block_q / 8][4]) {
#pragma unroll
  for (int kk = 0; kk < block_q / 16; ++kk)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      xa[kk][j] = pack_bf16(x[2 * kk + j / 2][2 * (j % 2)], x[2 * kk + j / 2][2 * (j % 2) + 1]);
}

// out (16 rows × hs) += x (16 rows × block_q, as A fragments) · b (block_q × hs swizzled tile,
// B operands by ldmatrix .trans, each loaded once).
template <int hs>
__device__ inline void accumulate_product(float (&out)[hs / 8][4],
                                          const std::uint32_t (&xa)[block_q / 16][4],
                                          const bf16_t* b, int lane) {
  const int b_base = bl::swizzled(bl::ldsm_trans_b_row(lane), bl::ldsm_trans_b_col(lane), hs);
#pragma unroll
  for (int kk = 0; kk < block_q / 16; ++kk)
#pragma unroll
    for (int dd = 0; dd < hs / 16; ++dd) {
      std::uint32_t fb[4];
      ldmatrix_x4_trans(fb, b + bl::swizzled_step(b_base, 16 * kk, 16 * dd, hs));
      mma_m16n8k16(out[2 * dd], xa[kk], fb[0], fb[1]);
      mma_m16n8k16(out[2 * dd + 1], xa[kk], fb[2], fb[3]);
    }
}

}  // namespace flash

/// Forward: out (B, T, C) bf16 and lse (B, H, T) fp32 (natural log) from qkv
/// (B, T, (H + 2·KV)·hs). Windowed: `window` keys per query (lay::effective_window: > 0, < T);
/// otherwise full causal, `window` unread, and the code is the windowless kernel's.
template <int hs, bool Windowed>
__global__ void __launch_bounds__(flash::threads)
    flash_attention_forward_kernel(bf16_t* out, float* lse, const bf16_t* qkv, int T, int C, int H,
                                   int KV, int window_arg) {
  using namespace flash;
  using L = forward_smem<hs>;
  const int window = Windowed ? window_arg : 0;        // 0 folds every window test away
  constexpr int groups = lay::forward_row_groups(hs);  // m16 row groups per warp
  constexpr int rows = L::rows;                        // query rows of the block
  constexpr int kv_tile = block_k * hs;                // elements
  extern __shared__ __align__(128) unsigned char smem[];
  bf16_t* sq = reinterpret_cast<bf16_t*>(smem + L::q);
  bf16_t* sk = reinterpret_cast<bf16_t*>(smem + L::k);
  bf16_t* sv = reinterpret_cast<bf16_t*>(smem + L::v);

  // The last query tiles visit the most key tiles: launch them first so they do not finish last.
  const int qt = int(gridDim.x) - 1 - int(blockIdx.x);
  const int bh = blockIdx.y, b = bh / H, h = bh % H;
  const int q0 = qt * rows, last = lay::forward_last_key_tile(q0, rows, T, block_k);
  // Key tiles left of the block's first query's window are skipped.
  const int first = lay::forward_first_key_tile(q0, window, block_k);
  const detail::attention_heads heads{H, KV, hs};
  const std::int64_t row = heads.row();
  const bf16_t* base = qkv + std::int64_t(b) * T * row;
  const bf16_t* q = base + heads.q_col(h);
  const bf16_t* k = base + heads.k_col(h);  // the group's k, v head
  const bf16_t* v = base + heads.v_col(h);
  const int warp = threadIdx.x / warp_size, lane = threadIdx.x % warp_size;
  const int r0 = warp * 16 * groups;  // this warp's rows of the tile: groups of 16 from r0
  const float scale_log2 = rsqrtf(float(hs)) * log2e;

  // Q in 64-row parts (a part's rows keep their low three bits, so the swizzle continues).
#pragma unroll
  for (int part = 0; part < rows / block_q; ++part)
    copy_tile_async<hs>(sq + part * block_q * hs, q, row, q0 + part * block_q, T);
  copy_tile_async<hs>(sk, k, row, first * block_k, T);
  copy_tile_async<hs>(sv, v, row, first * block_k, T);
  commit_copies();

  std::uint32_t qa[groups][hs / 16][4];  // this warp's Q rows, A fragments per 16 dims
  float o[groups][hs / 8][4] = {};       // O (16 × hs per group)
  float m[groups][2];                    // running max of rows lane/4 and lane/4 + 8 (base 2)
  float l[groups][2] = {};               // this lane's share of their running sums
#pragma unroll
  // Windowed, a row may see no key of its first tiles: from the lowest finite float, an all −inf
  // tile gives P = 2^−inf = 0 and a rescale of 2^0 (of O and l still 0), never −inf − −inf.
  for (int g = 0; g < groups; ++g) m[g][0] = m[g][1] = Windowed ? -FLT_MAX : -INFINITY;

  for (int kt = first; kt <= last; ++kt) {
    const int stage = (kt - first) & 1;
    // The next K, V tiles into the other stage, whose readers passed the barrier at the end of
    // the previous iteration; then wait for this tile's group only.
    if (kt < last) {
      copy_tile_async<hs>(sk + (stage ^ 1) * kv_tile, k, row, (kt + 1) * block_k, T);
      copy_tile_async<hs>(sv + (stage ^ 1) * kv_tile, v, row, (kt + 1) * block_k, T);
      commit_copies();
      wait_copies<1>();
    } else {
      wait_copies<0>();
    }
    __syncthreads();
    if (kt == first) {
#pragma unroll
      for (int g = 0; g < groups; ++g)
#pragma unroll
        for (int kk = 0; kk < hs / 16; ++kk)
          ldmatrix_x4(qa[g][kk], sq + lay::swizzled(r0 + 16 * g + lay::ldsm_a_row(lane),
                                                    16 * kk + lay::ldsm_a_col(lane), hs));
    }
    const bf16_t* ks = sk + stage * kv_tile;
    const bf16_t* vs = sv + stage * kv_tile;
    const int k0 = kt * block_k;

    // S (16 × 64 per group) = Q rows · Kᵀ: each K fragment serves every group.
    float s[groups][block_k / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < hs / 16; ++kk)
#pragma unroll
      for (int np = 0; np < block_k / 16; ++np) {
        std::uint32_t kb[4];
        ldmatrix_x4(kb, ks + lay::swizzled(16 * np + lay::ldsm_bt_row(lane),
                                           16 * kk + lay::ldsm_bt_col(lane), hs));
#pragma unroll
        for (int g = 0; g < groups; ++g) {
          mma_m16n8k16(s[g][2 * np], qa[g][kk], kb[0], kb[1]);
          mma_m16n8k16(s[g][2 * np + 1], qa[g][kk], kb[2], kb[3]);
        }
      }

#pragma unroll
    for (int g = 0; g < groups; ++g) {
      // Base 2, the mask where the tile crosses the group's first row (causal) or the window's
      // left edge of its last row, row maxima over the quad.
      const int first_row = q0 + r0 + 16 * g;
      const bool crossing = lay::needs_mask(k0, block_k, first_row) ||
                            lay::needs_window_mask(first_row + 15, k0, window);
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int n = 0; n < block_k / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float x = s[g][n][i] * scale_log2;
          // Windowed, positions relative to the tile's first key (the test is translation
          // invariant; the relative form keeps fewer registers live).
          if (crossing && !(Windowed ? lay::window_visible(first_row - k0 + lay::acc_row(lane, i),
                                                           8 * n + lay::acc_col(lane, i), window)
                                     : lay::causal_visible(first_row + lay::acc_row(lane, i),
                                                           k0 + 8 * n + lay::acc_col(lane, i))))
            x = -INFINITY;
          s[g][n][i] = x;
          mx[i / 2] = fmaxf(mx[i / 2], x);
        }
      float corr[2];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        mx[half] = fmaxf(mx[half], __shfl_xor_sync(full_mask, mx[half], 1));
        mx[half] = fmaxf(mx[half], __shfl_xor_sync(full_mask, mx[half], 2));
        // Without a window key 0 is visible to every row and tile 0 comes first, so m is finite
        // from then on (with one, m starts finite); a tile the group's rows cannot see (all −inf)
        // leaves m, l and O as they are.
        const float m_new = fmaxf(m[g][half], mx[half]);
        corr[half] = exp2f(m[g][half] - m_new);
        m[g][half] = m_new;
      }
      float sum[2] = {0.0f, 0.0f};
#pragma unroll
      for (int n = 0; n < block_k / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          s[g][n][i] = exp2f(s[g][n][i] - m[g][i / 2]);
          sum[i / 2] += s[g][n][i];
        }
#pragma unroll
      for (int half = 0; half < 2; ++half) l[g][half] = l[g][half] * corr[half] + sum[half];
#pragma unroll
      for (int n = 0; n < hs / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) o[g][n][i] *= corr[i / 2];
    }

    // O += P · V: the accumulators of key columns 16kk..16kk+15 are one A fragment; each V
    // fragment serves every group.
#pragma unroll
    for (int kk = 0; kk < block_k / 16; ++kk) {
      std::uint32_t pa[groups][4];
#pragma unroll
      for (int g = 0; g < groups; ++g) {
        pa[g][0] = pack_bf16(s[g][2 * kk][0], s[g][2 * kk][1]);
        pa[g][1] = pack_bf16(s[g][2 * kk][2], s[g][2 * kk][3]);
        pa[g][2] = pack_bf16(s[g][2 * kk + 1][0], s[g][2 * kk + 1][1]);
        pa[g][3] = pack_bf16(s[g][2 * kk + 1][2], s[g][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < hs / 16; ++dp) {
        std::uint32_t vb[4];
        ldmatrix_x4_trans(vb, vs + lay::swizzled(16 * kk + lay::ldsm_a_row(lane),
                                                 16 * dp + lay::ldsm_a_col(lane), hs));
#pragma unroll
        for (int g = 0; g < groups; ++g) {
          mma_m16n8k16(o[g][2 * dp], pa[g], vb[0], vb[1]);
          mma_m16n8k16(o[g][2 * dp + 1], pa[g], vb[2], vb[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }

  // Row sums over the quad; out = O / l as bf16 pairs, lse = (m + log2 l)·ln 2.
#pragma unroll
  for (int g = 0; g < groups; ++g)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      l[g][half] += __shfl_xor_sync(full_mask, l[g][half], 1);
      l[g][half] += __shfl_xor_sync(full_mask, l[g][half], 2);
      const int t = q0 + r0 + 16 * g + lay::acc_row(lane, 2 * half);
      if (t >= T) continue;
      const float inv = 1.0f / l[g][half];
      bf16_t* y = out + (std::int64_t(b) * T + t) * C + std::int64_t(h) * hs;
#pragma unroll
      for (int n = 0; n < hs / 8; ++n) {
        *reinterpret_cast<__nv_bfloat162*>(y + 8 * n + lay::acc_col(lane, 2 * half)) =
            __floats2bfloat162_rn(o[g][n][2 * half] * inv, o[g][n][2 * half + 1] * inv);
      }
      if (lay::acc_col(lane, 2 * half) == 0)
        lse[std::int64_t(bh) * T + t] = (m[g][half] + log2f(l[g][half])) * ln2;
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
///
/// One block of 4 warps per (key tile, batch·KV head), visiting for each query head of the group
/// in turn the query tiles that see its keys (detail::flash_backward_visit). Warp w owns keys
/// 16w..16w+15 and works transposed: Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (16 × 64 accumulators each),
/// Pᵀ = 2^(Sᵀ·scale·log2 e − lse), dSᵀ = Pᵀ ∘ (dPᵀ − D)·scale, all in registers; an accumulator
/// pair of 16 queries is then the A fragment of dV += Pᵀ·dO and of dK += dSᵀ·Q (the forward's P·V
/// trick), so dK and dV are register accumulators for the whole block and written once. dQ needs
/// the other partition (a warp per 16 queries): dSᵀ goes to a shared bf16 tile, comes back as the
/// A operand of dQ = dS·K by ldmatrix .trans, and is added into dq_accum with fp32 atomics, as
/// FlashAttention-2 does (a separate dQ pass would recompute S and dP: 7 products instead of 5).
/// Index arithmetic: detail/flash_mma_backward_layout.hpp, shared with the lane-level emulation
/// tests/cuda/flash_mma_backward_port.hpp.
template <int hs, bool Windowed>
__global__ void __launch_bounds__(flash::threads)
    flash_attention_backward_kernel(bf16_t* dqkv, float* dq_accum, const bf16_t* dout,
                                    const bf16_t* qkv, const float* lse, const float* delta, int T,
                                    int C, int H, int KV, int window_arg) {
  using namespace flash;
  using L = backward_smem<hs>;
  const int window = Windowed ? window_arg : 0;  // 0 folds every window test away
  constexpr int tile = block_q * hs;             // elements
  extern __shared__ __align__(128) unsigned char smem[];
  bf16_t* sk = reinterpret_cast<bf16_t*>(smem + L::k);
  bf16_t* sv = reinterpret_cast<bf16_t*>(smem + L::v);
  bf16_t* sq = reinterpret_cast<bf16_t*>(smem + L::q);
  bf16_t* sdy = reinterpret_cast<bf16_t*>(smem + L::dy);
  bf16_t* sds = reinterpret_cast<bf16_t*>(smem + L::ds);
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
  // Query head h's q, dout and (B, H, T) statistics.
  auto q_of = [&](int h) { return qkv + batch + heads.q_col(h); };
  auto dy_of = [&](int h) { return dout + std::int64_t(b) * T * C + heads.q_col(h); };
  auto stats_of = [&](int h) { return (std::int64_t(b) * H + h) * T; };
  const int warp = threadIdx.x / warp_size, lane = threadIdx.x % warp_size;
  const int r0 = warp * 16;  // this warp's keys of Sᵀ, dK, dV, then its queries of dQ
  const float scale = rsqrtf(float(hs));
  const float scale_log2 = scale * log2e;

  // Query tiles first_qt .. end_qt − 1 see this key tile: the diagonal one and, under a window,
  // those up to the last query whose window reaches the tile's last key; later ones are skipped.
  const int first_qt = detail::flash_first_query_tile(kt);
  const int end_qt = bl::end_query_tile(kt, block_k, block_q, T, window);
  // (query head of the group, query tile) pairs, heads in turn: dK and dV collect the group.
  const int steps = heads.group() * (end_qt - first_qt);
  const int h0 = heads.first_query_head(g);
  copy_tile_async<hs>(sk, k, row, k0, T);
  copy_tile_async<hs>(sv, v, row, k0, T);
  copy_tile_async<hs>(sq, q_of(h0), row, first_qt * block_q, T);
  copy_tile_async<hs>(sdy, dy_of(h0), C, first_qt * block_q, T);
  commit_copies();

  float dk[hs / 8][4] = {};  // dK (this warp's 16 keys × hs)
  float dv[hs / 8][4] = {};  // dV

  for (int step = 0; step < steps; ++step) {
    const detail::flash_backward_step at = detail::flash_backward_visit(step, first_qt, end_qt);
    const int h = h0 + at.member, q0 = at.qt * block_q;
    const int stage = step & 1;
    // Every warp is done with the previous step: its stage of q and dout (refilled next), the
    // statistics and the dSᵀ tile.
    __syncthreads();
    const bool next = step + 1 < steps;
    if (next) {
      const detail::flash_backward_step to =
          detail::flash_backward_visit(step + 1, first_qt, end_qt);
      copy_tile_async<hs>(sq + (stage ^ 1) * tile, q_of(h0 + to.member), row, to.qt * block_q, T);
      copy_tile_async<hs>(sdy + (stage ^ 1) * tile, dy_of(h0 + to.member), C, to.qt * block_q, T);
      commit_copies();
    }
    const std::int64_t stats = stats_of(h);
    for (int r = threadIdx.x; r < block_q; r += blockDim.x) {
      // Base 2; +inf past T makes P (and so dS) zero for those query rows.
      const bool real = q0 + r < T;
      slse[r] = real ? lse[stats + q0 + r] * log2e : INFINITY;
      sdelta[r] = real ? delta[stats + q0 + r] : 0.0f;
    }
    if (next)
      wait_copies<1>();
    else
      wait_copies<0>();
    __syncthreads();
    const bf16_t* qs = sq + stage * tile;
    const bf16_t* dys = sdy + stage * tile;
    // The element-wise test only where the tile crosses the diagonal or this warp's keys cross
    // the window's left edge of the tile's last query.
    const bool crossing =
        at.qt == kt || (Windowed && lay::needs_window_mask(q0 + block_q - 1, k0 + r0, window));

    // Sᵀ (16 keys × 64 queries) = K strip · Qᵀ; each K A fragment is loaded once and used for
    // all 64 queries. Then Pᵀ in place (masked on the crossing tiles only).
    float s[block_q / 8][4] = {};
    strip_times_transposed<hs>(s, sk, qs, r0, lane);
#pragma unroll
    for (int n = 0; n < block_q / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int query = 8 * n + bl::acc_query(lane, i);
        const int key = r0 + bl::acc_key(lane, i);
        const bool masked =
            crossing && !(Windowed ? bl::window_visible(key, q0 - k0 + query, window)
                                   : bl::diagonal_visible(key, query));
        s[n][i] = masked ? 0.0f : exp2f(s[n][i] * scale_log2 - slse[query]);
      }
    // dV += Pᵀ · dO: the accumulators of queries 16kk..16kk+15 are one A fragment; dO comes as
    // the B operand by ldmatrix .trans, each fragment once.
    {
      std::uint32_t pa[block_q / 16][4];
      accumulators_as_a(pa, s);
      accumulate_product<hs>(dv, pa, dys, lane);
    }
    // dPᵀ = V strip · dOᵀ, then dSᵀ = Pᵀ ∘ (dPᵀ − D)·scale in place.
    float dp[block_q / 8][4] = {};
    strip_times_transposed<hs>(dp, sv, dys, r0, lane);
#pragma unroll
    for (int n = 0; n < block_q / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        dp[n][i] = s[n][i] * (dp[n][i] - sdelta[8 * n + bl::acc_query(lane, i)]) * scale;
    // dK += dSᵀ · Q likewise; the dS fragments also go to the shared tile as they are (two bf16 a
    // register: one word per lane, 32 banks per store).
    {
      std::uint32_t dsa[block_q / 16][4];
      accumulators_as_a(dsa, dp);
#pragma unroll
      for (int kk = 0; kk < block_q / 16; ++kk)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int i = 2 * (j % 2);
          const int key = r0 + bl::acc_key(lane, i);
          const int query = 16 * kk + 8 * (j / 2) + bl::acc_query(lane, i);
          *reinterpret_cast<std::uint32_t*>(sds + bl::ds_offset(key, query, block_q)) = dsa[kk][j];
        }
      accumulate_product<hs>(dk, dsa, qs, lane);
    }
    __syncthreads();  // dQ needs every warp's keys of dS

    // dQ (this warp's 16 queries × hs) = dS · K, 64 head dimensions at a time, added atomically
    // into the fp32 accumulator. The dS A fragments (one per 16 keys) are loaded once.
    std::uint32_t dsa[block_k / 16][4];
    const int ds_base = bl::ds_offset(bl::ldsm_ds_key(lane), r0 + bl::ldsm_ds_query(lane), block_q);
#pragma unroll
    for (int kk = 0; kk < block_k / 16; ++kk)
      ldmatrix_x4_trans(dsa[kk], sds + bl::swizzled_step(ds_base, 16 * kk, 0, block_q));
    float* dq = dq_accum + std::int64_t(b) * T * C + heads.q_col(h);
    const int k_base = bl::swizzled(bl::ldsm_trans_b_row(lane), bl::ldsm_trans_b_col(lane), hs);
#pragma unroll
    for (int c0 = 0; c0 < hs; c0 += 64) {
      float acc[8][4] = {};
#pragma unroll
      for (int kk = 0; kk < block_k / 16; ++kk)
#pragma unroll
        for (int dd = 0; dd < 4; ++dd) {
          std::uint32_t kb[4];
          ldmatrix_x4_trans(kb, sk + bl::swizzled_step(k_base, 16 * kk, c0 + 16 * dd, hs));
          mma_m16n8k16(acc[2 * dd], dsa[kk], kb[0], kb[1]);
          mma_m16n8k16(acc[2 * dd + 1], dsa[kk], kb[2], kb[3]);
        }
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int t = q0 + r0 + bl::acc_row(lane, 2 * half);
        if (t >= T) continue;
        float* dq_row = dq + std::int64_t(t) * C + c0 + bl::acc_col(lane, 2 * half);
#pragma unroll
        for (int n = 0; n < 8; ++n)
          add_pair_atomic(dq_row + 8 * n, acc[n][2 * half], acc[n][2 * half + 1]);
      }
    }
  }

  // dK and dV of the real keys, bf16 pairs straight from the accumulators.
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int j = k0 + r0 + bl::acc_row(lane, 2 * half);
    if (j >= T) continue;
    bf16_t* d = dqkv + batch + std::int64_t(j) * row + bl::acc_col(lane, 2 * half);
#pragma unroll
    for (int n = 0; n < hs / 8; ++n) {
      *reinterpret_cast<__nv_bfloat162*>(d + heads.k_col_of(g) + 8 * n) =
          __floats2bfloat162_rn(dk[n][2 * half], dk[n][2 * half + 1]);
      *reinterpret_cast<__nv_bfloat162*>(d + heads.v_col_of(g) + 8 * n) =
          __floats2bfloat162_rn(dv[n][2 * half], dv[n][2 * half + 1]);
    }
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
inline void can_implement(const void* qkv, const void* other, int B, int T, int C, int H, int KV,
                          int window) {
  const char* name = "flash_attention";
  require(B > 0 && T > 0 && H > 0 && KV > 0, name, "B, T, H and KV must be positive");
  require(window >= 0, name, [&] {
    return "window = " + std::to_string(window) + " (keys per query; 0 = full causal)";
  });
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

template <int hs, bool Windowed>
void forward(bf16_t* out, float* lse, const bf16_t* qkv, int B, int T, int C, int H, int KV,
             int window, cudaStream_t stream) {
  constexpr std::size_t bytes = forward_smem<hs>::bytes;
  opt_in_shared(flash_attention_forward_kernel<hs, Windowed>, bytes);
  const dim3 grid(detail::flash_tile_count(T, forward_smem<hs>::rows), B * H);
  flash_attention_forward_kernel<hs, Windowed>
      <<<grid, threads, bytes, stream>>>(out, lse, qkv, T, C, H, KV, window);
  TRAINKIT_CUDA_CHECK_LAUNCH("flash_attention_forward_kernel");
}
template <int hs>
void forward(bf16_t* out, float* lse, const bf16_t* qkv, int B, int T, int C, int H, int KV,
             int window, cudaStream_t stream) {
  if (window > 0)
    forward<hs, true>(out, lse, qkv, B, T, C, H, KV, window, stream);
  else
    forward<hs, false>(out, lse, qkv, B, T, C, H, KV, 0, stream);
}

template <int hs, bool Windowed>
void backward(bf16_t* dqkv, float* delta, float* dq_accum, const bf16_t* dout, const bf16_t* qkv,
              const bf16_t* out, const float* lse, int B, int T, int C, int H, int KV, int window,
              cudaStream_t stream) {
  const std::int64_t rows = std::int64_t(B) * T * H;
  flash_attention_delta_kernel<hs>
      <<<ceil_div(std::size_t(rows) * warp_size, 256), 256, 0, stream>>>(delta, dout, out, B, T, C,
                                                                         H);
  TRAINKIT_CUDA_CHECK_LAUNCH("flash_attention_delta_kernel");
  TRAINKIT_CUDA_CHECK(cudaMemsetAsync(dq_accum, 0, std::size_t(B) * T * C * sizeof(float), stream));
  constexpr std::size_t bytes = backward_smem<hs>::bytes;
  opt_in_shared(flash_attention_backward_kernel<hs, Windowed>, bytes);
  const dim3 grid(detail::flash_tile_count(T, block_k), B * KV);
  flash_attention_backward_kernel<hs, Windowed><<<grid, threads, bytes, stream>>>(
      dqkv, dq_accum, dout, qkv, lse, delta, T, C, H, KV, window);
  TRAINKIT_CUDA_CHECK_LAUNCH("flash_attention_backward_kernel");
  const std::size_t n = std::size_t(B) * T * C;
  flash_attention_dq_kernel<float>
      <<<ceil_div(n, 256), 256, 0, stream>>>(dqkv, dq_accum, B * T, C, (H + 2 * KV) * (C / H));
  TRAINKIT_CUDA_CHECK_LAUNCH("flash_attention_dq_kernel");
}
template <int hs>
void backward(bf16_t* dqkv, float* delta, float* dq_accum, const bf16_t* dout, const bf16_t* qkv,
              const bf16_t* out, const float* lse, int B, int T, int C, int H, int KV, int window,
              cudaStream_t stream) {
  if (window > 0)
    backward<hs, true>(dqkv, delta, dq_accum, dout, qkv, out, lse, B, T, C, H, KV, window, stream);
  else
    backward<hs, false>(dqkv, delta, dq_accum, dout, qkv, out, lse, B, T, C, H, KV, 0, stream);
}

}  // namespace flash

/// Causal attention forward: out (B, T, C) and lse (B, H, T) fp32 from qkv
/// (B, T, (H + 2·KV)·hs), head size hs = C / H of 64 or 128, KV dividing H (KV = H: GPT-2's
/// (B, T, 3C)). lse is what the backward needs besides qkv and out. `window` > 0: sliding-window
/// causal attention, query i sees keys i − window < j ≤ i (model/recipe/sliding_window_attention
/// .hpp), key tiles wholly outside the window skipped; 0 or ≥ T: full causal.
inline void flash_attention_forward(bf16_t* out, float* lse, const bf16_t* qkv, int B, int T, int C,
                                    int H, int KV, cudaStream_t stream, int window = 0) {
  flash::can_implement(qkv, out, B, T, C, H, KV, window);
  const int w = flash::lay::effective_window(window, T);
  if (C / H == 64)
    flash::forward<64>(out, lse, qkv, B, T, C, H, KV, w, stream);
  else
    flash::forward<128>(out, lse, qkv, B, T, C, H, KV, w, stream);
}

/// Causal attention backward: dqkv (B, T, (H + 2·KV)·hs) assigned, dk and dv summed over each
/// group of H / KV query heads. Scratch: delta (B, H, T) fp32 and dq_accum (B, T, C) fp32.
/// `window`: the forward's (query tiles wholly outside a key tile's reach are skipped).
inline void flash_attention_backward(bf16_t* dqkv, float* delta, float* dq_accum,
                                     const bf16_t* dout, const bf16_t* qkv, const bf16_t* out,
                                     const float* lse, int B, int T, int C, int H, int KV,
                                     cudaStream_t stream, int window = 0) {
  flash::can_implement(qkv, dout, B, T, C, H, KV, window);
  require(aligned_to(dqkv, 16) && aligned_to(out, 16), "flash_attention",
          "dqkv and out must be 16-byte aligned");
  require(aligned_to(dq_accum, 8), "flash_attention",
          "dq_accum must be 8-byte aligned (the backward adds float pairs atomically)");
  const int w = flash::lay::effective_window(window, T);
  if (C / H == 64)
    flash::backward<64>(dqkv, delta, dq_accum, dout, qkv, out, lse, B, T, C, H, KV, w, stream);
  else
    flash::backward<128>(dqkv, delta, dq_accum, dout, qkv, out, lse, B, T, C, H, KV, w, stream);
}

}  // namespace trainkit::model::kernels
