// trainkit/trainer/ranks.hpp — the trainer's view of the ranks of a data-parallel run.
//
// A reducer that is reduce::rank_aware knows its rank among world_size processes and offers the
// few collectives the loop needs beside the gradients' reduction: the mean of the step's loss, the
// sum of the validation losses, and the stop consensus (one rank's SIGINT stops every rank at the
// same step). Any other reducer (reduce::single) is a world of one, where these are identities.
#pragma once

#include <span>

#include "trainkit/reduce/concepts.hpp"

namespace trainkit {

template <class Reducer>
int rank_of(const Reducer& r) noexcept {
  if constexpr (reduce::rank_aware<Reducer>) return int(r.rank());
  return 0;
}

template <class Reducer>
int world_size_of(const Reducer& r) noexcept {
  if constexpr (reduce::rank_aware<Reducer>) return int(r.world_size());
  return 1;
}

/// Collective: whether `flag` is true on any rank.
template <class Reducer>
bool any_rank(Reducer& r, bool flag) {
  if constexpr (reduce::rank_aware<Reducer>) return r.any(flag);
  return flag;
}

/// Collective: the mean of `x` over the ranks.
template <class Reducer>
double average_over_ranks(Reducer& r, double x) {
  if constexpr (reduce::rank_aware<Reducer>) return r.average(x);
  return x;
}

/// Collective: the element-wise sum over the ranks, in place.
template <class Reducer>
void sum_over_ranks(Reducer& r, std::span<double> values) {
  if constexpr (reduce::rank_aware<Reducer>) r.sum(values);
}

}  // namespace trainkit
