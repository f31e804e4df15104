// trainkit/reduce/single.hpp — the gradient reducer of a single process: nothing to reduce.
//
// The seam the data-parallel reducers fill: the trainer calls it exactly as it would call an
// all-reduce, so a single-process run goes through the same step protocol as a multi-rank one.
#pragma once

#include <cstddef>
#include <span>

#include "trainkit/reduce/concepts.hpp"

namespace trainkit::reduce {

struct single {
  template <class M, class Context>
  void attach(M&, Context&) noexcept {}
  void bucket_ready(std::size_t) noexcept {}
  void finish() noexcept {}

  int rank() const noexcept { return 0; }
  int world_size() const noexcept { return 1; }
  void sum(std::span<double>) noexcept {}
  double average(double x) noexcept { return x; }
  bool any(bool flag) noexcept { return flag; }
};

static_assert(rank_aware<single>);

}  // namespace trainkit::reduce
