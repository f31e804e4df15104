// trainkit/checkpoint/sharded.hpp — saving and resuming a state sharded over ranks (ZeRO-1):
// every rank writes its shard, one manifest commits them all, any world size resumes.
//
// Layout (docs/formats_checkpoint.md, "Sharded checkpoints"): `step_N/` holds rank 0's
// tensors.bin (the common part: model parameters, the optimizer's step) and a version 3
// manifest.json that also lists every shard, and one `shard_RRRRR/` per rank with that rank's
// tensors.bin and a manifest of its own (which rank 0 reads to list the shard's CRCs).
//
// The commit protocol, every step collective over a save_communicator so that every rank reaches
// the same decision and none waits forever for another:
//  1. rank 0 removes stale temporaries and creates the locked `.tmp.step_N`; all agree it exists;
//  2. every rank writes `.tmp.step_N/shard_<rank>/` (tensors.bin, manifest.json, fsync), rank 0
//     also the common tensors.bin; all agree which ranks failed;
//  3. if none failed, rank 0 reads the shards' manifests, writes the top manifest listing every
//     shard (offsets, counts, CRCs), fsyncs and renames `.tmp.step_N` to `step_N` (the one atomic
//     step; write.hpp's commit) and prunes; all agree whether that worked.
// A failure anywhere removes `.tmp.step_N` (rank 0) and throws on every rank: io_error naming the
// failing rank (each failing rank rethrows its own error). Nothing is renamed before every shard
// is complete, so an interrupted save (a rank killed) leaves only a hidden temporary, which
// resume never reads and the next save or start-up removes.
//
// Loading: every rank reads the same top manifest, its common tensors and the elements of its
// range of each sharded tensor from whichever shards hold them (any world size wrote them), or
// from a whole tensor of a checkpoint without shards (a DDP run's `optim.m`). Every rank verifies
// the CRCs of what it reads before anything is copied, and the ranks agree on the result before
// they copy: a checkpoint one rank cannot use is skipped by all.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/checkpoint/concepts.hpp"
#include "trainkit/checkpoint/detail/dir_lock.hpp"
#include "trainkit/checkpoint/detail/posix_file.hpp"
#include "trainkit/checkpoint/format.hpp"
#include "trainkit/checkpoint/list.hpp"
#include "trainkit/checkpoint/read.hpp"
#include "trainkit/checkpoint/write.hpp"
#include "trainkit/core/error.hpp"

namespace trainkit::checkpoint {

namespace detail {

// The shard's own manifest names its place in the whole under these meta keys.
inline constexpr std::string_view shard_rank_key = "shard.rank";
inline constexpr std::string_view shard_world_key = "shard.world_size";
inline constexpr std::string_view shard_offset_key = "shard.offset";
inline constexpr std::string_view shard_count_key = "shard.count";

// Every rank's flag, on every rank: the ranks for which `mine` was true somewhere.
template <save_communicator Comm>
std::vector<int> ranks_where(Comm& comm, bool mine) {
  std::vector<double> flags(std::size_t(comm.world_size()), 0.0);
  flags[std::size_t(comm.rank())] = mine ? 1.0 : 0.0;
  comm.sum(flags);
  std::vector<int> out;
  for (std::size_t r = 0; r < flags.size(); ++r)
    if (flags[r] != 0.0) out.push_back(int(r));
  return out;
}

inline std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

// Runs `phase` and returns its exception (nullptr when it succeeded).
template <class F>
std::exception_ptr attempt(F&& phase) {
  try {
    phase();
    return nullptr;
  } catch (...) {
    return std::current_exception();
  }
}

// After a collective decision that some rank failed: the failing ranks rethrow their own error,
// the others throw io_error saying which rank failed.
[[noreturn]] inline void throw_agreed(const std::exception_ptr& mine,
                                      const std::vector<int>& failed, const std::string& what,
                                      const std::string& after = "") {
  if (mine) std::rethrow_exception(mine);
  throw io_error(what + ": " + rank_list(failed) + " failed (its error is printed by that rank)" +
                 after);
}

// What a failed save adds: nothing was committed.
inline constexpr std::string_view intact = "; the newest complete checkpoint is intact";

// A shard's tensors as a checkable state: named after whole tensors, shape {range.count}, and
// neither named like a common tensor nor in device memory.
inline checkpoint_state shard_as_state(const sharded_checkpoint_state& s) {
  checkpoint_state part;
  part.step = s.common.step;
  part.tensors = s.shard;
  part.meta[std::string(shard_rank_key)] = std::to_string(s.range.rank);
  part.meta[std::string(shard_world_key)] = std::to_string(s.range.world_size);
  part.meta[std::string(shard_offset_key)] = std::to_string(s.range.offset);
  part.meta[std::string(shard_count_key)] = std::to_string(s.range.count);
  check_saveable(part);
  std::set<std::string> common;
  for (const state_tensor& t : s.common.tensors) common.insert(t.name);
  for (const state_tensor& t : s.shard) {
    if (t.shape != std::vector<std::int64_t>{std::int64_t(s.range.count)})
      throw config_error("sharded checkpoint tensor '" + t.name + "' has shape " +
                         shape_text(t.shape) + " but this rank's shard has " +
                         std::to_string(s.range.count) + " elements");
    if (common.count(t.name))
      throw config_error("sharded checkpoint tensor '" + t.name +
                         "' is also a tensor of the common state");
  }
  return part;
}

template <save_communicator Comm>
void check_range(const shard_range& range, const Comm& comm, const std::string& what) {
  if (range.rank != int(comm.rank()) || range.world_size != int(comm.world_size()) ||
      range.offset + range.count > range.total)
    throw config_error(what + ": the state's shard (rank " + std::to_string(range.rank) + " of " +
                       std::to_string(range.world_size) + ", elements " +
                       std::to_string(range.offset) + " + " + std::to_string(range.count) + " of " +
                       std::to_string(range.total) + ") is not this rank's (rank " +
                       std::to_string(comm.rank()) + " of " + std::to_string(comm.world_size()) +
                       ")");
}

inline std::uint64_t meta_number(const manifest& m, std::string_view key, const std::string& file) {
  const auto it = m.meta.find(std::string(key));
  std::uint64_t value = 0;
  if (it == m.meta.end() || it->second.empty() ||
      std::from_chars(it->second.data(), it->second.data() + it->second.size(), value).ptr !=
          it->second.data() + it->second.size())
    throw format_error("shard manifest '" + file + "' has no number \"" + std::string(key) +
                       "\" in its meta");
  return value;
}

// Rank 0, once every shard is on disk: the top manifest listing them (read from their own
// manifests), then the rename that makes the checkpoint visible.
inline void commit_shards(const std::filesystem::path& dir, const std::string& name, manifest top,
                          int world_size) {
  const std::filesystem::path temp = dir / (std::string(temporary_prefix) + name);
  for (int r = 0; r < world_size; ++r) {
    const std::string sub = shard_dir_name(std::uint64_t(r));
    const std::filesystem::path file = temp / sub / manifest_file_name;
    const manifest part = read_manifest(file);
    if (part.step != top.step ||
        meta_number(part, shard_rank_key, file.string()) != std::uint64_t(r) ||
        meta_number(part, shard_world_key, file.string()) != std::uint64_t(world_size))
      throw format_error("shard manifest '" + file.string() + "' is not rank " + std::to_string(r) +
                         " of " + std::to_string(world_size) + " at step " +
                         std::to_string(top.step));
    top.shards.push_back({std::uint64_t(r), sub, meta_number(part, shard_offset_key, file.string()),
                          meta_number(part, shard_count_key, file.string()), part.tensors});
  }
  const std::string text = manifest_to_json(top);
  // The reader's checks (shards tiling the tensors, the same tensors in each) before committing.
  checkpoint::parse_manifest(text, (temp / manifest_file_name).string());
  write_text_file(temp / manifest_file_name, text);
  fsync_directory(temp);
  commit_temporary(dir, name);
}

}  // namespace detail

/// Writes the sharded `state` as `dir/step_<state.common.step>`, collectively over `comm`: every
/// rank must call it with its own shard (`state.range` is this rank's cut), rank 0's common part
/// being the one written. Returns the checkpoint's path once it is committed on every rank. A
/// failure on any rank (a config_error for a state that cannot be saved, an io_error of the file
/// system) commits nothing, leaves no temporary behind, and throws on every rank: the failing
/// rank its own error, the others an io_error naming it. Then prunes to `keep_last` (rank 0).
template <save_communicator Comm>
std::filesystem::path write_sharded_checkpoint(const std::filesystem::path& dir,
                                               const sharded_checkpoint_state& state, int keep_last,
                                               Comm& comm) {
  namespace fs = std::filesystem;
  const bool root = comm.rank() == 0;
  const std::string name = step_dir_name(state.common.step);
  const fs::path temp = dir / (std::string(temporary_prefix) + name);
  const std::string what = "checkpoint of step " + std::to_string(state.common.step) +
                           " was not saved into '" + dir.string() + "'";
  std::optional<detail::dir_lock> writing;  // rank 0's, for as long as the temporary exists
  std::optional<checkpoint_state> part;
  // 1. The state checked on every rank, the temporary created by rank 0.
  std::exception_ptr err = detail::attempt([&] {
    if (keep_last < 0)
      throw config_error("checkpoint keep_last must be >= 0 (0 keeps all): " +
                         std::to_string(keep_last));
    detail::check_range(state.range, comm, "sharded checkpoint");
    part = detail::shard_as_state(state);
    if (!root) return;
    detail::check_saveable(state.common);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) detail::throw_io("cannot create checkpoint directory", dir, ec);
    remove_stale_temporaries(dir);
    writing.emplace(create_locked_temporary(temp));
  });
  if (const auto failed = detail::ranks_where(comm, bool(err)); !failed.empty()) {
    if (writing) {
      std::error_code ignored;
      fs::remove_all(temp, ignored);
    }
    detail::throw_agreed(err, failed, what, std::string(detail::intact));
  }
  // 2. Every rank's shard, and rank 0's common tensors.
  manifest top;
  err = detail::attempt([&] {
    const fs::path sub = temp / shard_dir_name(std::uint64_t(state.range.rank));
    std::error_code ec;
    fs::create_directory(sub, ec);
    if (ec) detail::throw_io("cannot create shard directory", sub, ec);
    const manifest m = detail::write_tensors_file(sub / tensors_file_name, *part);
    detail::write_text_file(sub / manifest_file_name, manifest_to_json(m));
    detail::fsync_directory(sub);
    if (root) top = detail::write_tensors_file(temp / tensors_file_name, state.common);
  });
  std::vector<int> failed = detail::ranks_where(comm, bool(err));
  // 3. Rank 0 commits when every shard is complete.
  if (root && failed.empty()) {
    err = detail::attempt(
        [&] { detail::commit_shards(dir, name, std::move(top), state.range.world_size); });
    if (err) failed.push_back(0);
  }
  if (root && !failed.empty()) {  // the wreck goes before any rank reports the failure
    std::error_code ignored;
    fs::remove_all(temp, ignored);
  }
  writing.reset();
  failed = detail::ranks_where(comm, bool(err));
  if (!failed.empty()) detail::throw_agreed(err, failed, what, std::string(detail::intact));
  if (root) {
    err = detail::attempt([&] { prune_checkpoints(dir, keep_last, state.common.step); });
  }
  // A failed prune leaves a committed checkpoint: reported, on rank 0 only, like write_checkpoint.
  if (err) std::rethrow_exception(err);
  return dir / name;
}

/// Loads the newest checkpoint under `dir` that every rank can use into `state`, collectively
/// over `comm`: the common tensors whole, and elements [range.offset, + range.count) of each
/// sharded tensor (of range.total elements), from a sharded checkpoint of any world size or from
/// a checkpoint of whole tensors. A checkpoint some rank cannot read (format_error, io_error) is
/// skipped by every rank, each adding a line to `warnings`; false when none is left. A
/// checkpoint_mismatch on any rank (the run does not fit the checkpoint) is thrown on every rank.
/// Every rank must see the same checkpoints in `dir` (a shared file system).
template <save_communicator Comm>
bool load_latest_sharded_checkpoint(const std::filesystem::path& dir,
                                    sharded_checkpoint_state& state, Comm& comm,
                                    std::vector<std::string>& warnings) {
  std::vector<detail::load_request> requests;
  std::exception_ptr err = detail::attempt([&] {
    detail::check_range(state.range, comm, "sharded checkpoint");
    detail::check_loadable(state.common);
    checkpoint_state shard;
    shard.tensors = state.shard;
    detail::check_loadable(shard);
    for (const state_tensor& t : state.common.tensors) requests.push_back(detail::whole_tensor(t));
    for (const state_tensor& t : state.shard) {
      if (t.numel() != state.range.count)
        throw config_error("sharded checkpoint tensor '" + t.name + "' has " +
                           std::to_string(t.numel()) + " elements but this rank's shard " +
                           std::to_string(state.range.count));
      requests.push_back({t.name,
                          t.type,
                          {std::int64_t(state.range.total)},
                          state.range.offset,
                          state.range.count,
                          t.data});
    }
  });
  if (const auto failed = detail::ranks_where(comm, bool(err)); !failed.empty())
    detail::throw_agreed(err, failed, "cannot resume from '" + dir.string() + "'");

  std::vector<checkpoint_entry> all;
  err = detail::attempt([&] { all = list_checkpoints(dir); });
  if (const auto failed = detail::ranks_where(comm, bool(err)); !failed.empty())
    detail::throw_agreed(err, failed, "cannot list checkpoints in '" + dir.string() + "'");
  for (auto it = all.rbegin();; ++it) {
    // The ranks look at the same step (or all have run out), or nobody loads anything.
    std::vector<double> steps(std::size_t(comm.world_size()), 0.0);
    steps[std::size_t(comm.rank())] = it == all.rend() ? -1.0 : double(it->step);
    comm.sum(steps);
    for (double s : steps)
      if (s != steps.front())
        throw io_error("cannot resume from '" + dir.string() +
                       "': the ranks see different checkpoints there (every rank must see the "
                       "same directory, a shared file system)");
    if (it == all.rend()) return false;

    const std::string where = "checkpoint '" + it->path.string() + "'";
    manifest m;
    detail::verified_load verified;
    bool mismatch = false;
    err = detail::attempt([&] {
      try {
        m = detail::read_checkpoint_manifest(it->path, where);
        verified = detail::verify_requests(it->path, m, requests, where);
      } catch (const checkpoint_mismatch&) {
        mismatch = true;
        throw;
      }
    });
    if (const auto misfit = detail::ranks_where(comm, mismatch); !misfit.empty()) {
      if (mismatch) std::rethrow_exception(err);
      throw checkpoint_mismatch(where + " does not fit this run on " + detail::rank_list(misfit) +
                                " (its error is printed by that rank)");
    }
    if (const auto failed = detail::ranks_where(comm, bool(err)); !failed.empty()) {
      std::string line = "skipping unusable checkpoint: ";
      try {
        if (err) std::rethrow_exception(err);
        line += where + ": " + detail::rank_list(failed) + " cannot use it";
      } catch (const io_error& e) {
        line = std::string("skipping unreadable checkpoint: ") + e.what();
      } catch (const std::exception& e) {
        line += e.what();
      }
      warnings.push_back(line);
      continue;
    }
    err = detail::attempt([&] { detail::copy_requests(it->path, verified, where); });
    if (const auto failed = detail::ranks_where(comm, bool(err)); !failed.empty())
      detail::throw_agreed(err, failed, "resuming from " + where + " failed halfway");
    state.common.step = m.step;
    state.common.meta = m.meta;
    return true;
  }
}

}  // namespace trainkit::checkpoint
