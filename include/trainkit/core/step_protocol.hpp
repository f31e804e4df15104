// trainkit/core/step_protocol.hpp — the vocabulary of one optimizer step (step protocol v2).
//
// An optimizer step is `count` micro-steps of gradient accumulation, then a reduction of the
// gradients across ranks, global-norm clipping and the optimizer's update. The trainer describes
// each micro-step to the model with a `micro_step`; the model adds grad_scale·∂loss/∂θ to its
// gradients and keeps the loss where it computed it (on the device for a CUDA model): the trainer
// reads the step's mean loss once, after the update. During the last micro-step's backward the
// model publishes its gradients bucket by bucket, in the order backward finishes them, so that a
// reducer can start on layer L while backward computes layer L-1.
//
// A bucket is a list of contiguous ranges of the flat gradient buffer: with llm.c's tensor-major
// layout (all layers' ln1w, then all layers' ln1b, ...) one layer's gradients are one range in
// each of the 12 per-layer tensors. The buckets of a model tile its gradient buffer exactly, so
// the clipping step over the buckets reads every gradient once.
//
// Every role speaks it (models publish buckets, reducers reduce them, the clipping step and the
// sharded optimizers cut them), so it lives in core/, below all of them. The types are
// trainkit::gradient_range etc.; models and the code written against them spell them
// model::gradient_range, which names the same types.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "trainkit/core/error.hpp"

namespace trainkit {

/// A contiguous range [offset, offset + count) of the flat gradient buffer, in elements.
struct gradient_range {
  std::size_t offset = 0;
  std::size_t count = 0;

  friend bool operator==(const gradient_range&, const gradient_range&) = default;
};

/// Gradients that become final together (e.g. one transformer layer).
struct gradient_bucket {
  std::string name;                    // "lnf", "layer 11", ..., "embeddings": for messages
  std::vector<gradient_range> ranges;  // in ascending offset order

  std::size_t numel() const noexcept {
    std::size_t n = 0;
    for (const gradient_range& r : ranges) n += r.count;
    return n;
  }
};

/// Called by the model with the index (into its `gradient_buckets()`) of each bucket whose
/// gradients are final. A plain function pointer and a context, so a model's backward does not
/// depend on the reducer's type and the call costs an indirect jump. On a device the call comes
/// right after the last kernel writing the bucket was enqueued on the execution context's stream:
/// a reducer on another stream records an event on that stream now and waits on it.
struct bucket_observer {
  void* self = nullptr;
  void (*ready)(void* self, std::size_t bucket) = nullptr;

  void operator()(std::size_t bucket) const {
    if (ready) ready(self, bucket);
  }
};

/// One micro-step of gradient accumulation, as the trainer describes it to the model.
struct micro_step {
  float grad_scale = 1.0f;    // gradients += grad_scale·∂loss/∂θ (1/(count·ranks): a mean)
  int index = 0;              // 0 .. count-1; index 0 starts a new step's loss accumulation
  int count = 1;              // micro-steps in this optimizer step
  bucket_observer on_bucket;  // told of each final bucket during the last micro-step's backward

  bool first() const noexcept { return index == 0; }
  /// Gradients are final at the end of this micro-step's backward: buckets get published.
  bool last() const noexcept { return index + 1 == count; }
};

/// Throws config_error unless `buckets` tile [0, n) exactly (no gap, no overlap); `who` names the
/// model in the message. Models call it once when they build their buckets. The ranges are sorted
/// first: publication order is backward's, not the buffer's.
inline void check_buckets_tile(std::span<const gradient_bucket> buckets, std::size_t n,
                               const char* who) {
  std::vector<gradient_range> all;
  for (const gradient_bucket& b : buckets) all.insert(all.end(), b.ranges.begin(), b.ranges.end());
  std::sort(all.begin(), all.end(),
            [](const gradient_range& a, const gradient_range& b) { return a.offset < b.offset; });
  std::size_t cursor = 0;
  for (const gradient_range& r : all) {
    if (r.offset != cursor)
      throw config_error(std::string(who) + ": gradient buckets " +
                         (r.offset < cursor ? "overlap" : "leave a gap") + " at element " +
                         std::to_string(std::min(r.offset, cursor)));
    cursor = r.offset + r.count;
  }
  if (cursor != n)
    throw config_error(std::string(who) + ": gradient buckets cover " + std::to_string(cursor) +
                       " of " + std::to_string(n) + " gradients");
}

namespace model {
using trainkit::bucket_observer;
using trainkit::check_buckets_tile;
using trainkit::gradient_bucket;
using trainkit::gradient_range;
using trainkit::micro_step;
}  // namespace model

}  // namespace trainkit
