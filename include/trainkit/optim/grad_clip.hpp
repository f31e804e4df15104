// trainkit/optim/grad_clip.hpp — the global L2 norm of the gradients and the clipping factor.
//
// Clipping by global norm (Pascanu et al. 2013, as GPT-2/llm.c train) needs one number over all
// gradients. The sum of squares is accumulated in double over fixed-size chunks (the grid of
// comm/norm_chunks.hpp) whose partial sums are then added in chunk order, so the result does not
// depend on the number of OpenMP threads: a run that resumes on a machine with a different core
// count computes the same norm bit for bit. Because the grid is fixed by element index in the flat
// buffer, partial sums over a part of the buffer (one rank's shard) combine, in chunk order, into
// the sum one process computes.
//
// Who does what (one owner each): the threshold and the decision to clip are the trainer's
// (trainer_config::grad_clip; trainer/trainer.hpp runs this step after the reducer's finish()); a
// gradient reducer only states facts — which gradient ranges it holds summed
// (`owned_gradients()`) and how the ranks' partial sums of squares combine
// (`combine_norm_partials`, reduce/concepts.hpp); the maths is here, and `clip_factor` is the one
// function that turns a norm into a factor, on the host and (TRAINKIT_HOST_DEVICE) in the device
// step's kernel (optim/cuda/grad_clip.cuh). `host_grad_clip` is the step for host models: it sums
// the chunks of the gradient buckets this rank owns, lets the reducer combine the partial sums,
// adds them in chunk order and hands the factor to the optimizer's update (no extra pass over the
// gradients). `clip_then_update` is the same step for one process followed by an optimizer's
// update, for callers without a trainer (tests, benchmarks); the threshold is always the
// caller's, never the optimizer's.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "trainkit/comm/gradient_layout.hpp"
#include "trainkit/comm/norm_chunks.hpp"
#include "trainkit/core/cuda/host_device.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/execution_context.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/optim/clip_scale.hpp"

namespace trainkit::optim {

/// Elements per partial sum of the norm (comm/norm_chunks.hpp).
using comm::norm_chunk_elements;

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

namespace detail {

/// One summand of the norm: elements [begin, end), inside one chunk of the grid.
struct norm_piece {
  std::size_t begin, end;
};

/// The elements the ranges cover, merged, cut at the global chunk grid, in index order: the
/// pieces whose partial sums, added in this order, make the norm. Throws config_error naming
/// `who` for a range past the `n` gradients.
inline std::vector<norm_piece> norm_pieces(std::span<const model::gradient_range> ranges,
                                           std::size_t n, const char* who) {
  std::vector<model::gradient_range> merged(ranges.begin(), ranges.end());
  std::sort(merged.begin(), merged.end(),
            [](const auto& a, const auto& b) { return a.offset < b.offset; });
  std::vector<norm_piece> pieces;
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
    if (r.offset + r.count > n)
      throw config_error(std::string(who) + ": range [" + std::to_string(r.offset) + ", " +
                         std::to_string(r.offset + r.count) + ") leaves the " + std::to_string(n) +
                         " gradients");
    if (r.offset <= open_end && open_end > open_begin) {
      open_end = std::max(open_end, r.offset + r.count);
    } else {
      flush();
      open_begin = r.offset;
      open_end = r.offset + r.count;
    }
  }
  flush();
  return pieces;
}

/// Σ over the pieces `mine` marks (all when it is empty) of their squares, into
/// partial[i] (untouched where not mine), in parallel: each piece is one thread's work.
template <class T>
void piece_sums_of_squares(const T* v, std::span<const norm_piece> pieces,
                           std::span<const char> mine, std::span<double> partial) {
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t c = 0; c < std::ptrdiff_t(pieces.size()); ++c) {
    if (!mine.empty() && !mine[std::size_t(c)]) continue;
    const norm_piece p = pieces[std::size_t(c)];
    partial[std::size_t(c)] = chunk_sum_of_squares(v, p.begin, p.end);
  }
}

/// The partial sums added in piece order.
inline double sum_in_order(std::span<const double> partial) noexcept {
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace detail

/// Sum of squares of the elements of `values` the ranges cover, in the order `sum_of_squares`
/// uses: the ranges are merged, cut at the global chunk grid, and the pieces summed in index
/// order. Ranges that cover all of `values` give exactly `sum_of_squares(values)`.
template <class T>
double sum_of_squares(std::span<const T> values, std::span<const model::gradient_range> ranges) {
  const std::vector<detail::norm_piece> pieces =
      detail::norm_pieces(ranges, values.size(), "sum_of_squares");
  std::vector<double> partial(pieces.size(), 0.0);
  detail::piece_sums_of_squares(values.data(), std::span<const detail::norm_piece>(pieces), {},
                                std::span<double>(partial));
  return detail::sum_in_order(partial);
}

/// Global L2 norm of `values` (see `sum_of_squares` for the summation order).
template <class T>
double global_norm(std::span<const T> values) {
  return std::sqrt(sum_of_squares(values));
}

/// The factor gradients are multiplied by so that their norm is at most `max_norm`: 1 when
/// `max_norm` is 0 (clipping off) or the norm is already within it. A NaN or infinite norm gives
/// 1 as well, so the non-finite value reaches the update and the caller (who sees the returned
/// norm) decides whether to stop, rather than being hidden behind a factor of 0. The one rule:
/// the host steps call it, and so does the device step's kernel (optim/cuda/grad_clip.cuh).
TRAINKIT_HOST_DEVICE inline double clip_factor(double norm, double max_norm) noexcept {
  const bool finite = norm >= -DBL_MAX && norm <= DBL_MAX;  // std::isfinite is host-only
  if (max_norm > 0.0 && finite && norm > max_norm) return max_norm / norm;
  return 1.0;
}

/// The clipping step for host models. With a reducer (the trainer's call): the pieces of the
/// bucket ranges (the norm's summands, the same on every rank) that lie in the reducer's
/// `owned_gradients()` are summed here, the others left 0; the reducer's
/// `combine_norm_partials` makes every rank's array the one-process array (nothing to do when
/// every rank owns everything; a sum over ranks when each piece has one owner); the partials
/// are added in order and `clip_factor` gives the factor the optimizer's update multiplies the
/// gradients by. Without a reducer: one process, owning every bucket. An owned range that cuts a
/// piece (off the chunk grid) is a config_error: its rank's partial sums would not be one
/// process's; so is a replicated reducer that does not own every piece (one not attached).
/// `norm()` is the last norm computed.
class host_grad_clip {
 public:
  template <class T, class Reducer>
  clip_scale<host_memory> operator()(std::span<const T> grads,
                                     std::span<const model::gradient_bucket> buckets,
                                     Reducer& reducer, double max_norm, host_context& ctx) {
    const std::span<const model::gradient_range> owned = reducer.owned_gradients();
    sum_owned(grads, buckets, &owned);
    if constexpr (Reducer::delivered_gradients == gradient_layout::replicated)
      if (std::find(mine_.begin(), mine_.end(), 0) != mine_.end())
        throw config_error(
            "grad_clip: a reducer that delivers replicated gradients owns only part of the "
            "buckets (was it attached?)");
    reducer.combine_norm_partials(std::span<double>(partial_), ctx);
    return finish(max_norm);
  }

  template <class T>
  clip_scale<host_memory> operator()(std::span<const T> grads,
                                     std::span<const model::gradient_bucket> buckets,
                                     double max_norm, host_context&) {
    sum_owned(grads, buckets, nullptr);
    return finish(max_norm);
  }

  /// The norm before clipping of the last call (the same on every rank).
  double norm() const noexcept { return norm_; }

 private:
  // partial_[i] = this rank's sum of squares of piece i when it owns it (`owned` null: all).
  template <class T>
  void sum_owned(std::span<const T> grads, std::span<const model::gradient_bucket> buckets,
                 const std::span<const model::gradient_range>* owned) {
    ranges_.clear();
    for (const model::gradient_bucket& b : buckets)
      ranges_.insert(ranges_.end(), b.ranges.begin(), b.ranges.end());
    pieces_ = detail::norm_pieces(ranges_, grads.size(), "grad_clip");
    partial_.assign(pieces_.size(), 0.0);
    mine_.clear();
    if (owned) mark_owned(*owned);
    detail::piece_sums_of_squares(grads.data(), std::span<const detail::norm_piece>(pieces_),
                                  std::span<const char>(mine_), std::span<double>(partial_));
  }

  // mine_[i] = whether piece i lies inside the owned ranges; a range cutting a piece throws.
  void mark_owned(std::span<const model::gradient_range> owned) {
    std::vector<model::gradient_range> sorted(owned.begin(), owned.end());
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& a, const auto& b) { return a.offset < b.offset; });
    std::vector<model::gradient_range> merged;  // touching ranges joined, empty ones dropped
    for (const model::gradient_range& r : sorted) {
      if (r.count == 0) continue;
      if (!merged.empty() && r.offset <= merged.back().offset + merged.back().count) {
        const std::size_t end =
            std::max(merged.back().offset + merged.back().count, r.offset + r.count);
        merged.back().count = end - merged.back().offset;
      } else {
        merged.push_back(r);
      }
    }
    mine_.assign(pieces_.size(), 0);
    std::size_t r = 0;
    for (std::size_t i = 0; i < pieces_.size(); ++i) {
      const detail::norm_piece p = pieces_[i];
      while (r < merged.size() && merged[r].offset + merged[r].count <= p.begin) ++r;
      if (r == merged.size() || merged[r].offset >= p.end) continue;  // not this rank's
      const std::size_t lo = merged[r].offset, hi = lo + merged[r].count;
      if (lo > p.begin || hi < p.end)
        throw config_error("grad_clip: the owned gradient range [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + ") cuts the norm piece [" +
                           std::to_string(p.begin) + ", " + std::to_string(p.end) +
                           "); a reducer's owned ranges must fall on the norm chunk grid");
      mine_[i] = 1;
    }
  }

  clip_scale<host_memory> finish(double max_norm) {
    norm_ = std::sqrt(detail::sum_in_order(partial_));
    return {clip_factor(norm_, max_norm)};
  }

  std::vector<model::gradient_range> ranges_;  // every bucket's
  std::vector<detail::norm_piece> pieces_;     // the norm's summands, in index order
  std::vector<char> mine_;                     // per piece: owned by this rank (empty: all)
  std::vector<double> partial_;                // per piece: its sum of squares, once combined
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
