// tests/cuda/gqa_expand.hpp — grouped-query attention checked through multi-head attention, for
// the GPU attention tests (host code, no Eigen: .cu files include it).
//
// GQA with H query heads and KV key/value heads is MHA on a qkv whose k and v heads are repeated
// (transformers' repeat_kv): query head h gets copies of k, v head h / (H / KV). So the naive MHA
// reference (reference.hpp) run on the expanded qkv gives GQA's output, and its dk, dv summed over
// each group give GQA's. The repeat and the sum are written here with their own index arithmetic,
// not model/detail/attention_heads.hpp's, so the kernels' head map is checked against something
// it does not share.
#pragma once

#include <cstddef>
#include <vector>

namespace trainkit::test_gpu {

/// (B·T, (H + 2·KV)·hs) → (B·T, 3·H·hs): q as is, k and v head h / (H / KV) for query head h.
inline std::vector<float> expand_gqa(const std::vector<float>& qkv, int BT, int H, int KV, int hs) {
  const std::size_t in_row = std::size_t(H + 2 * KV) * hs, C = std::size_t(H) * hs;
  std::vector<float> out(std::size_t(BT) * 3 * C);
  for (std::size_t r = 0; r < std::size_t(BT); ++r) {
    const float* src = qkv.data() + r * in_row;
    float* dst = out.data() + r * 3 * C;
    for (std::size_t c = 0; c < C; ++c) dst[c] = src[c];
    for (int h = 0; h < H; ++h) {
      const int g = h * KV / H;  // = h / (H / KV) for KV dividing H
      for (int d = 0; d < hs; ++d) {
        dst[C + std::size_t(h) * hs + d] = src[C + std::size_t(g) * hs + d];
        dst[2 * C + std::size_t(h) * hs + d] = src[C + std::size_t(KV + g) * hs + d];
      }
    }
  }
  return out;
}

/// The gradient of expand_gqa: (B·T, 3·H·hs) → (B·T, (H + 2·KV)·hs), dk and dv of the repeated
/// heads summed into their k, v head.
inline std::vector<float> fold_gqa_gradient(const std::vector<float>& dqkv_mha, int BT, int H,
                                            int KV, int hs) {
  const std::size_t out_row = std::size_t(H + 2 * KV) * hs, C = std::size_t(H) * hs;
  std::vector<float> out(std::size_t(BT) * out_row, 0.0f);
  for (std::size_t r = 0; r < std::size_t(BT); ++r) {
    const float* src = dqkv_mha.data() + r * 3 * C;
    float* dst = out.data() + r * out_row;
    for (std::size_t c = 0; c < C; ++c) dst[c] = src[c];
    for (int h = 0; h < H; ++h) {
      const int g = h * KV / H;
      for (int d = 0; d < hs; ++d) {
        dst[C + std::size_t(g) * hs + d] += src[C + std::size_t(h) * hs + d];
        dst[C + std::size_t(KV + g) * hs + d] += src[2 * C + std::size_t(h) * hs + d];
      }
    }
  }
  return out;
}

/// One part of a (B·T, (H + 2·KV)·hs) gradient: 0 = dq (H heads), 1 = dk, 2 = dv (KV heads each).
inline std::vector<float> part_of_gqa(const std::vector<float>& dqkv, int BT, int H, int KV, int hs,
                                      int part) {
  const std::size_t row = std::size_t(H + 2 * KV) * hs;
  const std::size_t first = part == 0   ? 0
                            : part == 1 ? std::size_t(H) * hs
                                        : std::size_t(H + KV) * hs;
  const std::size_t width = std::size_t(part == 0 ? H : KV) * hs;
  std::vector<float> out;
  out.reserve(std::size_t(BT) * width);
  for (std::size_t r = 0; r < std::size_t(BT); ++r)
    for (std::size_t c = 0; c < width; ++c) out.push_back(dqkv[r * row + first + c]);
  return out;
}

}  // namespace trainkit::test_gpu
