// trainkit/reduce/single.hpp — the gradient reducer of a single process: nothing to reduce.
//
// The seam the data-parallel reducers fill: the trainer calls it exactly as it would call an
// all-reduce, so a single-process run goes through the same step protocol as a multi-rank one.
// Its gradients are its own, whole (gradient_layout::replicated): it owns every bucket's ranges,
// and the partial sums of squares of the trainer's clipping step (optim/grad_clip.hpp) need no
// combining. One `single` serves both memory spaces; this header needs no CUDA.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "trainkit/comm/gradient_layout.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/reduce/concepts.hpp"

namespace trainkit::reduce {

class single {
 public:
  static constexpr gradient_layout delivered_gradients = gradient_layout::replicated;

  /// Keeps the ranges of the model's buckets: the gradients it owns.
  template <class M, class Context>
  void attach(M& model, Context&) {
    owned_.clear();
    for (const model::gradient_bucket& b : model.gradient_buckets())
      owned_.insert(owned_.end(), b.ranges.begin(), b.ranges.end());
  }
  void bucket_ready(std::size_t) noexcept {}
  void finish() noexcept {}

  /// Every bucket's ranges (after attach): one process holds all its gradients.
  std::span<const model::gradient_range> owned_gradients() const noexcept { return owned_; }
  /// Nothing to combine: this process computed every partial sum.
  template <class Context>
  void combine_norm_partials(std::span<double>, Context&) noexcept {}

  int rank() const noexcept { return 0; }
  int world_size() const noexcept { return 1; }
  void sum(std::span<double>) noexcept {}
  double average(double x) noexcept { return x; }
  bool any(bool flag) noexcept { return flag; }

 private:
  std::vector<model::gradient_range> owned_;
};

static_assert(rank_aware<single>);

}  // namespace trainkit::reduce
