// trainkit/model/detail/rope_table.hpp — RoPE's cos/sin table, built once on the host: llama_cpu
// rotates with it, and the CUDA kernels (model/cuda/rope.cuh) and their twins read the same table,
// so all three rotate by bit-identical factors (no Eigen: CUDA units include it).
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace trainkit::model::detail {

/// cos and sin (T, hs/2) of RoPE's angles t·θ^(−2i/hs), computed in float as transformers'
/// LlamaRotaryEmbedding does (its inv_freq and angles are float32 whatever the model's dtype).
struct rope_table {
  int T = 0, half = 0;
  std::vector<float> cos, sin;  // (T, half)

  rope_table() = default;
  rope_table(int T_, int head_size, float theta) : T(T_), half(head_size / 2) {
    cos.resize(std::size_t(T) * std::size_t(half));
    sin.resize(cos.size());
    for (int i = 0; i < half; ++i) {
      const float inv_freq = 1.0f / std::pow(theta, float(2 * i) / float(head_size));
      for (int t = 0; t < T; ++t) {
        const float angle = float(t) * inv_freq;
        cos[std::size_t(t) * half + i] = std::cos(angle);
        sin[std::size_t(t) * half + i] = std::sin(angle);
      }
    }
  }
};

}  // namespace trainkit::model::detail
