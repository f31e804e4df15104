// trainkit/trainer/composition.hpp — the compositions a trainer refuses at compile time.
//
// `trainer<Source, PrefetchRecipe, Model, Optimizer, Checkpointer, Reducer>` checks its policies
// against their roles' concepts and against each other (memory spaces, parameter types, the
// gradient layout the reducer delivers and the optimizer reads, a sharded optimizer's
// checkpointer) here, before the loop is compiled: each static_assert's message names
// the requirement that failed, and tests/trainer/mnc/ proves that each broken composition is
// refused with that message while the corrected one compiles.
#pragma once

#include <concepts>

#include "trainkit/checkpoint/concepts.hpp"
#include "trainkit/comm/gradient_layout.hpp"
#include "trainkit/data/concepts.hpp"
#include "trainkit/model/concepts.hpp"
#include "trainkit/optim/concepts.hpp"
#include "trainkit/prefetch/concepts.hpp"
#include "trainkit/reduce/concepts.hpp"

namespace trainkit {

namespace detail {

/// Whether the reducer declares that it delivers `layout` (false when it declares nothing: the
/// concept's own assert reports that).
template <class Reducer>
constexpr bool delivers(gradient_layout layout) {
  if constexpr (requires { Reducer::delivered_gradients; })
    return Reducer::delivered_gradients == layout;
  else
    return false;
}

/// Whether the optimizer declares that it expects `layout`.
template <class Optimizer>
constexpr bool expects(gradient_layout layout) {
  if constexpr (requires { Optimizer::expected_gradients; })
    return Optimizer::expected_gradients == layout;
  else
    return false;
}

}  // namespace detail

/// Instantiating it checks a composition; `passed` is true when it compiles at all.
template <class Source, class PrefetchRecipe, class Model, class Optimizer, class Checkpointer,
          class Reducer>
struct composition_checks {
  static_assert(data::data_source<Source>,
                "trainkit::trainer: Source does not satisfy trainkit::data::data_source "
                "(see data/concepts.hpp for what a data source must provide)");
  static_assert(prefetch::prefetch_recipe_for<PrefetchRecipe, Source>,
                "trainkit::trainer: PrefetchRecipe::bind<Source> does not satisfy "
                "trainkit::prefetch::prefetcher (see prefetch/concepts.hpp)");
  static_assert(model::model<Model>,
                "trainkit::trainer: Model does not satisfy trainkit::model::model "
                "(see model/concepts.hpp)");
  static_assert(reduce::gradient_reducer_for<Reducer, Model>,
                "trainkit::trainer: Reducer does not satisfy trainkit::reduce::gradient_reducer_for"
                "<Model> (see reduce/concepts.hpp)");
  static_assert(
      checkpoint::checkpointer<Checkpointer>,
      "trainkit::trainer: Checkpointer does not satisfy trainkit::checkpoint::checkpointer "
      "(see checkpoint/concepts.hpp)");
  static_assert(checkpoint::checkpointer_for<Checkpointer, typename Model::memory_space>,
                "trainkit::trainer: the Checkpointer reads host memory only but the Model's state "
                "is in device memory (requirement: Checkpointer::reads_device_memory when "
                "Model::memory_space is device_memory; wrap it in host_staged_checkpointer or use "
                "an asio_checkpointer with the CUDA stager)");

  static_assert(std::same_as<typename PrefetchRecipe::template bind<Source>::memory_space,
                             typename Model::memory_space>,
                "trainkit::trainer: the prefetcher delivers batches in a different memory space "
                "than the model reads (requirement: Prefetcher::memory_space == "
                "Model::memory_space; e.g. a device model needs pinned_prefetcher)");
  static_assert(std::same_as<typename Optimizer::memory_space, typename Model::memory_space>,
                "trainkit::trainer: the optimizer updates parameters in a different memory space "
                "than the model keeps them (requirement: Optimizer::memory_space == "
                "Model::memory_space)");
  static_assert(std::same_as<typename Optimizer::parameter_type, typename Model::parameter_type>,
                "trainkit::trainer: the optimizer's parameter_type differs from the model's "
                "(requirement: Optimizer::parameter_type == Model::parameter_type)");
  static_assert(
      optim::optimizer_for<Optimizer, Model>,
      "trainkit::trainer: Optimizer does not satisfy trainkit::optim::optimizer_for<Model> "
      "(see optim/concepts.hpp)");
  // Reducer and optimizer must agree on what the gradient buffer holds after the reduction
  // (comm/gradient_layout.hpp); either mismatch runs, and trains wrong, without this check.
  static_assert(!(detail::delivers<Reducer>(gradient_layout::reduce_scattered) &&
                  detail::expects<Optimizer>(gradient_layout::replicated)),
                "trainkit::trainer: the Reducer delivers reduce-scattered gradients (ZeRO-1: each "
                "rank holds the sum of its own shard only) but the Optimizer reads whole summed "
                "gradients and updates every parameter from them, so the ranks would diverge "
                "(requirement: Reducer::delivered_gradients == Optimizer::expected_gradients; pair "
                "reduce::mpi_zero1 with optim::zero1_adamw_cpu and reduce::nccl_zero1 with "
                "optim::zero1_adamw_cuda, or use an all-reduce reducer; see "
                "comm/gradient_layout.hpp)");
  static_assert(!(detail::delivers<Reducer>(gradient_layout::replicated) &&
                  detail::expects<Optimizer>(gradient_layout::reduce_scattered)),
                "trainkit::trainer: the Optimizer expects reduce-scattered gradients (ZeRO-1: it "
                "updates its shard from the sums a ZeRO-1 reducer leaves there) but the Reducer "
                "delivers replicated ones (reduce::single or an all-reduce) "
                "(requirement: Reducer::delivered_gradients == Optimizer::expected_gradients; pair "
                "optim::zero1_adamw_cpu with reduce::mpi_zero1 and optim::zero1_adamw_cuda with "
                "reduce::nccl_zero1; see comm/gradient_layout.hpp)");
  static_assert(checkpoint::checkpointer_for_optimizer<Checkpointer, Optimizer, Reducer>,
                "trainkit::trainer: the Optimizer's state is sharded over ranks "
                "(checkpoint::sharded_optimizer, e.g. ZeRO-1) but the Checkpointer cannot save it "
                "(requirement: checkpoint::sharded_checkpointer<Checkpointer, Reducer>; use "
                "sync_checkpointer or no_checkpoint; see checkpoint/concepts.hpp)");

  static constexpr bool passed = true;
};

}  // namespace trainkit
