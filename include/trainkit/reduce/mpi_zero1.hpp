// trainkit/reduce/mpi_zero1.hpp — the gradient half of ZeRO-1 on the CPU with MPI.
//
// ZeRO stage 1 (Rajbhandari et al. 2020) shards the optimizer state: rank r owns one contiguous
// shard of the flat buffer (comm/zero1_shards.hpp), and needs the sum over ranks of that shard's
// gradients only. So where mpi_allreduce all-reduces, this reducer reduce-scatters: when backward
// has finished a bucket, each of the bucket's ranges starts one MPI_Ireduce_scatter whose pieces
// go to the ranks owning them (a range inside one shard is a reduction to that rank alone), into
// a shard-sized receive buffer; `finish` waits for them and copies the summed shard into the
// model's gradient buffer, where the optimizer reads it (the rest of the buffer keeps this rank's
// own unreduced contributions and is read by no one). Half the bytes of an all-reduce reach each
// rank; the other half moves when the optimizer all-gathers the updated parameters
// (optim/zero1_adamw_cpu.hpp).
//
// With the gradients sharded, the global norm must be too. The reducer states the facts the
// trainer's clipping step (optim/grad_clip.hpp) needs: it owns its shard (whose ends lie on the
// norm chunk grid), so the step sums the squares of that shard's chunks only, and the ranks'
// arrays of partial sums (zero where a rank does not own the chunk) combine by an element-wise
// sum over ranks (MPI_Allreduce: each slot has one non-zero addend, so exact); every rank then
// adds them in chunk order, which is what one process's `sum_of_squares` does: the same norm
// bit for bit, on every rank.
//
// Like mpi_allreduce it only sums (the trainer scales micro-steps by 1/(micro-batches × ranks))
// and is rank_aware on the same communicator. Use it with optim::zero1_adamw_cpu on the same
// communicator: both cut the buffer with comm::zero1_shard. It delivers reduce-scattered
// gradients (comm/gradient_layout.hpp), so the trainer refuses it under an optimizer that reads
// the whole buffer (adamw_cpu, muon_cpu, sharded_muon_cpu).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <concepts>
#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "trainkit/checkpoint/concepts.hpp"
#include "trainkit/comm/gradient_layout.hpp"
#include "trainkit/comm/mpi_check.hpp"
#include "trainkit/comm/mpi_communicator.hpp"
#include "trainkit/comm/zero1_shards.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/execution_context.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/reduce/concepts.hpp"

namespace trainkit::reduce {

class mpi_zero1 {
 public:
  /// After finish() only this rank's shard holds sums: the ZeRO-1 optimizers' layout.
  static constexpr gradient_layout delivered_gradients = gradient_layout::reduce_scattered;

  /// Works on a duplicate of `comm` with MPI_ERRORS_RETURN (comm/mpi_communicator.hpp). MPI
  /// must be initialised (comm::mpi_session).
  explicit mpi_zero1(MPI_Comm comm = MPI_COMM_WORLD) : comm_(comm) {}

  mpi_zero1(const mpi_zero1&) = delete;
  mpi_zero1& operator=(const mpi_zero1&) = delete;
  /// Only before attach (the trainer moves its reducer in, then attaches it).
  mpi_zero1(mpi_zero1&&) noexcept = default;
  mpi_zero1& operator=(mpi_zero1&&) = delete;

  ~mpi_zero1() {
    // A step abandoned by an exception may leave reductions in flight on buffers that are about
    // to go away: they must be finished before the buffers and the communicator are freed.
    if (comm_.valid() && !requests_.empty())
      MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  }

  int rank() const noexcept { return comm_.rank(); }
  int world_size() const noexcept { return comm_.size(); }

  /// Keeps where the model's gradients are and how they are bucketed, and plans every range's
  /// reduce-scatter. Host memory only; float or double gradients.
  template <class M, class Context>
  requires std::same_as<typename M::memory_space, host_memory>
  void attach(M& model, Context&) {
    using T = typename M::parameter_type;
    const auto grads = model.gradients();
    base_ = reinterpret_cast<std::byte*>(grads.data());
    element_size_ = sizeof(T);
    datatype_ = comm::mpi_datatype_of<T>();
    n_ = grads.size();
    shards_ = comm::zero1_shards(n_, comm_.size());
    shard_ = shards_[std::size_t(comm_.rank())];
    received_.assign(shard_.count * element_size_, std::byte{0});
    const auto buckets = model.gradient_buckets();
    names_.clear();
    plans_.assign(buckets.size(), {});
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      names_.push_back(buckets[b].name);
      for (const model::gradient_range& r : buckets[b].ranges) {
        if (r.offset + r.count > n_)
          throw config_error("mpi_zero1: bucket '" + buckets[b].name + "' reaches past the " +
                             std::to_string(n_) + " gradients");
        plan_range(plans_[b], r);
      }
    }
    ready_.assign(plans_.size(), false);
  }

  /// Starts the reduce-scatter of bucket i's ranges. Every rank publishes the buckets in the same
  /// order (backward's), which MPI requires of collectives on one communicator.
  void bucket_ready(std::size_t i) {
    if (base_ == nullptr) throw config_error("mpi_zero1: bucket_ready before attach");
    if (i >= plans_.size())
      throw config_error("mpi_zero1: bucket " + std::to_string(i) + " of " +
                         std::to_string(plans_.size()));
    if (ready_[i])
      throw config_error("mpi_zero1: bucket '" + names_[i] + "' published twice in one step");
    ready_[i] = true;
    for (const piece& p : plans_[i]) {
      MPI_Request request = MPI_REQUEST_NULL;
      comm::mpi_check(
          MPI_Ireduce_scatter(base_ + p.offset * element_size_,
                              received_.data() + p.received_offset * element_size_, p.counts.data(),
                              datatype_, MPI_SUM, comm_.get(), &request),
          "MPI_Ireduce_scatter");
      requests_.push_back(request);
    }
    int all_done = 0;  // Open MPI progresses non-blocking collectives only inside MPI calls
    comm::mpi_check(
        MPI_Testall(int(requests_.size()), requests_.data(), &all_done, MPI_STATUSES_IGNORE),
        "MPI_Testall");
  }

  /// Waits for every bucket's reduce-scatter and puts this rank's summed shard into the model's
  /// gradients. Throws config_error if a bucket was never published this step.
  void finish() {
    const int waited = MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    requests_.clear();
    comm::mpi_check(waited, "MPI_Waitall");
    const auto missing = std::find(ready_.begin(), ready_.end(), false);
    const std::size_t first_missing = std::size_t(missing - ready_.begin());
    ready_.assign(plans_.size(), false);  // the next step starts clean either way
    if (first_missing < plans_.size())
      throw config_error("mpi_zero1: bucket '" + names_[first_missing] +
                         "' was not published before finish()");
    if (!received_.empty())
      std::memcpy(base_ + shard_.offset * element_size_, received_.data(), received_.size());
  }

  /// This rank's shard (after attach): the only gradients it holds summed.
  std::span<const model::gradient_range> owned_gradients() const noexcept { return {&shard_, 1}; }

  /// The element-wise sum over ranks of the clipping step's partial sums of squares, in place:
  /// each rank's are non-zero only in its own shard's chunks, so every slot has one non-zero
  /// addend and the sum is that value exactly, on every rank.
  void combine_norm_partials(std::span<double> partials, host_context&) {
    for (std::size_t done = 0; done < partials.size();) {  // MPI counts are int
      const std::size_t n = std::min<std::size_t>(partials.size() - done, INT_MAX);
      comm::mpi_check(MPI_Allreduce(MPI_IN_PLACE, partials.data() + done, int(n), MPI_DOUBLE,
                                    MPI_SUM, comm_.get()),
                      "MPI_Allreduce (norm partials)");
      done += n;
    }
  }

  /// This rank's shard of the gradient buffer (after attach).
  model::gradient_range shard() const noexcept { return shard_; }
  /// Bytes this reducer allocated beside the model: the shard-sized receive buffer.
  std::size_t buffer_bytes() const noexcept { return received_.size(); }

  void sum(std::span<double> values) { comm_.sum(values); }
  double average(double x) { return comm_.average(x); }
  bool any(bool flag) { return comm_.any(flag); }

 private:
  /// One MPI_Ireduce_scatter: elements [offset, offset + Σ counts) of the gradients, counts[r]
  /// of them (in rank order, as the shards lie in the buffer) summed onto rank r.
  struct piece {
    std::size_t offset = 0;
    std::vector<int> counts;          // per rank; must live until the request completes
    std::size_t received_offset = 0;  // where this rank's part lands in received_
  };

  void plan_range(std::vector<piece>& plan, const model::gradient_range& r) {
    // MPI counts are int: a range past 2^31-1 elements goes in pieces.
    for (std::size_t done = 0; done < r.count;) {
      const std::size_t begin = r.offset + done;
      const std::size_t end = begin + std::min<std::size_t>(r.count - done, INT_MAX);
      piece p{begin, std::vector<int>(shards_.size(), 0), 0};
      for (const comm::zero1_piece& q : comm::zero1_pieces({begin, end - begin}, shards_))
        p.counts[std::size_t(q.owner)] = int(q.count);
      const model::gradient_range mine = comm::zero1_overlap({begin, end - begin}, shard_);
      p.received_offset = mine.count == 0 ? 0 : mine.offset - shard_.offset;
      plan.push_back(std::move(p));
      done = end - r.offset;
    }
  }

  comm::mpi_communicator comm_;  // first: freed after the requests are waited for
  std::byte* base_ = nullptr;    // gradients() of the attached model
  std::size_t element_size_ = 0;
  std::size_t n_ = 0;
  MPI_Datatype datatype_ = MPI_DATATYPE_NULL;
  std::vector<model::gradient_range> shards_;  // every rank's, in rank order
  model::gradient_range shard_{};              // this rank's
  std::vector<std::byte> received_;            // (shard_.count,) the summed shard
  std::vector<std::string> names_;             // bucket names, for messages
  std::vector<std::vector<piece>> plans_;      // per bucket
  std::vector<bool> ready_;                    // published this step
  std::vector<MPI_Request> requests_;          // in flight this step
};

static_assert(rank_aware<mpi_zero1>);
// Its collectives are what a sharded checkpoint of zero1_adamw_cpu's state agrees over.
static_assert(checkpoint::save_communicator<mpi_zero1>);

}  // namespace trainkit::reduce
