// trainkit/optim/detail/ns_coefficients.hpp — the coefficients and the cost of Muon's
// Newton–Schulz iteration, shared by the host iteration (newton_schulz.hpp, Eigen), its bf16 twin
// and the CUDA iteration (no Eigen in either of those).
//
// X ← a·X + b·(X·Xᵀ)·X + c·(X·Xᵀ)²·X: Keller Jordan's quintic
// (https://kellerjordan.github.io/posts/muon/), whose coefficients push every singular value of a
// Frobenius-normalised matrix into roughly [0.7, 1.2] in five steps.
#pragma once

#include <algorithm>
#include <cstddef>

namespace trainkit::optim::detail {

/// The quintic's coefficients: X ← a·X + b·A·X + c·A²·X.
struct ns_coefficients {
  float a, b, c;
};

/// Keller Jordan's coefficients (the published Muon's).
inline constexpr ns_coefficients muon_quintic{3.4445f, -4.7750f, 2.0315f};

/// FLOPs of `steps` iterations on a rows × cols matrix on its smaller Gram side (for load
/// balancing and benchmarks): X·Xᵀ and B·X cost 2·min²·max each, A·A 2·min³.
inline double newton_schulz_flops(std::ptrdiff_t rows, std::ptrdiff_t cols, int steps) noexcept {
  const double s = double(std::min(rows, cols)), l = double(std::max(rows, cols));
  return double(steps) * (4.0 * s * s * l + 2.0 * s * s * s);
}

}  // namespace trainkit::optim::detail
