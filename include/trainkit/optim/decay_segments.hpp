// trainkit/optim/decay_segments.hpp — a model's parameter layout as ranges that do or do not get
// weight decay, shared by adamw_cpu, adamw_cuda and any optimizer with a decay rule.
//
// The flat parameter buffer is cut into sorted, disjoint element ranges that cover all of it: one
// per tensor, decayed when the tensor's role is in the given set, and one for each gap no tensor
// names (padding), never decayed. Optimizers then loop over ranges instead of tensors and never
// look at names or shapes. Each range also carries its role's learning-rate multiplier
// (optim/role_lr_scales.hpp; 1 for gaps).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/core/tensor_role.hpp"
#include "trainkit/optim/role_lr_scales.hpp"

namespace trainkit::optim {

/// Elements [begin, end) of the flat buffer, and whether weight decay applies to them.
struct decay_segment {
  std::size_t begin = 0;
  std::size_t end = 0;
  bool decay = false;
  float lr_scale = 1.0f;  // the role's learning-rate multiplier

  friend bool operator==(const decay_segment&, const decay_segment&) = default;
};

/// The segments of a buffer of `size` elements described by `layout` (any order), tensors whose
/// role is in `decay_roles` decayed, each with its role's multiplier of `lr_scales`. Throws
/// config_error, prefixed by `who` (the optimizer's name), for a tensor that leaves the buffer or
/// overlaps another.
inline std::vector<decay_segment> decay_segments(std::span<const tensor_info> layout,
                                                 std::size_t size, tensor_role_set decay_roles,
                                                 std::string_view who,
                                                 const role_lr_scales& lr_scales = {}) {
  std::vector<const tensor_info*> sorted;
  sorted.reserve(layout.size());
  for (const tensor_info& t : layout) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const tensor_info* a, const tensor_info* b) { return a->offset < b->offset; });
  const std::string prefix(who);
  std::vector<decay_segment> out;
  std::size_t cursor = 0;
  for (const tensor_info* t : sorted) {
    const std::size_t end = t->offset + t->numel();
    if (end > size || end < t->offset)
      throw config_error(prefix + ": tensor '" + t->name + "' (offset " +
                         std::to_string(t->offset) + ", " + std::to_string(t->numel()) +
                         " elements) lies outside the model's " + std::to_string(size) +
                         " parameters");
    if (t->offset < cursor)
      throw config_error(prefix + ": tensor '" + t->name + "' overlaps the tensor before it");
    if (t->offset > cursor) out.push_back({cursor, t->offset, false});
    if (end > t->offset)
      out.push_back({t->offset, end, decay_roles.contains(t->role), lr_scales.of(t->role)});
    cursor = end;
  }
  if (cursor < size) out.push_back({cursor, size, false});
  return out;
}

}  // namespace trainkit::optim
