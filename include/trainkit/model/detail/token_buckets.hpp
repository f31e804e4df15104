// trainkit/model/detail/token_buckets.hpp — the host half of the CUDA GPT-2's deterministic
// embedding backward, and a CPU twin of its kernel.
//
// dwte[token] += Σ dout[row] over the rows holding that token. The host groups the rows of a batch
// by token (stable, so each token's rows stay ascending); the kernel (model/cuda/encoder.cuh)
// gives each bucket a block. On real text a few tokens ("the", ",", ".") fill a large share of a
// batch — a Zipf distribution — so one serial loop over a bucket's rows would make the hottest
// bucket the whole kernel's time. Each block therefore splits its bucket's rows over
// `encoder_row_groups` groups of threads: group g sums rows g, g + G, g + 2G, ... in fp32, then
// the group partials are added in group order and the sum is added to dwte once, rounded to bf16.
// Every order is fixed, so the result is the same run to run; `encoder_backward_buckets_twin`
// performs exactly these additions on the CPU, so the kernel can be checked against it bit for
// bit and the grouping against a plain per-token sum here, without a GPU.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

#include "trainkit/core/bf16.hpp"

namespace trainkit::model::kernels {

/// Row groups per bucket: the longest serial chain of a bucket of n rows is ceil(n / 8) adds.
inline constexpr int encoder_row_groups = 8;

/// The rows of a batch grouped by token, built on the host: bucket u covers rows
/// rows[offsets[u] .. offsets[u+1]) (ascending), all holding token tokens[u].
struct token_buckets {
  std::vector<std::int32_t> tokens;   // (U)
  std::vector<std::int32_t> offsets;  // (U + 1)
  std::vector<std::int32_t> rows;     // (N)

  /// Packs the three arrays into one for a single upload: [U, tokens…, offsets…, rows…].
  std::vector<std::int32_t> packed() const {
    std::vector<std::int32_t> out;
    out.reserve(1 + tokens.size() + offsets.size() + rows.size());
    out.push_back(std::int32_t(tokens.size()));
    out.insert(out.end(), tokens.begin(), tokens.end());
    out.insert(out.end(), offsets.begin(), offsets.end());
    out.insert(out.end(), rows.begin(), rows.end());
    return out;
  }

  /// Rows of the largest bucket (0 without buckets).
  std::int32_t largest() const noexcept {
    std::int32_t n = 0;
    for (std::size_t u = 0; u + 1 < offsets.size(); ++u)
      n = std::max(n, offsets[u + 1] - offsets[u]);
    return n;
  }
};

/// Groups rows by token; out-of-range tokens are left out (the forward flags them).
inline token_buckets make_token_buckets(std::span<const std::int32_t> tokens, int V) {
  token_buckets b;
  b.rows.resize(tokens.size());
  std::iota(b.rows.begin(), b.rows.end(), 0);
  // Stable: rows of one token stay ascending, the order the kernel sums them in.
  std::stable_sort(b.rows.begin(), b.rows.end(),
                   [&](std::int32_t x, std::int32_t y) { return tokens[x] < tokens[y]; });
  std::size_t kept = 0;
  for (std::size_t i = 0; i < b.rows.size(); ++i) {
    const std::int32_t tok = tokens[b.rows[i]];
    if (tok < 0 || tok >= V) continue;
    if (b.tokens.empty() || b.tokens.back() != tok) {
      b.tokens.push_back(tok);
      b.offsets.push_back(std::int32_t(kept));
    }
    b.rows[kept++] = b.rows[i];
  }
  b.rows.resize(kept);
  b.offsets.push_back(std::int32_t(kept));
  return b;
}

/// The kernel's arithmetic on the CPU: dwte (V, C) and dout (N, C) hold bf16 values as floats;
/// dwte is rounded to bf16 after its one add per bucket and channel, as on the device.
inline void encoder_backward_buckets_twin(std::span<float> dwte, std::span<const float> dout,
                                          const token_buckets& b, int C) {
  constexpr int G = encoder_row_groups;
  float partial[G];
  for (std::size_t u = 0; u < b.tokens.size(); ++u) {
    const std::int32_t begin = b.offsets[u], end = b.offsets[u + 1];
    float* g = dwte.data() + std::size_t(b.tokens[u]) * std::size_t(C);
    for (int c = 0; c < C; ++c) {
      for (int r = 0; r < G; ++r) {
        float acc = 0.0f;
        for (std::int32_t j = begin + r; j < end; j += G)
          acc += dout[std::size_t(b.rows[std::size_t(j)]) * std::size_t(C) + std::size_t(c)];
        partial[r] = acc;
      }
      float sum = partial[0];
      for (int r = 1; r < G; ++r) sum += partial[r];
      g[c] = bf16::from_float(g[c] + sum).to_float();
    }
  }
}

/// encoder_backward_atomic_kernel's arithmetic on the CPU, in row order (one of the orders the
/// atomics may take): each row's value is added to dwte (V, C) and the sum rounded to bf16 at once,
/// as a bf16 atomicAdd does. Out-of-range tokens are skipped, as by the kernel.
inline void encoder_backward_atomic_twin(std::span<float> dwte, std::span<const float> dout,
                                         std::span<const std::int32_t> tokens, int V, int C) {
  for (std::size_t row = 0; row < tokens.size(); ++row) {
    const std::int32_t tok = tokens[row];
    if (tok < 0 || tok >= V) continue;
    float* g = dwte.data() + std::size_t(tok) * std::size_t(C);
    const float* d = dout.data() + row * std::size_t(C);
    for (int c = 0; c < C; ++c) g[c] = bf16::from_float(g[c] + d[c]).to_float();
  }
}

}  // namespace trainkit::model::kernels
