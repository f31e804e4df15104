// trainkit/reduce/mpi_allreduce.hpp — data-parallel gradient averaging on the CPU with MPI.
//
// Every rank runs the same trainer on its own slice of the global batch. When backward has
// finished a gradient bucket (core/step_protocol.hpp) the reducer starts a non-blocking
// MPI_Iallreduce (sum, in place) on each of its ranges, so the reduction of layer L runs while
// backward computes layer L-1; `finish` waits for all of them. The reducer only sums: the trainer
// scales every micro-step by 1/(micro-batches × ranks), so each rank's gradient is already its
// share of the global mean and the sum over ranks is the mean over all ranks × micro-batches,
// computed with the same operations as one process accumulating ranks × micro-batches (a division
// here as well would count the ranks twice). With 2 ranks and one micro-batch each that is bit
// for bit one process's gradient; docs/distributed.md says why and when it is not.
//
// Every rank then holds the whole summed gradients (gradient_layout::replicated): it owns every
// bucket's ranges, so the trainer's clipping step (optim/grad_clip.hpp) computes the plain global
// norm alike on every rank and there is nothing to combine. It is also `rank_aware`
// (reduce/concepts.hpp): the trainer averages the loss, sums the validation losses and agrees on
// stopping through it, on the same communicator.
//
// Open MPI progresses a non-blocking collective only inside MPI calls (no progress thread by
// default), so each bucket_ready also tests the outstanding requests to move them along.
// bucket_timing::after_backward starts every reduction in finish() instead, in publication order
// (the same collectives, so the same sums): the baseline that measures what the overlap hides.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "trainkit/comm/gradient_layout.hpp"
#include "trainkit/comm/mpi_check.hpp"
#include "trainkit/comm/mpi_communicator.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/execution_context.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/reduce/concepts.hpp"

namespace trainkit::reduce {

/// When mpi_allreduce starts a bucket's reduction: as soon as backward publishes it, or all of
/// them once backward is done (in finish()).
enum class bucket_timing { with_backward, after_backward };

class mpi_allreduce {
 public:
  /// After finish() every element holds the sum over ranks.
  static constexpr gradient_layout delivered_gradients = gradient_layout::replicated;

  /// Works on a duplicate of `comm` with MPI_ERRORS_RETURN (comm/mpi_communicator.hpp), so a
  /// failed collective throws instead of aborting. MPI must be initialised (comm::mpi_session).
  explicit mpi_allreduce(MPI_Comm comm = MPI_COMM_WORLD,
                         bucket_timing timing = bucket_timing::with_backward)
      : comm_(comm), timing_(timing) {}

  mpi_allreduce(const mpi_allreduce&) = delete;
  mpi_allreduce& operator=(const mpi_allreduce&) = delete;

  /// Only before attach (the trainer moves its reducer in, then attaches it).
  mpi_allreduce(mpi_allreduce&& other) noexcept
      : comm_(std::move(other.comm_)),
        base_(std::exchange(other.base_, nullptr)),
        element_size_(other.element_size_),
        datatype_(other.datatype_),
        buckets_(std::move(other.buckets_)),
        ready_(std::move(other.ready_)),
        requests_(std::move(other.requests_)),
        timing_(other.timing_),
        deferred_(std::move(other.deferred_)),
        owned_(std::move(other.owned_)) {}
  mpi_allreduce& operator=(mpi_allreduce&&) = delete;

  ~mpi_allreduce() {
    // A step abandoned by an exception may leave reductions in flight on buffers that are about
    // to go away; their outcome no longer matters, only that they are finished (before the
    // communicator is freed).
    if (comm_.valid() && !requests_.empty())
      MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  }

  int rank() const noexcept { return comm_.rank(); }
  int world_size() const noexcept { return comm_.size(); }
  bucket_timing timing() const noexcept { return timing_; }

  /// Keeps where the model's gradients are and how they are bucketed. Host memory only; float or
  /// double gradients.
  template <class M, class Context>
  requires std::same_as<typename M::memory_space, host_memory>
  void attach(M& model, Context&) {
    using T = typename M::parameter_type;
    static_assert(std::same_as<T, float> || std::same_as<T, double>,
                  "mpi_allreduce reduces float or double gradients");
    const auto grads = model.gradients();
    base_ = reinterpret_cast<std::byte*>(grads.data());
    element_size_ = sizeof(T);
    datatype_ = comm::mpi_datatype_of<T>();
    const auto buckets = model.gradient_buckets();
    buckets_.assign(buckets.begin(), buckets.end());
    ready_.assign(buckets_.size(), false);
    owned_.clear();
    for (const model::gradient_bucket& b : buckets_)
      for (const model::gradient_range& r : b.ranges) {
        if (r.offset + r.count > grads.size())
          throw config_error("mpi_allreduce: bucket '" + b.name + "' reaches past the " +
                             std::to_string(grads.size()) + " gradients");
        owned_.push_back(r);
      }
  }

  /// Starts the sum over ranks of bucket i's ranges (after_backward: queues it for finish()).
  /// Every rank publishes the buckets in the same order (backward's), which MPI requires of
  /// collectives on one communicator.
  void bucket_ready(std::size_t i) {
    if (base_ == nullptr) throw config_error("mpi_allreduce: bucket_ready before attach");
    if (i >= buckets_.size())
      throw config_error("mpi_allreduce: bucket " + std::to_string(i) + " of " +
                         std::to_string(buckets_.size()));
    if (ready_[i])
      throw config_error("mpi_allreduce: bucket '" + buckets_[i].name +
                         "' published twice in one step");
    ready_[i] = true;
    if (timing_ == bucket_timing::after_backward) {
      deferred_.push_back(i);
      return;
    }
    start(i);
    int all_done = 0;
    comm::mpi_check(
        MPI_Testall(int(requests_.size()), requests_.data(), &all_done, MPI_STATUSES_IGNORE),
        "MPI_Testall");
  }

  /// Waits for every bucket's sum over ranks (after_backward: starts them first). Throws
  /// config_error if a bucket was never published this step.
  void finish() {
    try {
      for (const std::size_t i : deferred_) start(i);
    } catch (...) {
      deferred_.clear();
      ready_.assign(buckets_.size(), false);
      throw;
    }
    deferred_.clear();
    const int waited = MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    requests_.clear();
    comm::mpi_check(waited, "MPI_Waitall");
    const auto missing = std::find(ready_.begin(), ready_.end(), false);
    const std::size_t first_missing = std::size_t(missing - ready_.begin());
    ready_.assign(buckets_.size(), false);  // the next step starts clean either way
    if (first_missing < buckets_.size())
      throw config_error("mpi_allreduce: bucket '" + buckets_[first_missing].name +
                         "' was not published before finish()");
  }

  /// Every bucket's ranges (after attach): every rank holds all the summed gradients.
  std::span<const model::gradient_range> owned_gradients() const noexcept { return owned_; }
  /// Nothing to combine: every rank computed every partial sum, from the same summed gradients.
  void combine_norm_partials(std::span<double>, host_context&) noexcept {}

  /// Element-wise sum over ranks, in place (MPI_Allreduce).
  void sum(std::span<double> values) { comm_.sum(values); }
  /// The mean over ranks, summed in rank order: the same bits on every rank.
  double average(double x) { return comm_.average(x); }
  /// True on every rank when it is true on one.
  bool any(bool flag) { return comm_.any(flag); }

 private:
  // MPI_Iallreduce (sum, in place) of bucket i's ranges; the requests join requests_.
  void start(std::size_t i) {
    for (const model::gradient_range& r : buckets_[i].ranges) {
      // MPI counts are int: a range past 2^31-1 elements goes in pieces.
      for (std::size_t done = 0; done < r.count;) {
        const std::size_t n = std::min<std::size_t>(r.count - done, INT_MAX);
        MPI_Request request = MPI_REQUEST_NULL;
        comm::mpi_check(MPI_Iallreduce(MPI_IN_PLACE, base_ + (r.offset + done) * element_size_,
                                       int(n), datatype_, MPI_SUM, comm_.get(), &request),
                        "MPI_Iallreduce");
        requests_.push_back(request);
        done += n;
      }
    }
  }

  comm::mpi_communicator comm_;  // first: freed after the requests are waited for
  std::byte* base_ = nullptr;    // gradients() of the attached model
  std::size_t element_size_ = 0;
  MPI_Datatype datatype_ = MPI_DATATYPE_NULL;
  std::vector<model::gradient_bucket> buckets_;  // copied: publication order, ranges
  std::vector<bool> ready_;                      // published this step
  std::vector<MPI_Request> requests_;            // in flight this step
  bucket_timing timing_ = bucket_timing::with_backward;
  std::vector<std::size_t> deferred_;         // after_backward: published, not yet started
  std::vector<model::gradient_range> owned_;  // every bucket's ranges
};

static_assert(rank_aware<mpi_allreduce>);

}  // namespace trainkit::reduce
