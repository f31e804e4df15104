// trainkit/model/transformer/layout.hpp — building a family's flat parameter layout and its
// gradient buckets, the same way for every family.
//
// A layout is a list of named tensors packed without gaps, in the order of the family's tensor
// enum (layout_builder). Every transformer family publishes its gradients in the same buckets, in
// the order backward finishes them (core/step_protocol.hpp): first the head's (the final norm and
// an untied head, final once the classifier and the final norm's backward ran), then layer L-1
// down to layer 0 (one range in each per-layer tensor, which are stacked (L, ...)), then the
// embeddings (a tied head adds into wte, so it is final only after the embedding's backward).
// transformer_cpu and the CUDA models publish bucket transformer_layer_bucket(L, l) right after
// layer l's backward.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "trainkit/core/step_protocol.hpp"
#include "trainkit/core/tensor.hpp"

namespace trainkit::model {

/// Appends tensors to a flat layout, each at the offset where the previous one ends.
class layout_builder {
 public:
  void add(const char* name, std::vector<std::int64_t> shape, tensor_role role,
           std::vector<std::int64_t> row_parts = {}) {
    tensor_info t{name, std::move(shape), offset_, role, std::move(row_parts)};
    offset_ += t.numel();
    out_.push_back(std::move(t));
  }
  std::vector<tensor_info> take() && { return std::move(out_); }

 private:
  std::vector<tensor_info> out_;
  std::size_t offset_ = 0;
};

/// The buckets of the file comment over `layout` (num_layers L): `head_name` with the whole
/// tensors `head`, then "layer l" for l = L-1..0 with layer l's slice of each tensor in
/// [first_layer, last_layer] (indices into layout), then "embeddings" with the whole `embeddings`.
inline std::vector<gradient_bucket> transformer_gradient_buckets(
    const std::vector<tensor_info>& layout, int num_layers, std::string head_name,
    const std::vector<std::size_t>& head, std::size_t first_layer, std::size_t last_layer,
    std::initializer_list<std::size_t> embeddings) {
  auto whole = [&](std::size_t t) { return gradient_range{layout[t].offset, layout[t].numel()}; };
  std::vector<gradient_bucket> out;
  gradient_bucket h{std::move(head_name), {}};
  for (std::size_t t : head) h.ranges.push_back(whole(t));
  out.push_back(std::move(h));
  for (int l = num_layers - 1; l >= 0; --l) {
    gradient_bucket b{"layer " + std::to_string(l), {}};
    for (std::size_t t = first_layer; t <= last_layer; ++t) {
      const std::size_t per_layer = layout[t].numel() / std::size_t(num_layers);
      b.ranges.push_back({layout[t].offset + std::size_t(l) * per_layer, per_layer});
    }
    out.push_back(std::move(b));
  }
  gradient_bucket e{"embeddings", {}};
  for (std::size_t t : embeddings) e.ranges.push_back(whole(t));
  out.push_back(std::move(e));
  return out;
}

/// Index of layer l's bucket among transformer_gradient_buckets of an L-layer model.
inline std::size_t transformer_layer_bucket(int num_layers, int l) noexcept {
  return 1 + std::size_t(num_layers - 1 - l);
}

/// Index of the embeddings' bucket (the last one published).
inline std::size_t transformer_embedding_bucket(int num_layers) noexcept {
  return 1 + std::size_t(num_layers);
}

}  // namespace trainkit::model
