// trainkit/core/linalg/detail/gemm_tuning.hpp — the host-side arithmetic of the cuBLASLt GEMM
// cache and autotuner (core/linalg/gemm_cublaslt.cuh), apart so it is tested without a GPU.
//
// Two decisions live here. The alignment a pointer really has (cuBLASLt's heuristic assumes 256
// bytes unless told, and an algorithm chosen for more alignment than a pointer has can fault), and
// so what goes into the algorithm cache's key: each operand's alignment in its own slot — folding
// two into one with `&` gives 0 whenever the two powers of two differ, and an algorithm picked for
// a 256-byte-aligned bias would be reused for a 128-byte-aligned one. And which timed candidate
// wins: candidates that failed to run are skipped, and the heuristic's reference time is that of
// the first candidate that ran (not a 0 when candidate 0 is the one that failed).
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace trainkit::linalg::detail {

/// The largest power of two dividing the address and the stride (bytes), at most 256.
constexpr std::int64_t alignment_of(std::uintptr_t address, std::int64_t stride_bytes = 0) {
  const std::uintptr_t v = address | std::uintptr_t(stride_bytes) | 256u;
  return std::int64_t(v & (~v + 1));  // lowest set bit
}

inline std::int64_t alignment_of(const void* p, std::int64_t stride_bytes = 0) {
  return alignment_of(reinterpret_cast<std::uintptr_t>(p), stride_bytes);
}

/// The cache key's epilogue slots: {alignment of the bias (or bias gradient), of the aux matrix},
/// each on its own (a null pointer counts as 256: the epilogue does not use it).
inline std::array<std::int64_t, 2> epilogue_alignments(const void* bias, const void* aux) {
  return {alignment_of(bias), alignment_of(aux)};
}

/// The autotuner's verdict over the heuristic's candidates in its order.
struct candidate_pick {
  int chosen = -1;        // the fastest candidate that ran; -1 when none ran
  int first_ran = -1;     // the first candidate that ran (0 unless the heuristic's first failed)
  double first_ms = 0;    // its time: what the heuristic alone would have given
  double best_ms = 0;     // the chosen one's time
};

/// `ms[c]` is candidate c's time per GEMM, negative when it failed to run. The first of equal
/// times wins, so the heuristic's order breaks ties.
inline candidate_pick pick_fastest(std::span<const float> ms) {
  candidate_pick p;
  for (std::size_t c = 0; c < ms.size(); ++c) {
    if (ms[c] < 0) continue;
    if (p.first_ran < 0) {
      p.first_ran = int(c);
      p.first_ms = ms[c];
    }
    if (p.chosen < 0 || ms[c] < p.best_ms) {
      p.chosen = int(c);
      p.best_ms = ms[c];
    }
  }
  return p;
}

}  // namespace trainkit::linalg::detail
