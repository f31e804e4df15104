// trainkit/optim/muon_matrices.hpp — how the Muon family splits a parameter layout: the matrices
// Muon updates (by role; every 2-D slice, every row part of a fused slice) and the runs of
// elements left to AdamW, with their tensors re-addressed into one packed buffer.
//
// Shared by muon_cpu.hpp and muon_cuda.hpp, so that both make the same split and pack their state
// in the same order, and by the sharded forms (sharded_muon_cpu.hpp, sharded_muon_cuda.hpp): how
// ranks share the matrices (muon_shards, muon_share_layout) and the host twin of their gather
// (muon_pack, muon_unpack). No Eigen and no CUDA here: a .cu translation unit includes it.
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
#include "trainkit/optim/detail/ns_coefficients.hpp"

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

/// Elements [offset, offset + count) of the packed momentum of every matrix.
struct muon_state_range {
  std::size_t offset = 0, count = 0;
};

/// Matrices [first, last) of a muon_matrices list: the ones an optimizer instance updates.
struct muon_matrix_range {
  std::size_t first = 0, last = 0;

  friend bool operator==(const muon_matrix_range&, const muon_matrix_range&) = default;
};

/// NorMuon's lines of a matrix (one second moment each): its rows when rows ≥ cols, else its
/// columns (the longer side).
constexpr std::int64_t normuon_lines(const muon_matrix& m) noexcept {
  return m.rows >= m.cols ? m.rows : m.cols;
}

/// Where an owned matrix's NorMuon lines lie in a sharded checkpoint: `count` lines at `line` of
/// the optimizer's packed second moment (the owned matrices' lines one after another), and at
/// `place` of the checkpoint's momentum-shaped copy (the matrix's momentum offset within the
/// rank's range, which starts at `range_offset`). sharded_muon_cpu and sharded_muon_cuda share it.
struct normuon_line_place {
  std::size_t line = 0, place = 0, count = 0;
};

inline std::vector<normuon_line_place> normuon_line_places(std::span<const muon_matrix> matrices,
                                                           muon_matrix_range owned,
                                                           std::size_t range_offset) {
  std::vector<normuon_line_place> out;
  std::size_t line = 0;
  for (std::size_t i = owned.first; i < owned.last; ++i) {
    out.push_back(
        {line, matrices[i].state_offset - range_offset, std::size_t(normuon_lines(matrices[i]))});
    line += out.back().count;
  }
  return out;
}

/// A sharded checkpoint's "optim.muon.normuon" (1: written with NorMuon, 0: without) against this
/// run's setting; throws config_error naming muon_config.normuon when they differ.
inline void check_normuon_setting(std::uint64_t written, bool normuon) {
  if (written != (normuon ? 1u : 0u))
    throw config_error(std::string("muon_config.normuon: the resumed checkpoint was written ") +
                       (normuon ? "without" : "with") +
                       " NorMuon (\"optim.muon.normuon\" = " + std::to_string(written) +
                       "), this run has normuon = " + (normuon ? "true" : "false"));
}

/// How `world_size` ranks share the matrices: contiguous ranges in list order (so each rank's
/// momentum is one contiguous range of the packed buffer), cut where the running Newton–Schulz
/// cost first reaches r/world_size of the total. Every rank computes the same cut from the same
/// layout; a rank may get none when there are fewer matrices than ranks.
inline std::vector<muon_matrix_range> muon_shards(std::span<const muon_matrix> matrices,
                                                  int world_size, int ns_steps) {
  if (world_size <= 0) throw config_error("muon_shards: world size " + std::to_string(world_size));
  std::vector<double> cost_before(matrices.size() + 1, 0.0);  // cost of matrices [0, i)
  for (std::size_t i = 0; i < matrices.size(); ++i)
    cost_before[i + 1] =
        cost_before[i] + detail::newton_schulz_flops(matrices[i].rows, matrices[i].cols, ns_steps);
  const double total = cost_before.back();
  std::vector<muon_matrix_range> out;
  std::size_t first = 0;
  for (int r = 0; r < world_size; ++r) {
    std::size_t last = matrices.size();
    if (r + 1 < world_size) {
      const double goal = total * double(r + 1) / double(world_size);
      last = first;  // the first cut at or past the goal, nearer side: as even as whole matrices
      while (last < matrices.size() && cost_before[last + 1] <= goal) ++last;
      if (last < matrices.size() && goal - cost_before[last] > cost_before[last + 1] - goal) ++last;
    }
    out.push_back({first, last});
    first = last;
  }
  return out;
}

/// One rank's share of the matrices in a sharded Muon: matrices [first, last) of the list
/// (`matrices`) and where they lie in the packed buffer of every matrix (`packed`), the range its
/// momentum occupies and the piece of the all-gather it sends. Rank order tiles the buffer.
struct muon_share {
  muon_matrix_range matrices;
  muon_state_range packed;
};

/// Every rank's share, in rank order: muon_shards' cut of `matrices` (sorted, packed as
/// muon_matrices returns them) with the packed range each cut covers. sharded_muon_cpu (its
/// MPI_Allgatherv counts and displacements) and sharded_muon_cuda (its grouped broadcasts) take
/// their pieces from here, so both shard exactly alike.
inline std::vector<muon_share> muon_share_layout(std::span<const muon_matrix> matrices,
                                                 int world_size, int ns_steps) {
  const std::vector<muon_matrix_range> cuts = muon_shards(matrices, world_size, ns_steps);
  const std::size_t total =
      matrices.empty() ? 0 : matrices.back().state_offset + matrices.back().numel();
  const auto packed_at = [&](std::size_t i) {
    return i < matrices.size() ? matrices[i].state_offset : total;
  };
  std::vector<muon_share> out;
  out.reserve(cuts.size());
  for (const muon_matrix_range& c : cuts)
    out.push_back({c, {packed_at(c.first), packed_at(c.last) - packed_at(c.first)}});
  return out;
}

/// The send side of a sharded Muon's gather, on the host (the twin of the device pack in
/// optim/cuda/muon_kernels.cuh): copies matrices [share.first, share.last) from the model's flat
/// buffer to their places in `packed`, the buffer of every matrix (muon_matrix::state_offset).
template <class T>
void muon_pack(std::span<const muon_matrix> matrices, muon_matrix_range share, const T* flat,
               T* packed) {
  for (std::size_t i = share.first; i < share.last; ++i)
    std::copy_n(flat + matrices[i].offset, matrices[i].numel(), packed + matrices[i].state_offset);
}

/// The receive side: every matrix from `packed` to its place in the flat buffer (a rank's own
/// come back unchanged: it packed them itself).
template <class T>
void muon_unpack(std::span<const muon_matrix> matrices, const T* packed, T* flat) {
  for (const muon_matrix& m : matrices)
    std::copy_n(packed + m.state_offset, m.numel(), flat + m.offset);
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
