// trainkit/model/detail/llama_cuda_twins.hpp — CPU twins of the Llama family's CUDA kernels
// (model/cuda/rmsnorm.cuh, rope.cuh, gated_mlp.cuh): the same arithmetic in fp32, rounded to bf16
// exactly where a kernel stores bf16, so a GPU test can hold a kernel to the twin at a fraction of
// a bf16 ulp, while tests/model/test_llama_cuda_twins.cpp holds each twin to the fp32 CPU kernels
// of cpu/rmsnorm_rope_kernels.hpp (the functions llama_cpu runs, pinned to transformers by
// fixtures).
//
// The point-wise math (SiLU and its derivative, ReLU², the rotate-half pair) is written once here
// as TRAINKIT_HOST_DEVICE functions that the kernels call too, so a slip in it fails the CPU test
// that runs on every machine. What a twin cannot share with its kernel is the order of the
// reductions (a warp's butterfly, the backward's per-chunk partials): there twin and kernel agree
// to float rounding, not bit for bit. Plain C++ without Eigen, so nvcc-compiled tests include it.
// Buffers are float arrays holding bf16-representable values where the kernel's are bf16.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "trainkit/core/bf16.hpp"
#include "trainkit/core/cuda/host_device.hpp"
#include "trainkit/model/detail/rope_table.hpp"

namespace trainkit::model::detail {

// ---- point-wise math shared with the kernels ----------------------------------------------------

/// σ(g) = 1 / (1 + e^−g), in fp32 (expf: the device's is within 2 ulp of the host's).
TRAINKIT_HOST_DEVICE inline float llama_sigmoid(float g) {
  return 1.0f / (1.0f + ::expf(-g));
}

/// silu(gate)·up, as llama_cpu_kernels' swiglu_forward: g / (1 + e^−g) · u.
TRAINKIT_HOST_DEVICE inline float swiglu_value(float g, float u) {
  return g / (1.0f + ::expf(-g)) * u;
}

/// ∂/∂gate of silu(g)·u times dy: dy·u·σ(g)·(1 + g·(1 − σ(g))).
TRAINKIT_HOST_DEVICE inline float swiglu_dgate(float g, float u, float dy) {
  const float sig = llama_sigmoid(g);
  return dy * u * sig * (1.0f + g * (1.0f - sig));
}

/// ∂/∂up of silu(g)·u times dy: dy·g·σ(g).
TRAINKIT_HOST_DEVICE inline float swiglu_dup(float g, float dy) {
  return dy * g * llama_sigmoid(g);
}

/// max(x, 0)² and its derivative times dy.
TRAINKIT_HOST_DEVICE inline float relu_squared_value(float x) {
  const float m = x > 0.0f ? x : 0.0f;
  return m * m;
}
TRAINKIT_HOST_DEVICE inline float relu_squared_grad(float x, float dy) {
  return dy * 2.0f * (x > 0.0f ? x : 0.0f);
}

/// The rotate-half rotation of the pair (x[i], x[i + hs/2]) by the angle with cosine c and sine s
/// (s negated for the inverse rotation, which is the backward).
struct rope_pair {
  float first, second;
};
TRAINKIT_HOST_DEVICE inline rope_pair rope_rotate_pair(float a, float b, float c, float s) {
  return {a * c - b * s, b * c + a * s};
}

// ---- tiling arithmetic shared with the kernels --------------------------------------------------
// The index maps that are easy to get wrong, as functions the kernels call and the CPU test walks
// over a whole grid (each output written once, nothing else touched), since no GPU runs here.

inline constexpr int llama_kernel_warp = 32;  // lanes; the kernels static_assert warp_size matches
inline constexpr int llama_kernel_pack = 8;   // bf16 per 16-byte access; likewise `pack`
inline constexpr int rmsnorm_pass = llama_kernel_warp * llama_kernel_pack;  // channels per pass

/// RMSNorm backward's shared-memory slot of channel c = 256·j + 8·lane + k: 256·j + 32·k + lane
/// (the 32 lanes' adds for one (j, k) hit 32 consecutive floats, no bank conflicts).
TRAINKIT_HOST_DEVICE inline int rmsnorm_channel_slot(int j, int lane, int k) {
  return j * rmsnorm_pass + k * llama_kernel_warp + lane;
}
/// The inverse: the channel whose sums sit in slot q.
TRAINKIT_HOST_DEVICE inline int rmsnorm_slot_channel(int q) {
  return q / rmsnorm_pass * rmsnorm_pass + (q % llama_kernel_warp) * llama_kernel_pack +
         (q % rmsnorm_pass) / llama_kernel_warp;
}

/// RMSNorm backward's dw reduce (dw[c] += Σ_chunks partial[chunk, c]): blocks of
/// rmsnorm_reduce_channels channels × rmsnorm_reduce_lanes chunk lanes. Thread x + 32·y of block
/// b owns channel 32·b + x and adds chunks y, y + 16, y + 32, ... in order (a warp reads 32
/// consecutive floats of one chunk's row); then thread y = 0 adds the 16 lanes' sums in lane
/// order. At d12 (C = 768, B·T = 32768: 1024 chunks) 24 blocks of 512 threads, 64 adds a thread,
/// where one 128-thread block per 128 channels (6 blocks) added all 1024 chunks a thread.
inline constexpr int rmsnorm_reduce_channels = llama_kernel_warp;  // a warp's 32 channels
inline constexpr int rmsnorm_reduce_lanes = 16;                    // warps a block
inline int rmsnorm_reduce_blocks(int C) {
  return (C + rmsnorm_reduce_channels - 1) / rmsnorm_reduce_channels;
}
/// The channel of thread (x, y) of `block`, and the first chunk it adds (then every 16th).
TRAINKIT_HOST_DEVICE inline int rmsnorm_reduce_channel(int block, int x) {
  return block * rmsnorm_reduce_channels + x;
}

/// RoPE's thread `item` of a grid over (row, head, group of 8 pairs): its row, head and first pair
/// index i (it rotates pairs (i + k, i + k + hs/2), k < 8).
struct rope_site {
  std::int64_t row;
  int head, i;
};
TRAINKIT_HOST_DEVICE inline rope_site rope_item_site(std::int64_t item, int heads, int hs) {
  const int groups = hs / 2 / llama_kernel_pack;
  return {item / (std::int64_t(heads) * groups), int(item / groups % heads),
          int(item % groups) * llama_kernel_pack};
}

// ---- twins of the kernels -----------------------------------------------------------------------

inline float round_to_bf16(float x) {
  return bf16::from_float(x).to_float();
}

/// Forward of rmsnorm.cuh's kernel over (N, C): x = bf16(a + b) (b null: x = a), written to
/// res_out when b is given; rstd = 1/√(mean(x²) + ε) kept in fp32; out = bf16(x·rstd·w) (w null:
/// no gain).
inline void rmsnorm_forward_twin(float* res_out, float* out, float* rstd, const float* a,
                                 const float* b, const float* w, std::int64_t N, int C, float eps) {
  std::vector<float> x(std::size_t(C), 0.0f);
  for (std::int64_t r = 0; r < N; ++r) {
    const std::int64_t base = r * C;
    float sq = 0.0f;
    for (int c = 0; c < C; ++c) {
      x[std::size_t(c)] = b ? round_to_bf16(a[base + c] + b[base + c]) : a[base + c];
      sq += x[std::size_t(c)] * x[std::size_t(c)];
    }
    const float s = 1.0f / std::sqrt(sq / float(C) + eps);
    for (int c = 0; c < C; ++c) {
      const float n = x[std::size_t(c)] * s;
      out[base + c] = round_to_bf16(w ? n * w[c] : n);
      if (b) res_out[base + c] = x[std::size_t(c)];
    }
    rstd[r] = s;
  }
}

/// Backward of rmsnorm.cuh: dinp (N, C) += rstd·(w·dy − x̂·mean(w·dy·x̂)), x̂ = x·rstd, rounded
/// to bf16 once per element; dw (C) += Σ_rows dy·x̂ summed in fp32 and rounded once (w and dw
/// null: no gain).
inline void rmsnorm_backward_twin(float* dinp, float* dw, const float* dout, const float* x,
                                  const float* w, const float* rstd, std::int64_t N, int C) {
  std::vector<float> gw(std::size_t(C), 0.0f);
  for (std::int64_t r = 0; r < N; ++r) {
    const std::int64_t base = r * C;
    const float s = rstd[r];
    float dot = 0.0f;
    for (int c = 0; c < C; ++c) {
      const float dnorm = w ? w[c] * dout[base + c] : dout[base + c];
      dot += dnorm * x[base + c] * s;
    }
    dot /= float(C);
    for (int c = 0; c < C; ++c) {
      const float norm = x[base + c] * s;
      const float dnorm = w ? w[c] * dout[base + c] : dout[base + c];
      dinp[base + c] = round_to_bf16(dinp[base + c] + s * (dnorm - norm * dot));
      gw[std::size_t(c)] += dout[base + c] * norm;
    }
  }
  if (dw)
    for (int c = 0; c < C; ++c) dw[c] = round_to_bf16(dw[c] + gw[std::size_t(c)]);
}

/// rmsnorm.cuh's dw reduce, in its order (rmsnorm_reduce_* above): sums[c] = Σ over lanes y (in
/// order) of Σ over chunks y, y + 16, ... (in order) of partial[chunk, c], every add in fp32, so
/// the kernel's sums equal these bit for bit (it then stores dw[c] = bf16(dw[c] + sums[c])).
/// `reads`, when given (chunks·C), counts each partial's reads.
inline void rmsnorm_dw_reduce_twin(float* sums, const float* partial, int chunks, int C,
                                   int* reads = nullptr) {
  for (int b = 0; b < rmsnorm_reduce_blocks(C); ++b)
    for (int x = 0; x < rmsnorm_reduce_channels; ++x) {
      const int c = rmsnorm_reduce_channel(b, x);
      if (c >= C) continue;
      float total = 0.0f;
      for (int y = 0; y < rmsnorm_reduce_lanes; ++y) {
        float lane = 0.0f;
        for (int j = y; j < chunks; j += rmsnorm_reduce_lanes) {
          const std::int64_t i = std::int64_t(j) * C + c;
          lane += partial[i];
          if (reads) ++reads[i];
        }
        total += lane;
      }
      sums[c] = total;
    }
}

/// rope.cuh, in place on `heads` consecutive heads of hs channels at the start of each of N rows
/// (rows `stride` apart, row r at position r % T); each pair rounded to bf16 once.
inline void rope_twin(float* x, const rope_table& table, std::int64_t N, int T, int heads, int hs,
                      std::int64_t stride, bool inverse) {
  const int h = hs / 2;
  for (std::int64_t r = 0; r < N; ++r) {
    const std::size_t t = std::size_t(r % T);
    for (int head = 0; head < heads; ++head) {
      float* v = x + r * stride + std::int64_t(head) * hs;
      for (int i = 0; i < h; ++i) {
        const float c = table.cos[t * std::size_t(table.half) + std::size_t(i)];
        const float s = table.sin[t * std::size_t(table.half) + std::size_t(i)];
        const rope_pair p = rope_rotate_pair(v[i], v[i + h], c, inverse ? -s : s);
        v[i] = round_to_bf16(p.first);
        v[i + h] = round_to_bf16(p.second);
      }
    }
  }
}

/// QK-norm forward (parameter-free RMSNorm per head), in place on `heads` heads at the start of
/// each of N rows; rstd (N, heads) in fp32.
inline void head_rmsnorm_forward_twin(float* x, float* rstd, std::int64_t N, int heads, int hs,
                                      std::int64_t stride, float eps) {
  for (std::int64_t r = 0; r < N; ++r)
    for (int head = 0; head < heads; ++head) {
      float* v = x + r * stride + std::int64_t(head) * hs;
      float sq = 0.0f;
      for (int i = 0; i < hs; ++i) sq += v[i] * v[i];
      const float s = 1.0f / std::sqrt(sq / float(hs) + eps);
      for (int i = 0; i < hs; ++i) v[i] = round_to_bf16(v[i] * s);
      rstd[r * heads + head] = s;
    }
}

/// QK-norm backward, in place: dx = rstd·(dy − y·mean(dy·y)) from the normalised output y.
inline void head_rmsnorm_backward_twin(float* dx, const float* y, const float* rstd, std::int64_t N,
                                       int heads, int hs, std::int64_t stride) {
  for (std::int64_t r = 0; r < N; ++r)
    for (int head = 0; head < heads; ++head) {
      const std::int64_t o = r * stride + std::int64_t(head) * hs;
      float dot = 0.0f;
      for (int i = 0; i < hs; ++i) dot += dx[o + i] * y[o + i];
      dot /= float(hs);
      const float s = rstd[r * heads + head];
      for (int i = 0; i < hs; ++i) dx[o + i] = round_to_bf16(s * (dx[o + i] - y[o + i] * dot));
    }
}

/// gated_mlp.cuh's SwiGLU: fc (N, 2F) = gate | up per row; out (N, F) = bf16(silu(gate)·up).
inline void swiglu_forward_twin(float* out, const float* fc, std::int64_t N, int F) {
  for (std::int64_t r = 0; r < N; ++r)
    for (int i = 0; i < F; ++i)
      out[r * F + i] = round_to_bf16(swiglu_value(fc[r * 2 * F + i], fc[r * 2 * F + F + i]));
}

/// dfc (N, 2F) = [dgate | dup] assigned, each rounded to bf16.
inline void swiglu_backward_twin(float* dfc, const float* fc, const float* dout, std::int64_t N,
                                 int F) {
  for (std::int64_t r = 0; r < N; ++r)
    for (int i = 0; i < F; ++i) {
      const float g = fc[r * 2 * F + i], u = fc[r * 2 * F + F + i], dy = dout[r * F + i];
      dfc[r * 2 * F + i] = round_to_bf16(swiglu_dgate(g, u, dy));
      dfc[r * 2 * F + F + i] = round_to_bf16(swiglu_dup(g, dy));
    }
}

inline void relu_squared_forward_twin(float* out, const float* inp, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = round_to_bf16(relu_squared_value(inp[i]));
}

/// dinp = bf16(dout·2·max(x, 0)), assigned (dinp may alias dout).
inline void relu_squared_backward_twin(float* dinp, const float* inp, const float* dout,
                                       std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dinp[i] = round_to_bf16(relu_squared_grad(inp[i], dout[i]));
}

}  // namespace trainkit::model::detail
