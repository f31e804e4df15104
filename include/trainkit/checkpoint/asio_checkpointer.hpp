// trainkit/checkpoint/asio_checkpointer.hpp — the Checkpointer that snapshots the state and writes
// it in the background on Boost.Asio threads, so the training loop never waits on the disk
// and, as long as a step's forward and backward take longer than a copy of the state, not on the
// snapshot either.
//
// `save` only registers the snapshot: it checks the state, lays it out in staging memory and
// posts the job to one-thread `boost::asio::thread_pool`s. The state does not change until the
// next optimizer update, so the copy (through the Stager policy: memcpy on a copy thread for
// host tensors; the CUDA stager queues device-to-pinned copies on a side stream) runs while the
// next step's forward and backward read the same tensors. `before_update`, which the trainer
// calls right before that update, is the only point that waits for the copy (copy before mutate).
// Then a writer thread, at `writer_priority` (normal by default, `low` on request so that
// training wins the cores; thread_priority.hpp; the copy stays at normal priority on its own
// thread, as it must be done by the update), writes the snapshot with the crash-safe protocol
// the synchronous checkpointer uses (write_checkpoint: tensors.bin with O_DIRECT straight from
// the staging area, which is laid out as the file's image, with per-tensor CRC-32C,
// manifest last, fsync of files, rename of the directory, fsync of the parent, and only then
// pruning beyond keep-last-K). The loop's stall is `save` itself (small), the wait in
// `before_update` (the part of the copy that compute did not hide), and the wait when a save is
// requested while the previous one is still writing: at most one save is in flight, because a
// second staging area would double the host memory for a state that may be tens of gigabytes,
// and a disk too slow for the checkpoint interval would only queue up more.
//
// A failed write (disk full, permission, I/O error) does not throw on the writer thread: the
// half-written temporary directory is removed, the previous complete checkpoint is untouched, and
// the error — path and errno text — is handed to the loop by the next call (`take_error`, which
// the trainer calls after each save, or `save`/`wait`/`load_latest`). With `fail_on_error` those
// calls throw io_error instead, ending the run.
#pragma once

// ThreadSanitizer does not model the atomic_thread_fence Asio's fenced_block issues around each
// handler (GCC warns -Wtsan). thread_pool hands handlers between threads under a mutex, which
// TSan does see, so the fence adds nothing it needs; TSan builds switch it off.
#if defined(__SANITIZE_THREAD__) && !defined(BOOST_ASIO_DISABLE_FENCED_BLOCK)
#define BOOST_ASIO_DISABLE_FENCED_BLOCK
#endif
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "trainkit/checkpoint/concepts.hpp"
#include "trainkit/checkpoint/detail/thread_priority.hpp"
#include "trainkit/checkpoint/format.hpp"
#include "trainkit/checkpoint/list.hpp"
#include "trainkit/checkpoint/read.hpp"
#include "trainkit/checkpoint/stager.hpp"
#include "trainkit/checkpoint/write.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/timing.hpp"

namespace trainkit::checkpoint {

struct asio_checkpointer_config {
  std::filesystem::path dir;   // one step_NNNNNNNN directory per checkpoint goes here
  int keep_last = 0;           // keep the newest K complete checkpoints; 0 keeps all
  bool fail_on_error = false;  // a failed background write throws io_error from the next call
  // The writer thread's scheduling (thread_priority.hpp): `low` (nice 19) lets training win the
  // cores, but on a machine whose cores training fills, a low-priority write can outlast the
  // checkpoint interval and the next save then waits for it (measured: 7-15 s stalls on 2 busy
  // cores), so the default is `normal`. The snapshot copy always runs at normal priority on its
  // own thread (it must be done by the next optimizer update).
  background_priority writer_priority = background_priority::normal;
  // Fault injection for tests: called on the writer thread with the checkpoint directory about
  // to be written (dir/step_N), before any of its files; throwing io_error there is reported
  // exactly like a failing disk. Leave empty in real runs.
  std::function<void(const std::filesystem::path&)> before_write = {};

  /// Compares the settings; hooks compare by presence (std::function has no equality).
  friend bool operator==(const asio_checkpointer_config& a, const asio_checkpointer_config& b) {
    return a.dir == b.dir && a.keep_last == b.keep_last && a.fail_on_error == b.fail_on_error &&
           a.writer_priority == b.writer_priority && bool(a.before_write) == bool(b.before_write);
  }

  void validate() const {
    if (dir.empty()) throw config_error("asio_checkpointer_config.dir must not be empty");
    if (keep_last < 0)
      throw config_error("asio_checkpointer_config.keep_last must be >= 0 (0 keeps all): " +
                         std::to_string(keep_last));
  }
};

/// The asynchronous checkpointer over any Stager (stager.hpp). `asio_checkpointer` (below) is the
/// host-memory one; CUDA builds compose it with the CUDA stager.
template <stager Stager>
class basic_asio_checkpointer {
 public:
  using config_type = asio_checkpointer_config;
  using stager_type = Stager;
  /// As the stager: cuda_stager copies device tensors, host_stager reads host memory only.
  static constexpr bool reads_device_memory = Stager::reads_device_memory;

  explicit basic_asio_checkpointer(asio_checkpointer_config config, Stager stager = Stager{})
      : impl_(std::make_unique<impl>(std::move(config), std::move(stager))) {}

  // Movable so the trainer can take it by value; the worker only ever sees the heap-allocated
  // impl, so moving while a save is in flight is safe. A moved-from checkpointer may only be
  // destroyed or assigned to.
  basic_asio_checkpointer(basic_asio_checkpointer&&) noexcept = default;
  basic_asio_checkpointer& operator=(basic_asio_checkpointer&&) noexcept = default;

  /// Registers a snapshot of `state` and returns; the copy and the files follow in the
  /// background. The memory `state.tensors` point to must stay valid and unmodified until
  /// `before_update()` (or `wait()`) returns — the trainer's next optimizer update; `state`
  /// itself (names, meta) may go at once. Waits first if the previous save is still writing
  /// (counted in `last_stall_ms`). Throws config_error for a state that cannot be saved (device
  /// tensors without a device stager, duplicate or empty names, null data) before copying
  /// anything, and — with `fail_on_error` — io_error when the previous save failed (in which case
  /// this state is not saved).
  void save(const checkpoint_state& state) { impl_->save(state); }

  /// Reserves the staging memory a save of `state` needs (and faults it in), on the caller's
  /// thread, so the first save does not: on a machine where fresh memory is slow to fault in
  /// (measured ~12 s for 1.5 GB on a VM) that would be stall. Waits for a save in flight first.
  /// Checks `state` as `save` does; its tensors are not read. The trainer calls it before step 1
  /// (the `prepares_saves` hook).
  void prepare(const checkpoint_state& state) { impl_->prepare(state); }

  /// Returns once the tensors of the last `save` may be modified: waits for the copy on the
  /// worker thread (host stager) or orders the device streams that write the state after the
  /// copies (CUDA stager). Returns at once when no snapshot is pending. The trainer calls it right
  /// before each optimizer update (the `defers_snapshot` hook) and counts its time as stall.
  void before_update() { impl_->before_update(); }

  /// Waits for a save in flight, then fills `state` from the newest intact checkpoint (skipped
  /// corrupt ones add to `warnings()`; see load_latest_checkpoint).
  bool load_latest(checkpoint_state& state) { return impl_->load_latest(state); }

  /// Blocks until no save is in flight (end of run, stop signal). A failed save is kept for
  /// `take_error` — or, with `fail_on_error`, thrown as io_error.
  void wait() { impl_->wait(); }

  /// How long the last `save` blocked its caller: waiting for the previous save, plus
  /// registering the snapshot (and, with a stager that queues copies, queuing them).
  double last_stall_ms() const noexcept { return impl_->last_wait_ms + impl_->last_snapshot_ms; }
  /// The parts of `last_stall_ms`.
  double last_wait_ms() const noexcept { return impl_->last_wait_ms; }
  double last_snapshot_ms() const noexcept { return impl_->last_snapshot_ms; }
  /// How long the last `before_update` blocked its caller (the copy compute did not hide).
  double last_update_wait_ms() const noexcept { return impl_->last_update_wait_ms; }

  /// The error of a finished background save not yet reported (path and errno text), without
  /// blocking; nullopt when there is none or the save is still writing. With `fail_on_error` it
  /// throws io_error instead of returning it.
  std::optional<std::string> take_error() { return impl_->take_error(); }

  /// Whether a save is still being written (does not block).
  bool in_flight() const { return impl_->in_flight(); }

  /// One line per checkpoint `load_latest` skipped or stale temporary removed, to print.
  const std::vector<std::string>& warnings() const noexcept { return impl_->warnings; }
  void clear_warnings() noexcept { impl_->warnings.clear(); }

  /// Saves whose files are complete on disk (counted when their result is collected).
  std::uint64_t completed_saves() const noexcept { return impl_->completed; }
  const asio_checkpointer_config& config() const noexcept { return impl_->config; }
  Stager& stager() noexcept { return impl_->stager_policy; }

 private:
  struct impl {
    impl(asio_checkpointer_config c, Stager s) : config(std::move(c)), stager_policy(std::move(s)) {
      config.validate();
      for (const auto& name : prepare_checkpoint_dir(config.dir))
        warnings.push_back("removed " + name + " left in " + config.dir.string() +
                           " by an earlier run's interrupted save");
      // The writer pool's one thread takes its priority once, before any job.
      boost::asio::post(write_pool,
                        [p = config.writer_priority] { detail::set_this_thread_priority(p); });
    }
    impl(const impl&) = delete;
    impl& operator=(const impl&) = delete;

    // The pools' threads must not outlive the staging memory and the state it reads: wait for
    // the save in flight (its error, if any, has nobody left to report to), then join.
    ~impl() {
      if (running.valid()) running.wait();
      copy_pool.join();
      write_pool.join();
    }

    void save(const checkpoint_state& state) {
      stopwatch clock;
      last_wait_ms = last_snapshot_ms = 0;
      const bool waited = running.valid();
      collect(/*block=*/true);  // the previous save, its copy included, is over
      if (waited) last_wait_ms = clock.lap_ms();
      rethrow_if_fatal();

      check_stageable(state);
      // The tensors' descriptors are kept (the caller's `state` may be a temporary); their data
      // stays the caller's memory until the copy has read it.
      sources = state.tensors;
      staging_offsets = layout(sources);
      staged = checkpoint_state{state.step, {}, state.meta};
      for (const state_tensor& t : sources) staged.tensors.push_back({t.name, t.type, t.shape});
      const std::size_t bytes = std::size_t(total_bytes(sources, staging_offsets));
      if constexpr (Stager::queues_copies) stage_into(stager_policy.reserve(bytes));

      // packaged_task is move-only and asio wants a copyable handler on some paths: share it.
      // The task returns its failure as text rather than throwing: an exception object crossing
      // threads is freed by whichever side drops the last exception_ptr, inside libstdc++ where
      // ThreadSanitizer cannot see the ordering, and a message is all the caller needs. For the
      // same reason the copy's end is a promise<void> that is always fulfilled, never failed.
      auto copy_done = std::make_shared<std::promise<void>>();
      copied = copy_done->get_future();
      auto task =
          std::make_shared<std::packaged_task<std::string()>>([this] { return write_staged(); });
      running = task->get_future();
      snapshot_pending = true;
      copy_error.clear();
      if constexpr (Stager::queues_copies) {
        copy_done->set_value();  // nothing for a host thread to copy: before_update orders
        boost::asio::post(write_pool, [task] { (*task)(); });
      } else {
        // The copy at normal priority, then the write on the writer thread (the
        // post hands `copy_error` and the staged bytes over under the pool's lock).
        boost::asio::post(copy_pool, [this, task, copy_done, bytes] {
          copy_error = copy_into_staging(bytes);
          copy_done->set_value();
          boost::asio::post(write_pool, [task] { (*task)(); });
        });
      }
      last_snapshot_ms = clock.lap_ms();
    }

    void prepare(const checkpoint_state& state) {
      collect(/*block=*/true);  // reserve is only called while no save is in flight
      rethrow_if_fatal();
      check_stageable(state);
      stager_policy.reserve(std::size_t(total_bytes(state.tensors, layout(state.tensors))));
    }

    void before_update() {
      last_update_wait_ms = 0;
      if (!snapshot_pending) return;
      stopwatch clock;
      if constexpr (Stager::queues_copies)
        stager_policy.order_after_stage();
      else
        copied.wait();
      snapshot_pending = false;
      last_update_wait_ms = clock.elapsed_ms();
    }

    // Points the snapshot's tensors into the staging area at `base` and copies (or queues the
    // copies of) the sources there.
    void stage_into(std::byte* base) {
      std::vector<stage_copy> copies;
      copies.reserve(sources.size());
      for (std::size_t i = 0; i < sources.size(); ++i) {
        std::byte* at = sources[i].bytes() > 0 ? base + staging_offsets[i] : nullptr;
        staged.tensors[i].data = at;
        copies.push_back({&sources[i], at});
      }
      stager_policy.stage(copies);
    }

    bool load_latest(checkpoint_state& state) {
      collect(/*block=*/true);
      rethrow_if_fatal();
      bool any_device = false;
      for (const auto& t : state.tensors) any_device = any_device || t.on_device;
      check_device_tensors(state);
      if (!any_device) return load_latest_checkpoint(config.dir, state, warnings);

      // Device tensors are read into staging memory, then copied up by the stager.
      const std::vector<std::uint64_t> offsets = layout(state.tensors);
      std::byte* base = stager_policy.reserve(std::size_t(total_bytes(state.tensors, offsets)));
      checkpoint_state host{state.step, {}, state.meta};
      std::vector<stage_copy> copies;
      for (std::size_t i = 0; i < state.tensors.size(); ++i) {
        const state_tensor& t = state.tensors[i];
        std::byte* at = t.bytes() > 0 ? base + offsets[i] : nullptr;
        host.tensors.push_back({t.name, t.type, t.shape, at, false});
        copies.push_back({&t, at});
      }
      const bool loaded = load_latest_checkpoint(config.dir, host, warnings);
      if (loaded) {
        stager_policy.unstage(copies);
        state.step = host.step;
        state.meta = std::move(host.meta);
      }
      return loaded;
    }

    void wait() {
      collect(/*block=*/true);
      rethrow_if_fatal();
    }

    std::optional<std::string> take_error() {
      collect(/*block=*/false);
      rethrow_if_fatal();
      return std::exchange(pending_error, std::nullopt);
    }

    bool in_flight() const {
      return running.valid() &&
             running.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
    }

    // Device tensors are this policy's business only when the stager can read them; otherwise
    // say so before any copying, naming the tensor and what would work.
    void check_device_tensors(const checkpoint_state& state) const {
      if constexpr (!Stager::reads_device_memory) {
        for (const auto& t : state.tensors)
          if (t.on_device)
            throw config_error("checkpoint tensor '" + t.name +
                               "' is in device memory, but this asio_checkpointer's stager reads "
                               "host memory only: device tensors need the CUDA stager "
                               "(basic_asio_checkpointer<cuda_stager>, a CUDA build)");
      }
    }

    // Every check write_checkpoint would make on the worker, made here where it can throw to the
    // caller: names and meta (through check_saveable on a host-memory view) and null data.
    void check_stageable(const checkpoint_state& state) const {
      check_device_tensors(state);
      checkpoint_state view{state.step, {}, state.meta};
      for (const auto& t : state.tensors) {
        if (t.data == nullptr && t.bytes() > 0)
          throw config_error("checkpoint tensor '" + t.name + "' has no data");
        view.tensors.push_back({t.name, t.type, t.shape, t.data, false});
      }
      detail::check_saveable(view);
    }

    // Staging offsets mirror the file's 64-byte alignment, so each tensor's staged copy starts
    // on a cache line like its source usually does (memcpy at full speed).
    static std::vector<std::uint64_t> layout(const std::vector<state_tensor>& tensors) {
      std::vector<std::uint64_t> offsets;
      std::uint64_t end = 0;
      for (const auto& t : tensors) {
        const std::uint64_t at = (end + tensor_alignment - 1) / tensor_alignment * tensor_alignment;
        offsets.push_back(at);
        end = at + t.bytes();
      }
      return offsets;
    }
    static std::uint64_t total_bytes(const std::vector<state_tensor>& tensors,
                                     const std::vector<std::uint64_t>& offsets) {
      return tensors.empty() ? 0 : offsets.back() + tensors.back().bytes();
    }

    // Runs `step`; empty when it returned, else the text of what it threw.
    template <class Step>
    static std::string attempt(Step&& step) {
      try {
        step();
        return {};
      } catch (const std::exception& e) {
        return e.what()[0] != '\0' ? e.what() : "unknown error";
      } catch (...) {
        return "unknown error";
      }
    }

    // Runs on the copy thread (a stager that copies synchronously): the snapshot's copy. Returns
    // the failure's text, empty when the sources were copied.
    std::string copy_into_staging(std::size_t bytes) {
      return attempt([&] { stage_into(stager_policy.reserve(bytes)); });
    }

    // Runs on the writer thread, after the copy (if any) has ended. Nothing else touches `staged`,
    // `sources` or the staging memory until the future is collected, so no lock is needed; the
    // future carries back the failure's text, empty when the checkpoint was written.
    std::string write_staged() {
      const std::string name = step_dir_name(staged.step);
      std::string what = copy_error;
      if (what.empty())
        what = attempt([&] {
          stager_policy.wait_staged();
          if (config.before_write) config.before_write(config.dir / name);
          write_checkpoint(config.dir, staged, config.keep_last);
        });
      if (what.empty()) return {};
      // write_checkpoint removes its own half-written directory; this also covers a failure
      // raised by the before_write hook after it created one.
      std::error_code ec;
      std::filesystem::remove_all(config.dir / (std::string(temporary_prefix) + name), ec);
      return failure_text(what);
    }

    // Says whether the step made it to disk (a failure while pruning comes after the rename)
    // and which checkpoint a resume would use now.
    std::string failure_text(const std::string& what) const {
      const std::string step = std::to_string(staged.step);
      try {
        const auto all = list_checkpoints(config.dir);
        if (!all.empty() && all.back().step == staged.step)
          return "checkpoint of step " + step + " is complete, but: " + what;
        if (all.empty())
          return "checkpoint of step " + step + " was not saved: " + what +
                 " (no complete checkpoint exists yet)";
        return "checkpoint of step " + step + " was not saved: " + what +
               " (the newest complete checkpoint, step " + std::to_string(all.back().step) +
               ", is intact)";
      } catch (const std::exception&) {
        return "checkpoint of step " + step + " was not saved: " + what;
      }
    }

    // Collects the result of the save in flight, if it has finished (or, with `block`, once it
    // has): success counts it, failure becomes `pending_error`.
    void collect(bool block) {
      if (!running.valid()) return;
      if (!block && running.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
      std::string error;
      snapshot_pending = false;  // the job is over, so its copy is too
      try {
        error = running.get();
      } catch (const std::exception& e) {  // only if composing the message itself failed
        error = e.what();
      }
      if (error.empty()) {
        ++completed;
      } else {
        pending_error = pending_error ? *pending_error + "; then " + error : error;
      }
    }

    void rethrow_if_fatal() {
      if (config.fail_on_error && pending_error)
        throw io_error(*std::exchange(pending_error, std::nullopt));
    }

    asio_checkpointer_config config;
    Stager stager_policy;
    checkpoint_state staged;  // the snapshot being written: tensors point into staging memory
    std::vector<state_tensor> sources;           // what the snapshot copies: the caller's tensors
    std::vector<std::uint64_t> staging_offsets;  // each source's place in the staging area
    std::string copy_error;            // the copy thread's failure, read by the writer after it
    std::future<std::string> running;  // the save in flight (valid until collected): its error
    std::future<void> copied;          // ready once the worker has copied the sources
    bool snapshot_pending = false;     // a save's sources may still be read: before_update waits
    std::optional<std::string> pending_error;
    std::vector<std::string> warnings;
    std::uint64_t completed = 0;
    double last_wait_ms = 0;
    double last_snapshot_ms = 0;
    double last_update_wait_ms = 0;
    // Last members: destroyed (after ~impl joined them) before the state their threads used.
    boost::asio::thread_pool copy_pool{1};   // the snapshot copy, at normal priority
    boost::asio::thread_pool write_pool{1};  // the write, at config.writer_priority
  };

  std::unique_ptr<impl> impl_;
};

/// The asynchronous checkpointer for states in host memory (CPU models).
using asio_checkpointer = basic_asio_checkpointer<host_stager>;

static_assert(checkpointer<asio_checkpointer> && reports_save_errors<asio_checkpointer> &&
              reports_warnings<asio_checkpointer> && defers_snapshot<asio_checkpointer> &&
              prepares_saves<asio_checkpointer>);
// Not a sharded_checkpointer: its writer thread cannot join the ranks' collectives (MPI is called
// from the training thread only), so a trainer with a sharded optimizer (ZeRO-1) refuses it at
// compile time (checkpointer_for_optimizer); use sync_checkpointer there.
static_assert(!sharded_checkpointer<asio_checkpointer, single_process>);

}  // namespace trainkit::checkpoint
