// trainkit/comm/nccl_sum_op.hpp — the reduction the NCCL reducers' bucket collectives use: a plain
// sum, or a sum of every rank's values pre-multiplied by a factor (ncclRedOpCreatePreMulSum).
//
// The trainer already scales each micro-step by 1/(micro-batches × ranks), so training uses the
// plain sum (factor 1: ncclSum, nothing created). A factor other than 1 exists for the one-GPU
// tests: over a world of one, an in-place ncclSum launches nothing, so a test cannot see a bucket
// reduced before backward wrote it; a pre-multiplied sum launches a real kernel on the reducer's
// stream at the point the collective was enqueued, and ×2 against twice the single-process
// gradients (exact in bf16) shows the ordering. Created when the reducer attaches (the
// communicator is then known and the reducer no longer moves), destroyed with it.
#pragma once

#include <nccl.h>

#include <cmath>
#include <string>
#include <utility>

#include "trainkit/comm/nccl_check.hpp"
#include "trainkit/core/bf16.hpp"
#include "trainkit/core/error.hpp"

namespace trainkit::comm {

class nccl_sum_op {
 public:
  /// `factor` multiplies every rank's contribution before the sum; `who` names the reducer (and
  /// its config field) in the error for a factor that is not a finite non-zero bf16.
  explicit nccl_sum_op(float factor = 1.0f, const char* who = "nccl reducer") : factor_(factor) {
    const float rounded = bf16::from_float(factor).to_float();
    if (!std::isfinite(rounded) || rounded == 0.0f)
      throw config_error(std::string(who) + ".premultiply must be a finite non-zero bf16, got " +
                         std::to_string(factor));
  }

  nccl_sum_op(nccl_sum_op&& o) noexcept
      : factor_(o.factor_), op_(o.op_), comm_(std::exchange(o.comm_, nullptr)) {}
  nccl_sum_op& operator=(nccl_sum_op&&) = delete;
  nccl_sum_op(const nccl_sum_op&) = delete;
  nccl_sum_op& operator=(const nccl_sum_op&) = delete;
  ~nccl_sum_op() {
    if (comm_ != nullptr) (void)ncclRedOpDestroy(op_, comm_);
  }

  float factor() const noexcept { return factor_; }

  /// Makes the operator for bf16 collectives on `comm` (once; a plain sum needs nothing).
  void create(ncclComm_t comm) {
    if (factor_ == 1.0f || comm_ != nullptr) return;
    bf16 scalar = bf16::from_float(factor_);  // host-immediate: read during this call
    nccl_check(ncclRedOpCreatePreMulSum(&op_, &scalar, ncclBfloat16, ncclScalarHostImmediate, comm),
               "ncclRedOpCreatePreMulSum", comm);
    comm_ = comm;
  }

  /// The operator to pass to a bf16 collective: ncclSum, or the pre-multiplied sum.
  ncclRedOp_t get() const noexcept { return comm_ != nullptr ? op_ : ncclSum; }

 private:
  float factor_ = 1.0f;
  ncclRedOp_t op_ = ncclSum;
  ncclComm_t comm_ = nullptr;  // set once the pre-multiplied operator exists
};

}  // namespace trainkit::comm
