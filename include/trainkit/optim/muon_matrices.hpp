// trainkit/optim/muon_matrices.hpp — how the Muon family splits a parameter layout: the matrices
// Muon updates (by role; every 2-D slice, every row part of a fused slice) and the runs of
// elements left to AdamW, with their tensors re-addressed into one packed buffer.
//
// Shared by muon_cpu.hpp and muon_cuda.hpp, so that both make the same split and pack their state
// in the same order. No Eigen and no CUDA here: a .cu translation unit includes it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/core/tensor_role.hpp"

namespace trainkit::optim {

/// One matrix Muon updates: `rows` × `cols` elements, contiguous at `offset` in the model's flat
/// buffer and at `state_offset` in the packed momentum buffer.
struct muon_matrix {
  std::size_t offset = 0;
  std::size_t state_offset = 0;
  std::int64_t rows = 0, cols = 0;

  std::size_t numel() const noexcept { return std::size_t(rows) * std::size_t(cols); }
  friend bool operator==(const muon_matrix&, const muon_matrix&) = default;
};

/// The matrices Muon updates in `layout` (tensors whose role is in `roles`), in the order of
/// their offsets: every 2-D slice, every part of a fused slice. Throws config_error, prefixed by
/// `who`, for a 1-D tensor in those roles or row_parts that do not sum to the slice's rows.
inline std::vector<muon_matrix> muon_matrices(std::span<const tensor_info> layout,
                                              tensor_role_set roles, std::string_view who) {
  std::vector<const tensor_info*> sorted;
  for (const tensor_info& t : layout)
    if (roles.contains(t.role)) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const tensor_info* a, const tensor_info* b) { return a->offset < b->offset; });
  std::vector<muon_matrix> out;
  std::size_t state = 0;
  for (const tensor_info* t : sorted) {
    if (t->shape.size() < 2)
      throw config_error(std::string(who) + ": tensor '" + t->name + "' has role " +
                         std::string(tensor_role_name(t->role)) +
                         ", which muon_config.muon_roles gives to Muon, but is not a matrix");
    std::vector<std::int64_t> parts = t->row_parts;
    if (parts.empty()) parts.push_back(t->rows());
    if (std::accumulate(parts.begin(), parts.end(), std::int64_t{0}) != t->rows() ||
        std::any_of(parts.begin(), parts.end(), [](std::int64_t r) { return r <= 0; }))
      throw config_error(std::string(who) + ": tensor '" + t->name +
                         "' has row_parts that do not split its " + std::to_string(t->rows()) +
                         " rows into positive parts");
    std::size_t offset = t->offset;
    for (std::size_t slice = 0; slice < t->slices(); ++slice)
      for (std::int64_t r : parts) {
        out.push_back({offset, state, r, t->cols()});
        offset += out.back().numel();
        state += out.back().numel();
      }
  }
  return out;
}

/// Elements [begin, end) of the flat buffer that AdamW updates (a run between matrices).
struct muon_run {
  std::size_t begin = 0, end = 0;

  friend bool operator==(const muon_run&, const muon_run&) = default;
};

/// The complement of `matrices` (sorted by offset, as muon_matrices returns them) in [0, n): what
/// AdamW updates, padding included, as sorted runs. Throws config_error, prefixed by `who`, when
/// two matrices overlap.
inline std::vector<muon_run> muon_adamw_runs(std::span<const muon_matrix> matrices, std::size_t n,
                                             std::string_view who) {
  std::vector<muon_run> out;
  std::size_t cursor = 0;
  for (const muon_matrix& m : matrices) {
    if (m.offset < cursor)
      throw config_error(std::string(who) + ": two matrices overlap in the layout");
    if (m.offset > cursor) out.push_back({cursor, m.offset});
    cursor = m.offset + m.numel();
  }
  if (cursor < n) out.push_back({cursor, n});
  return out;
}

/// Elements of all `runs` together: the length of the packed AdamW buffer.
inline std::size_t muon_run_elements(std::span<const muon_run> runs) noexcept {
  std::size_t n = 0;
  for (const muon_run& r : runs) n += r.end - r.begin;
  return n;
}

/// The tensors AdamW updates (roles not in `muon_roles`), with offsets into the packed buffer of
/// `runs`; each must lie wholly in one run, else config_error prefixed by `who`.
inline std::vector<tensor_info> muon_adamw_layout(std::span<const tensor_info> layout,
                                                  tensor_role_set muon_roles,
                                                  std::span<const muon_run> runs,
                                                  std::string_view who) {
  std::vector<tensor_info> out;
  for (const tensor_info& t : layout) {
    if (muon_roles.contains(t.role)) continue;
    std::size_t at = 0;
    bool placed = false;
    for (const muon_run& r : runs) {
      if (t.offset >= r.begin && t.offset + t.numel() <= r.end) {
        tensor_info p = t;
        p.offset = at + (t.offset - r.begin);
        out.push_back(std::move(p));
        placed = true;
        break;
      }
      at += r.end - r.begin;
    }
    if (!placed)
      throw config_error(std::string(who) + ": tensor '" + t.name +
                         "' overlaps a matrix Muon updates");
  }
  return out;
}

}  // namespace trainkit::optim
