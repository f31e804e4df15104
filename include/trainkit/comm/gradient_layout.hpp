// trainkit/comm/gradient_layout.hpp — what a rank's gradient buffer holds once the reduction
// across ranks is finished: the contract between a gradient reducer and an optimizer.
//
// A reducer says which layout it delivers (`Reducer::delivered_gradients`, reduce/concepts.hpp),
// an optimizer which one it reads (`Optimizer::expected_gradients`, optim/concepts.hpp), and the
// trainer refuses at compile time a pair that disagrees (trainer/composition.hpp). The property is
// about the gradients, not about whose state is sharded: optim::sharded_muon_cpu shards its state
// but reads whole summed gradients, so it pairs with an all-reduce, while the ZeRO-1 optimizers
// update their shard from reduce-scattered gradients and pair only with the ZeRO-1 reducers.
// A mismatch would not fail at run time: a ZeRO-1 reducer under a whole-buffer optimizer makes
// every rank update every parameter from gradients summed only in its own shard, so the ranks
// silently diverge; a ZeRO-1 optimizer under reduce::single in a job of several ranks updates its
// shard from one rank's unreduced gradients, and under an all-reduce it pays for twice the
// traffic it needs. Hence a compile-time pairing rather than a convention.
//
// It lives in comm/, the layer both optim/ and reduce/ stand on, with the rest of what the two
// share (comm/norm_chunks.hpp, comm/zero1_shards.hpp): neither folder includes the other, in either
// direction, and tests/layers fails the build's tests if one ever does.
#pragma once

namespace trainkit {

enum class gradient_layout {
  /// Every element holds the sum over ranks (one process: its own gradients): reduce::single,
  /// the all-reduces. Every rank owns every bucket; the clipping step (optim/grad_clip.hpp)
  /// takes the plain global norm over the buckets, with nothing to combine.
  replicated,
  /// Only this rank's shard of the buffer (comm::zero1_shards: contiguous shards in rank order,
  /// cut on the norm-chunk grid) holds the sum over ranks; the rest holds this rank's own
  /// unreduced contribution, which nobody may read. ZeRO-1: reduce::mpi_zero1 / nccl_zero1 and
  /// optim::zero1_adamw_cpu / zero1_adamw_cuda.
  reduce_scattered,
};

/// "replicated" or "reduce_scattered", for messages.
constexpr const char* gradient_layout_name(gradient_layout g) noexcept {
  return g == gradient_layout::replicated ? "replicated" : "reduce_scattered";
}

}  // namespace trainkit
