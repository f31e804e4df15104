// trainkit/checkpoint/sync_checkpointer.hpp — the Checkpointer that writes on the caller's thread.
//
// The simplest correct policy: `save` runs the whole crash-safe write (write.hpp) before it
// returns, so the training loop stalls for the full write and fsync time, which it reports as
// `last_stall_ms` for the step profile. Use it for small models, for tests, and as the reference
// the asynchronous checkpointer's output is compared with. It is also the checkpointer of a
// state sharded over ranks (ZeRO-1): `save_sharded` and `load_latest_sharded` (sharded.hpp) are
// collective over the ranks' communicator.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "trainkit/checkpoint/concepts.hpp"
#include "trainkit/checkpoint/read.hpp"
#include "trainkit/checkpoint/sharded.hpp"
#include "trainkit/checkpoint/write.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/timing.hpp"

namespace trainkit::checkpoint {

struct sync_checkpointer_config {
  std::filesystem::path dir;  // one step_NNNNNNNN directory per checkpoint goes here
  int keep_last = 0;          // keep the newest K complete checkpoints; 0 keeps all

  friend bool operator==(const sync_checkpointer_config&,
                         const sync_checkpointer_config&) = default;

  void validate() const {
    if (dir.empty()) throw config_error("sync_checkpointer_config.dir must not be empty");
    if (keep_last < 0)
      throw config_error("sync_checkpointer_config.keep_last must be >= 0 (0 keeps all): " +
                         std::to_string(keep_last));
  }
};

class sync_checkpointer {
 public:
  using config_type = sync_checkpointer_config;
  /// Host tensors only: compose with host_staged_checkpointer for a device model.
  static constexpr bool reads_device_memory = false;

  /// Checks that the directory is writable and removes crashed saves' temporaries there
  /// (prepare_checkpoint_dir; each removal adds a line to `warnings()`), so a bad directory
  /// fails before training starts. To only read checkpoints use load_latest_checkpoint.
  explicit sync_checkpointer(sync_checkpointer_config config) : config_(std::move(config)) {
    config_.validate();
    for (const auto& name : prepare_checkpoint_dir(config_.dir))
      warnings_.push_back("removed " + name + " left in " + config_.dir.string() +
                          " by an earlier run's interrupted save");
  }

  /// Writes `state` as `dir/step_<state.step>` before returning (see write_checkpoint).
  void save(const checkpoint_state& state) {
    stopwatch clock;
    try {
      last_saved_ = write_checkpoint(config_.dir, state, config_.keep_last);
    } catch (...) {
      last_stall_ms_ = clock.elapsed_ms();
      throw;
    }
    last_stall_ms_ = clock.elapsed_ms();
  }

  /// Fills `state` from the newest intact checkpoint; skipped corrupt ones add to `warnings()`.
  bool load_latest(checkpoint_state& state) {
    return load_latest_checkpoint(config_.dir, state, warnings_);
  }

  /// Every rank's shard and rank 0's common part as `dir/step_<step>`, committed only once every
  /// shard is complete; collective over `comm` (write_sharded_checkpoint). On rank 0 the
  /// directory of the checkpoint is then `last_saved()`; every rank's stall is its own.
  template <save_communicator Comm>
  void save_sharded(const sharded_checkpoint_state& state, Comm& comm) {
    stopwatch clock;
    try {
      last_saved_ = write_sharded_checkpoint(config_.dir, state, config_.keep_last, comm);
    } catch (...) {
      last_stall_ms_ = clock.elapsed_ms();
      throw;
    }
    last_stall_ms_ = clock.elapsed_ms();
  }

  /// This rank's part of the newest checkpoint every rank can load, resharded for this world size
  /// when another one wrote it; collective over `comm` (load_latest_sharded_checkpoint).
  template <save_communicator Comm>
  bool load_latest_sharded(sharded_checkpoint_state& state, Comm& comm) {
    return load_latest_sharded_checkpoint(config_.dir, state, comm, warnings_);
  }

  /// Nothing is ever in flight.
  void wait() {}

  double last_stall_ms() const noexcept { return last_stall_ms_; }

  /// One line per checkpoint `load_latest` skipped or stale temporary removed, to print.
  const std::vector<std::string>& warnings() const noexcept { return warnings_; }
  void clear_warnings() noexcept { warnings_.clear(); }

  /// The directory of the last successful save (empty before the first).
  const std::filesystem::path& last_saved() const noexcept { return last_saved_; }
  const sync_checkpointer_config& config() const noexcept { return config_; }

 private:
  sync_checkpointer_config config_;
  std::filesystem::path last_saved_;
  std::vector<std::string> warnings_;
  double last_stall_ms_ = 0.0;
};

static_assert(checkpointer<sync_checkpointer> && reports_warnings<sync_checkpointer>);
static_assert(sharded_checkpointer<sync_checkpointer, single_process>);

}  // namespace trainkit::checkpoint
