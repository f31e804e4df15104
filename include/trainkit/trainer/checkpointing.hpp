// trainkit/trainer/checkpointing.hpp — how the trainer saves and resumes a run.
//
// A checkpoint holds the model's tensors, the optimizer's state, the step and, in its metadata,
// the configuration's `meta` plus the data position of the batch after the last one consumed.
// `gather_state` collects it once for both cases: the whole state (checkpoint_state, rank 0
// writes it) or, for an optimizer whose state is sharded over ranks (checkpoint::sharded_optimizer,
// ZeRO-1), the same common part plus this rank's shard (sharded_checkpoint_state, every rank
// writes its own, collectively). The tensors view the policies' own storage, so one gathered state
// serves a save (read) and a resume (filled). `save_state` and `load_latest_state` pick the
// checkpointer's call for the state's kind; `resume_position` checks what was loaded against this
// run's configuration; the two `report_*` helpers turn a checkpointer's optional error and warning
// hooks into console lines.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "trainkit/checkpoint/concepts.hpp"
#include "trainkit/core/batch.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/trainer/sinks/console.hpp"

namespace trainkit {

/// Where a run stands: what a checkpoint records beside the tensors.
struct run_point {
  std::uint64_t step = 0;
  source_position data;  // of the batch after the last one consumed
};

/// The run's state: checkpoint_state, or sharded_checkpoint_state when the optimizer's state is
/// sharded over ranks (the model's tensors and the optimizer's common ones in `common`, this
/// rank's slices of the rest in `shard`).
template <class Model, class Optimizer>
auto gather_state(Model& model, Optimizer& optimizer,
                  const std::map<std::string, std::string>& meta, const run_point& at) {
  checkpoint::checkpoint_state common;
  common.step = at.step;
  common.tensors = model.state();
  common.meta = meta;
  common.meta["data_position"] = at.data.to_string();
  common.meta["step"] = std::to_string(at.step);
  if constexpr (checkpoint::sharded_optimizer<Optimizer>) {
    checkpoint::optimizer_shard opt = optimizer.sharded_state();
    common.tensors.insert(common.tensors.end(), opt.common.begin(), opt.common.end());
    return checkpoint::sharded_checkpoint_state{std::move(common), std::move(opt.shard), opt.range};
  } else {
    auto opt = optimizer.state();
    common.tensors.insert(common.tensors.end(), opt.begin(), opt.end());
    return common;
  }
}

/// The part of a state every rank holds alike.
inline checkpoint::checkpoint_state& common_part(checkpoint::checkpoint_state& s) noexcept {
  return s;
}
inline checkpoint::checkpoint_state& common_part(checkpoint::sharded_checkpoint_state& s) noexcept {
  return s.common;
}

/// Saves a whole state. Every rank holds the same one, so only rank 0 writes.
template <class Checkpointer, class Comm>
void save_state(Checkpointer& c, const checkpoint::checkpoint_state& s, Comm&, int rank) {
  if (rank == 0) c.save(s);
}

/// Saves a sharded state: collective, every rank writes its shard (committed once all are).
template <class Checkpointer, class Comm>
void save_state(Checkpointer& c, const checkpoint::sharded_checkpoint_state& s, Comm& comm, int) {
  c.save_sharded(s, comm);
}

/// Fills `s` from the newest valid checkpoint; false when there is none.
template <class Checkpointer, class Comm>
bool load_latest_state(Checkpointer& c, checkpoint::checkpoint_state& s, Comm&) {
  return c.load_latest(s);
}

/// The sharded twin: collective, every rank loads the common part and its own range.
template <class Checkpointer, class Comm>
bool load_latest_state(Checkpointer& c, checkpoint::sharded_checkpoint_state& s, Comm& comm) {
  return c.load_latest_sharded(s, comm);
}

/// Where the source resumes after `loaded`, once it is known to be this run's: a checkpoint of
/// another model (meta "model" differs from `meta`'s) is refused.
inline source_position resume_position(const checkpoint::checkpoint_state& loaded,
                                       const std::map<std::string, std::string>& meta) {
  if (auto theirs = loaded.meta.find("model"); theirs != loaded.meta.end()) {
    auto mine = meta.find("model");
    if (mine != meta.end() && mine->second != theirs->second)
      throw config_error("trainer_config.resume: the checkpoint was written for model '" +
                         theirs->second + "' but this run configures '" + mine->second + "'");
  }
  auto pos = loaded.meta.find("data_position");
  if (pos == loaded.meta.end())
    throw format_error("trainer_config.resume: checkpoint of step " + std::to_string(loaded.step) +
                       " has no data_position");
  return source_position::parse(pos->second);
}

/// An asynchronous checkpointer's failed background write, as a warning line (training goes on;
/// the previous complete checkpoint stays loadable). Polling does not block.
template <class Checkpointer>
void report_save_error(Checkpointer& c, console_sink& console) {
  if constexpr (checkpoint::reports_save_errors<Checkpointer>) {
    if (auto err = c.take_error()) console.say("warning: checkpoint: " + *err + "\n");
  }
}

/// What a load skipped (corrupt checkpoints), as warning lines, also when none was usable.
template <class Checkpointer>
void report_load_warnings(Checkpointer& c, console_sink& console) {
  if constexpr (checkpoint::reports_warnings<Checkpointer>) {
    for (const auto& w : c.warnings()) console.say("warning: " + w + "\n");
  }
}

}  // namespace trainkit
