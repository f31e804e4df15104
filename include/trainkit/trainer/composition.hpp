// trainkit/trainer/composition.hpp — the compositions a trainer refuses at compile time.
//
// `trainer<Source, PrefetchRecipe, Model, Optimizer, Checkpointer, Reducer>` checks its policies
// against their roles' concepts and against each other (memory spaces, parameter types, a sharded
// optimizer's checkpointer) here, before the loop is compiled: each static_assert's message names
// the requirement that failed, and tests/trainer/mnc/ proves that each broken composition is
// refused with that message while the corrected one compiles.
#pragma once

#include <concepts>

#include "trainkit/checkpoint/concepts.hpp"
#include "trainkit/data/concepts.hpp"
#include "trainkit/model/concepts.hpp"
#include "trainkit/optim/concepts.hpp"
#include "trainkit/prefetch/concepts.hpp"
#include "trainkit/reduce/concepts.hpp"

namespace trainkit {

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
  static_assert(checkpoint::checkpointer_for_optimizer<Checkpointer, Optimizer, Reducer>,
                "trainkit::trainer: the Optimizer's state is sharded over ranks "
                "(checkpoint::sharded_optimizer, e.g. ZeRO-1) but the Checkpointer cannot save it "
                "(requirement: checkpoint::sharded_checkpointer<Checkpointer, Reducer>; use "
                "sync_checkpointer or no_checkpoint; see checkpoint/concepts.hpp)");

  static constexpr bool passed = true;
};

}  // namespace trainkit
