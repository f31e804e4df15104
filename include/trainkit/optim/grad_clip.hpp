// trainkit/optim/grad_clip.hpp — the global L2 norm of the gradients and the clipping factor.
//
// Clipping by global norm (Pascanu et al. 2013, as GPT-2/llm.c train) needs one number over all
// gradients. The sum of squares is accumulated in double over fixed-size chunks whose partial sums
// are then added in chunk order, so the result does not depend on the number of OpenMP threads:
// a run that resumes on a machine with a different core count computes the same norm bit for bit.
// The factor is applied inside the optimizer's update (no extra pass over the gradients).
#pragma once

#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

namespace trainkit::optim {

/// Elements per partial sum: large enough to amortise the OpenMP scheduling, small enough that a
/// d2 test model still spreads over both cores. Changing it changes the last bits of the norm.
inline constexpr std::size_t norm_chunk_elements = std::size_t{1} << 15;

/// Sum of squares of `values`, in double, in an order fixed by `norm_chunk_elements` alone.
template <class T>
double sum_of_squares(std::span<const T> values) {
  const std::size_t n = values.size();
  const std::size_t chunks = (n + norm_chunk_elements - 1) / norm_chunk_elements;
  std::vector<double> partial(chunks, 0.0);
  const T* v = values.data();
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t c = 0; c < std::ptrdiff_t(chunks); ++c) {
    const std::size_t begin = std::size_t(c) * norm_chunk_elements;
    const std::size_t end = begin + norm_chunk_elements < n ? begin + norm_chunk_elements : n;
    // Eight interleaved accumulators: a single running sum is bound by the add latency, and
    // these are combined in a fixed order, so the result still depends only on the chunk size.
    double lane[8] = {};
    std::size_t i = begin;
    for (; i + 8 <= end; i += 8) {
      for (int k = 0; k < 8; ++k) {
        const double x = static_cast<double>(v[i + k]);
        lane[k] += x * x;
      }
    }
    for (; i < end; ++i) {
      const double x = static_cast<double>(v[i]);
      lane[0] += x * x;
    }
    const double s =
        ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    partial[std::size_t(c)] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

/// Global L2 norm of `values` (see `sum_of_squares` for the summation order).
template <class T>
double global_norm(std::span<const T> values) {
  return std::sqrt(sum_of_squares(values));
}

/// The factor gradients are multiplied by so that their norm is at most `max_norm`: 1 when
/// `max_norm` is 0 (clipping off) or the norm is already within it. A NaN or infinite norm gives
/// 1 as well, so the non-finite value reaches the update and the caller (who sees the returned
/// norm) decides whether to stop, rather than being hidden behind a factor of 0.
inline double clip_factor(double norm, double max_norm) noexcept {
  if (max_norm > 0.0 && std::isfinite(norm) && norm > max_norm) return max_norm / norm;
  return 1.0;
}

}  // namespace trainkit::optim
