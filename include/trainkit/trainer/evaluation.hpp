// trainkit/trainer/evaluation.hpp — the validation loss of a run, over one rank or several.
//
// Evaluation reads the first `batches` batches of the validation source. With several ranks each
// evaluates the global batches j ≡ rank (mod ranks) — its validation source is sliced over the
// ranks like the training one — and the per-batch losses are summed over the ranks in global
// batch order, so every rank gets the same mean, bit for bit the mean one process would get.
#pragma once

#include <cstddef>
#include <vector>

#include "trainkit/trainer/ranks.hpp"

namespace trainkit {

/// Mean loss of `model.forward` over `batches` batches of `val` (from where it stands).
/// Collective when the reducer is rank_aware: every rank calls it.
template <class Prefetcher, class Model, class Reducer>
double validation_loss(Prefetcher& val, Model& model, int batches, Reducer& reducer) {
  std::vector<double> losses(std::size_t(batches), 0.0);  // global batch order
  for (int j = rank_of(reducer); j < batches; j += world_size_of(reducer))
    losses[std::size_t(j)] = model.forward(val.next());
  sum_over_ranks(reducer, losses);  // each element has one rank's loss, zero from the others
  double sum = 0;
  for (double l : losses) sum += l;
  return sum / batches;
}

}  // namespace trainkit
