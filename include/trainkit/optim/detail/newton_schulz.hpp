// trainkit/optim/detail/newton_schulz.hpp — the orthogonalisation at the heart of Muon, on the
// host: X ← a·X + (b·A + c·A²)·X with A = X·Xᵀ, five times, after X = G / (‖G‖_F + 1e-7).
//
// The quintic Newton–Schulz iteration of Keller Jordan's Muon
// (https://kellerjordan.github.io/posts/muon/): with the coefficients (3.4445, −4.7750, 2.0315)
// it drives every singular value of the Frobenius-normalised G into roughly [0.7, 1.2] in five
// steps, i.e. approximates U·Vᵀ of G = U·S·Vᵀ without an SVD. The normalisation bounds the
// spectral norm by 1, where the iteration converges. A tall matrix (rows > cols) is iterated as
// its transpose, so the Gram matrix A is the smaller (min × min) side and the three products cost
// 2·min²·max + 2·min³ + 2·min²·max FLOPs per step.
//
// The coefficients may differ per iteration (the Polar Express schedule,
// optim/muon_orthogonalizer.hpp): the overload taking a span runs one iteration per entry.
//
// fp32 products through linalg::gemm_block (one thread: the caller parallelises over matrices, so
// a matrix's bits depend neither on the thread count nor on which thread or rank computes it).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "trainkit/core/linalg/gemm_cpu.hpp"
#include "trainkit/optim/detail/ns_coefficients.hpp"

namespace trainkit::optim::detail {

/// The buffers one orthogonalisation needs; reused across matrices (grows to the largest).
template <class S>
struct newton_schulz_workspace {
  std::vector<S> x, x_next;   // (min, max)
  std::vector<S> gram, poly;  // (min, min)
};

/// out (rows, cols) = the Newton–Schulz orthogonalisation of g (rows, cols), both row-major and
/// dense; `out` may alias `g`. One iteration per entry of `iterations`, with its coefficients.
template <class S>
void newton_schulz(const S* g, S* out, std::ptrdiff_t rows, std::ptrdiff_t cols,
                   std::span<const ns_coefficients> iterations, newton_schulz_workspace<S>& ws) {
  using linalg::index;
  using linalg::operand;
  const bool tall = rows > cols;  // iterate on Gᵀ so that X·Xᵀ is the small side
  const index s = tall ? cols : rows, l = tall ? rows : cols;
  const std::size_t n = std::size_t(s) * std::size_t(l);
  ws.x.resize(n);
  ws.x_next.resize(n);
  ws.gram.resize(std::size_t(s) * std::size_t(s));
  ws.poly.resize(std::size_t(s) * std::size_t(s));

  // X = G (or Gᵀ) / (‖G‖_F + 1e-7); the norm summed in double.
  double sq = 0.0;
  for (std::size_t i = 0; i < n; ++i) sq += double(g[i]) * double(g[i]);
  const S inv = S(1) / (static_cast<S>(std::sqrt(sq)) + S(1e-7));
  S* x = ws.x.data();
  if (tall) {
    for (index r = 0; r < rows; ++r)
      for (index c = 0; c < cols; ++c) x[c * l + r] = g[r * cols + c] * inv;
  } else {
    for (std::size_t i = 0; i < n; ++i) x[i] = g[i] * inv;
  }

  S* gram = ws.gram.data();
  S* poly = ws.poly.data();
  S* next = ws.x_next.data();
  for (const ns_coefficients& k : iterations) {
    const S a = k.a, b = k.b, c = k.c;
    linalg::gemm_block<S>(gram, s, operand<S>{x, l, false}, operand<S>{x, l, true}, s, s, l,
                          false);  // A = X·Xᵀ (s, s)
    linalg::gemm_block<S>(poly, s, operand<S>{gram, s, false}, operand<S>{gram, s, false}, s, s, s,
                          false);  // A·A (s, s)
    for (std::size_t i = 0; i < std::size_t(s) * std::size_t(s); ++i)
      poly[i] = b * gram[i] + c * poly[i];  // B = b·A + c·A² (s, s)
    linalg::gemm_block<S>(next, l, operand<S>{poly, s, false}, operand<S>{x, l, false}, s, l, s,
                          false);                             // B·X (s, l)
    for (std::size_t i = 0; i < n; ++i) next[i] += a * x[i];  // X ← a·X + B·X
    std::swap(x, next);
  }

  if (tall) {
    for (index r = 0; r < rows; ++r)
      for (index c2 = 0; c2 < cols; ++c2) out[r * cols + c2] = x[c2 * l + r];
  } else {
    std::copy(x, x + n, out);
  }
}

/// The same with `steps` iterations of one set of coefficients `k` (Keller Jordan's by default).
template <class S>
void newton_schulz(const S* g, S* out, std::ptrdiff_t rows, std::ptrdiff_t cols, int steps,
                   newton_schulz_workspace<S>& ws, ns_coefficients k = muon_quintic) {
  const std::vector<ns_coefficients> iterations(std::size_t(steps < 0 ? 0 : steps), k);
  newton_schulz<S>(g, out, rows, cols, std::span<const ns_coefficients>(iterations), ws);
}

}  // namespace trainkit::optim::detail
