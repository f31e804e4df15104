// trainkit/checkpoint/no_checkpoint.hpp — the Checkpointer for runs that save nothing.
//
// Runs without checkpoints and benchmarks compose the trainer with this policy so the checkpoint
// code path costs nothing: saves are no-ops with zero stall, and there is never anything to resume.
#pragma once

#include <string>
#include <vector>

#include "trainkit/checkpoint/concepts.hpp"

namespace trainkit::checkpoint {

class no_checkpoint {
 public:
  /// It reads nothing, so it composes with a model in any memory space.
  static constexpr bool reads_device_memory = true;
  void save(const checkpoint_state&) {}
  bool load_latest(checkpoint_state&) { return false; }
  /// Sharded states (ZeRO-1) are not saved either.
  template <save_communicator Comm>
  void save_sharded(const sharded_checkpoint_state&, Comm&) {}
  template <save_communicator Comm>
  bool load_latest_sharded(sharded_checkpoint_state&, Comm&) {
    return false;
  }
  void wait() {}
  double last_stall_ms() const noexcept { return 0.0; }
  /// Always empty; present so trainers can treat every checkpointer alike.
  const std::vector<std::string>& warnings() const noexcept { return warnings_; }

 private:
  std::vector<std::string> warnings_;
};

static_assert(checkpointer<no_checkpoint> && reports_warnings<no_checkpoint>);
static_assert(sharded_checkpointer<no_checkpoint, single_process>);

}  // namespace trainkit::checkpoint
