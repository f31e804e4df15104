// trainkit/optim/grad_clip.hpp — the global L2 norm of the gradients and the clipping factor.
//
// Clipping by global norm (Pascanu et al. 2013, as GPT-2/llm.c train) needs one number over all
// gradients. The sum of squares is accumulated in double over fixed-size chunks whose partial sums
// are then added in chunk order, so the result does not depend on the number of OpenMP threads:
// a run that resumes on a machine with a different core count computes the same norm bit for bit.
// The chunk grid is fixed by element index in the flat buffer, so partial sums over a part of the
// buffer (one rank's shard) combine, in chunk order, into the sum one process computes.
// `host_grad_clip` is the clipping step of the reducers that leave every rank the whole summed
// gradients (reduce::single, reduce::mpi_allreduce) for host models: it sums over the gradient
// buckets and hands the factor to the optimizer's update (no extra pass over the gradients).
// `clip_then_update` is the same step followed by an optimizer's update, for callers without a
// trainer (tests, benchmarks); the threshold is always the caller's, never the optimizer's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/core/execution_context.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/optim/clip_scale.hpp"

namespace trainkit::optim {

/// Elements per partial sum: large enough to amortise the OpenMP scheduling, small enough that a
/// d2 test model still spreads over both cores. Changing it changes the last bits of the norm.
inline constexpr std::size_t norm_chunk_elements = std::size_t{1} << 15;

namespace detail {

/// Σ v[i]² over [begin, end), in double. Eight interleaved accumulators: a single running sum is
/// bound by the add latency, and these are combined in a fixed order, so the result still depends
/// only on the range.
template <class T>
double chunk_sum_of_squares(const T* v, std::size_t begin, std::size_t end) {
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
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

}  // namespace detail

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
    partial[std::size_t(c)] = detail::chunk_sum_of_squares(v, begin, end);
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

/// Sum of squares of the elements of `values` the ranges cover, in the order `sum_of_squares`
/// uses: the ranges are merged, cut at the global chunk grid, and the pieces summed in index
/// order. Ranges that cover all of `values` give exactly `sum_of_squares(values)`.
template <class T>
double sum_of_squares(std::span<const T> values, std::span<const model::gradient_range> ranges) {
  std::vector<model::gradient_range> merged(ranges.begin(), ranges.end());
  std::sort(merged.begin(), merged.end(),
            [](const auto& a, const auto& b) { return a.offset < b.offset; });
  struct piece {
    std::size_t begin, end;
  };
  std::vector<piece> pieces;
  std::size_t open_begin = 0, open_end = 0;
  auto flush = [&] {
    for (std::size_t b = open_begin; b < open_end;) {
      const std::size_t grid = (b / norm_chunk_elements + 1) * norm_chunk_elements;
      const std::size_t e = std::min(grid, open_end);
      pieces.push_back({b, e});
      b = e;
    }
  };
  for (const model::gradient_range& r : merged) {
    if (r.offset + r.count > values.size())
      throw config_error("sum_of_squares: range [" + std::to_string(r.offset) + ", " +
                         std::to_string(r.offset + r.count) + ") leaves the " +
                         std::to_string(values.size()) + " gradients");
    if (r.offset <= open_end && open_end > open_begin) {
      open_end = std::max(open_end, r.offset + r.count);
    } else {
      flush();
      open_begin = r.offset;
      open_end = r.offset + r.count;
    }
  }
  flush();
  std::vector<double> partial(pieces.size(), 0.0);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t c = 0; c < std::ptrdiff_t(pieces.size()); ++c) {
    const piece p = pieces[std::size_t(c)];
    partial[std::size_t(c)] = detail::chunk_sum_of_squares(values.data(), p.begin, p.end);
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

/// The clipping step for host models whose gradients are whole on every rank: the global norm over
/// the gradient buckets and the factor the optimizer's update multiplies the gradients by.
/// `norm()` is the last norm computed.
class host_grad_clip {
 public:
  template <class T>
  clip_scale<host_memory> operator()(std::span<const T> grads,
                                     std::span<const model::gradient_bucket> buckets,
                                     double max_norm, host_context&) {
    ranges_.clear();
    for (const model::gradient_bucket& b : buckets)
      ranges_.insert(ranges_.end(), b.ranges.begin(), b.ranges.end());
    norm_ = std::sqrt(sum_of_squares(grads, std::span<const model::gradient_range>(ranges_)));
    return {clip_factor(norm_, max_norm)};
  }

  /// The norm before clipping of the last call.
  double norm() const noexcept { return norm_; }

 private:
  std::vector<model::gradient_range> ranges_;
  double norm_ = 0.0;
};

/// `grad_clip_of<Space>::type` is the clipping step for models in Space.
template <class Space>
struct grad_clip_of;

template <>
struct grad_clip_of<host_memory> {
  using type = host_grad_clip;
};

template <class Space>
using grad_clip_t = typename grad_clip_of<Space>::type;

/// Clipping by global norm at `max_norm` (0 = off) over the whole gradient buffer, then an
/// optimizer's update: what the trainer does with reduce::single, for callers without a trainer
/// (tests, benchmarks). For a device model include optim/device_grad_clip.hpp; the update is
/// enqueued on this object's own context, after the clipping step, and the call returns once both
/// are done. `operator()` returns the norm before clipping.
template <class Space>
class clip_then_update {
 public:
  explicit clip_then_update(double max_norm) : max_norm_(max_norm) {}

  template <class Optimizer, class Model>
  float operator()(Optimizer& optimizer, Model& model, float lr) {
    using T = typename Model::parameter_type;
    const std::span<const T> grads(model.gradients());
    const model::gradient_bucket all{"all", {{0, grads.size()}}};
    const auto scale =
        clip_(grads, std::span<const model::gradient_bucket>(&all, 1), max_norm_, ctx_);
    optimizer.update(model, lr, scale, ctx_);
    ctx_.synchronize();
    return static_cast<float>(clip_.norm());
  }

  double max_norm() const noexcept { return max_norm_; }
  execution_context_t<Space>& context() noexcept { return ctx_; }

 private:
  double max_norm_;
  execution_context_t<Space> ctx_;
  grad_clip_t<Space> clip_;
};

}  // namespace trainkit::optim
