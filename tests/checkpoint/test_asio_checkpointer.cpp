// Tests for trainkit::checkpoint::asio_checkpointer: its files are byte-identical to the
// synchronous checkpointer's, the snapshot holds the state as save() saw it (the copy runs after
// save returns, and before_update() blocks until it has read the state, so changes made after
// before_update do not leak into the checkpoint; wait() completes a pending copy), one save at a
// time with the wait counted as stall, keep-last-K pruning
// only after the new checkpoint is complete, write failures (injected, and a real full tmpfs)
// reported with path and errno text while the previous checkpoint stays loadable, fail_on_error,
// CRC fallback on resume, device tensors rejected without a device stager, and the Stager hook
// exercised by a stand-in device stager.
#include <gtest/gtest.h>

#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "trainkit/checkpoint/asio_checkpointer.hpp"
#include "trainkit/checkpoint/list.hpp"
#include "trainkit/checkpoint/read.hpp"
#include "trainkit/checkpoint/sync_checkpointer.hpp"

namespace tk = trainkit;
namespace ck = trainkit::checkpoint;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

static_assert(ck::checkpointer<ck::asio_checkpointer>);
static_assert(ck::stager<ck::host_stager>);

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class AsioCheckpointer : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "trainkit_asio_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    dir_ = root_ / "ckpt";
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path root_;
  fs::path dir_;
};

// Buffers behind a checkpoint_state: odd sizes (alignment padding) and several dtypes, filled from
// a seed so two states differ in every tensor.
struct sample_state {
  std::vector<float> weights;
  std::vector<std::uint64_t> counter;
  std::vector<std::uint8_t> bytes;
  std::vector<double> empty;

  explicit sample_state(std::uint32_t seed, std::size_t n = 1000)
      : weights(n), counter(1), bytes(13) {
    refill(seed);
  }

  void refill(std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    for (auto& w : weights) w = normal(rng);
    counter[0] = rng() * 1000003ull;
    for (auto& b : bytes) b = std::uint8_t(rng());
  }

  ck::checkpoint_state view(std::uint64_t step) {
    ck::checkpoint_state s;
    s.step = step;
    s.tensors = {
        tk::make_state_tensor("model.weights", std::span(weights), {std::int64_t(weights.size())}),
        tk::make_state_tensor("optim.step", std::span(counter), {1}),
        tk::make_state_tensor("data.bytes", std::span(bytes), {13}),
        tk::make_state_tensor("model.empty", std::span(empty), {0})};
    s.meta = {{"data_position", "epoch=0 shard=1 offset=2 seed=3"}, {"step", std::to_string(step)}};
    return s;
  }

  bool operator==(const sample_state& o) const {
    return weights == o.weights && counter == o.counter && bytes == o.bytes;
  }
};

std::string read_all(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::uint64_t> listed_steps(const fs::path& dir) {
  std::vector<std::uint64_t> steps;
  for (const auto& c : ck::list_checkpoints(dir)) steps.push_back(c.step);
  return steps;
}

// Names in `dir` starting with ".tmp." (in-progress or wrecked saves).
std::vector<std::string> hidden_entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(".tmp.", 0) == 0)
      out.push_back(e.path().filename().string());
  return out;
}

// Loads `dir`'s newest checkpoint into a fresh sample_state's buffers.
bool load_into(const fs::path& dir, sample_state& into, std::uint64_t& step) {
  ck::asio_checkpointer c({dir});
  ck::checkpoint_state s = into.view(0);
  if (!c.load_latest(s)) return false;
  step = s.step;
  return true;
}

}  // namespace

TEST_F(AsioCheckpointer, FilesAreByteIdenticalToTheSynchronousCheckpointers) {
  sample_state a(1);
  ck::sync_checkpointer sync({root_ / "sync"});
  ck::asio_checkpointer async({dir_});
  for (std::uint64_t step : {3, 7}) {
    a.refill(std::uint32_t(step));
    sync.save(a.view(step));
    async.save(a.view(step));
    async.wait();
    EXPECT_EQ(async.take_error(), std::nullopt);
    const std::string name = ck::step_dir_name(step);
    EXPECT_EQ(read_all(dir_ / name / "tensors.bin"),
              read_all(root_ / "sync" / name / "tensors.bin"));
    EXPECT_EQ(read_all(dir_ / name / "manifest.json"),
              read_all(root_ / "sync" / name / "manifest.json"));
  }
  EXPECT_EQ(async.completed_saves(), 2u);
  sample_state b(99);
  std::uint64_t step = 0;
  ASSERT_TRUE(load_into(dir_, b, step));
  EXPECT_EQ(step, 7u);
  EXPECT_TRUE(b == a);
}

TEST_F(AsioCheckpointer, ChangesAfterBeforeUpdateDoNotReachTheSnapshot) {
  // The writer is held back until the state has been overwritten: the checkpoint must still hold
  // the values save() was given, i.e. before_update() returned only after they were copied.
  std::atomic<bool> release{false};
  ck::asio_checkpointer c({.dir = dir_, .before_write = [&](const fs::path&) {
                             while (!release.load()) std::this_thread::sleep_for(1ms);
                           }});
  sample_state live(1);
  const sample_state saved = live;
  c.save(live.view(5));
  EXPECT_TRUE(c.in_flight());
  c.before_update();
  live.refill(2);  // the optimizer update
  release = true;
  c.wait();
  EXPECT_FALSE(c.in_flight());
  sample_state loaded(3);
  std::uint64_t step = 0;
  ASSERT_TRUE(load_into(dir_, loaded, step));
  EXPECT_EQ(step, 5u);
  EXPECT_TRUE(loaded == saved);
  EXPECT_FALSE(loaded == live);
}

namespace {

// A gate a test opens by hand; shared so the stager that waits on it stays movable.
struct gate {
  std::atomic<bool> open{false};
  std::atomic<bool> passed{false};  // a copy went through
  void wait() {
    while (!open.load()) std::this_thread::sleep_for(1ms);
    passed = true;
  }
};

// host_stager whose copy (on the writer thread) waits for a gate: a copy slower than any step.
class gated_stager {
 public:
  static constexpr bool reads_device_memory = false;
  static constexpr bool queues_copies = false;

  std::byte* reserve(std::size_t bytes) { return host_.reserve(bytes); }
  void stage(std::span<const ck::stage_copy> copies) {
    copy_gate->wait();
    host_.stage(copies);
  }
  void order_after_stage() noexcept {}
  void wait_staged() noexcept {}
  void unstage(std::span<const ck::stage_copy> copies) { host_.unstage(copies); }

  std::shared_ptr<gate> copy_gate = std::make_shared<gate>();

 private:
  ck::host_stager host_;
};
static_assert(ck::stager<gated_stager>);

}  // namespace

TEST_F(AsioCheckpointer, SaveReturnsBeforeTheCopyAndBeforeUpdateWaitsForIt) {
  ck::basic_asio_checkpointer<gated_stager> c({dir_});
  const std::shared_ptr<gate> copy = c.stager().copy_gate;
  sample_state live(1);
  const sample_state saved = live;
  c.save(live.view(5));  // returns with the copy not started (it would wait forever otherwise)
  EXPECT_FALSE(copy->passed.load());
  // The loop reaches its next optimizer update: it must not change the state before the copy.
  std::chrono::steady_clock::time_point called;
  auto update = std::async(std::launch::async, [&] {
    called = std::chrono::steady_clock::now();
    c.before_update();
    live.refill(2);
  });
  EXPECT_EQ(update.wait_for(200ms), std::future_status::timeout)
      << "before_update returned before the snapshot was copied";
  const auto opened = std::chrono::steady_clock::now();
  copy->open = true;
  update.get();
  EXPECT_TRUE(copy->passed.load());
  // The wait is reported (the trainer's ckpt_stall_ms): at least from the call to the opening.
  using ms = std::chrono::duration<double, std::milli>;
  EXPECT_GE(c.last_update_wait_ms(), ms(opened - called).count() - 5.0);
  c.wait();
  EXPECT_EQ(c.take_error(), std::nullopt);
  sample_state loaded(3);
  std::uint64_t step = 0;
  ASSERT_TRUE(load_into(dir_, loaded, step));
  EXPECT_EQ(step, 5u);
  EXPECT_TRUE(loaded == saved);
  // Nothing is pending any more: the next update does not wait.
  c.before_update();
  EXPECT_EQ(c.last_update_wait_ms(), 0.0);
}

TEST_F(AsioCheckpointer, WaitCompletesACopyThatNoUpdateAskedFor) {
  // The run ends (or is stopped) right after a save: no before_update comes, and wait() must
  // still see the copy and the write through.
  ck::basic_asio_checkpointer<gated_stager> c({dir_});
  const std::shared_ptr<gate> copy = c.stager().copy_gate;
  sample_state live(4);
  const sample_state saved = live;
  c.save(live.view(9));
  std::thread opener([copy] {
    std::this_thread::sleep_for(50ms);
    copy->open = true;
  });
  c.wait();
  opener.join();
  EXPECT_TRUE(copy->passed.load());
  EXPECT_FALSE(c.in_flight());
  EXPECT_EQ(c.completed_saves(), 1u);
  c.before_update();  // the snapshot ended with wait()
  EXPECT_EQ(c.last_update_wait_ms(), 0.0);
  live.refill(5);
  sample_state loaded(3);
  std::uint64_t step = 0;
  ASSERT_TRUE(load_into(dir_, loaded, step));
  EXPECT_EQ(step, 9u);
  EXPECT_TRUE(loaded == saved);
}

TEST_F(AsioCheckpointer, StagingMemoryIsAllocatedOnceAndReused) {
  ck::asio_checkpointer c({dir_});
  sample_state s(1, 100000);
  std::byte* first = nullptr;
  for (std::uint64_t step = 1; step <= 4; ++step) {
    c.save(s.view(step));
    c.wait();
    std::byte* now = c.stager().reserve(0);  // reserve(0) returns the current buffer
    ASSERT_NE(now, nullptr);
    if (step == 1) first = now;
    EXPECT_EQ(now, first) << "step " << step;
  }
}

TEST_F(AsioCheckpointer, PrepareReservesTheStagingMemoryTheFirstSaveThenUses) {
  sample_state s(1, 100000);
  {
    ck::asio_checkpointer unprepared({root_ / "unprepared"});  // the control: the save allocates
    unprepared.save(s.view(1));
    unprepared.wait();
    EXPECT_EQ(unprepared.stager().allocations(), 1u);
  }
  ck::asio_checkpointer c({dir_});
  c.prepare(s.view(0));
  EXPECT_EQ(c.stager().allocations(), 1u);
  std::byte* reserved = c.stager().reserve(0);
  for (std::uint64_t step = 1; step <= 2; ++step) {
    c.save(s.view(step));
    c.before_update();
    c.wait();
    EXPECT_EQ(c.stager().allocations(), 1u) << "step " << step;
    EXPECT_EQ(c.stager().reserve(0), reserved);
  }
  sample_state loaded(9, 100000);
  std::uint64_t step = 0;
  ASSERT_TRUE(load_into(dir_, loaded, step));
  EXPECT_EQ(step, 2u);
  EXPECT_TRUE(loaded == s);
  // It checks the state as save does, before reserving anything.
  ck::checkpoint_state bad = s.view(3);
  bad.tensors[1].name = bad.tensors[0].name;
  EXPECT_THROW(c.prepare(bad), tk::config_error);
}

// The thread priorities the writer and the copy run at, seen from inside them.
struct seen_priority {
  std::atomic<int> nice{-100};
  std::atomic<int> policy{-1};
  void record() {
    nice = ::getpriority(PRIO_PROCESS, id_t(::syscall(SYS_gettid)));
    policy = ::sched_getscheduler(0);
  }
};

// host_stager that records the priority of the thread its copy runs on.
class priority_recording_stager {
 public:
  static constexpr bool reads_device_memory = false;
  static constexpr bool queues_copies = false;

  std::byte* reserve(std::size_t bytes) { return host_.reserve(bytes); }
  void stage(std::span<const ck::stage_copy> copies) {
    copy->record();
    host_.stage(copies);
  }
  void order_after_stage() noexcept {}
  void wait_staged() noexcept {}
  void unstage(std::span<const ck::stage_copy> copies) { host_.unstage(copies); }

  std::shared_ptr<seen_priority> copy = std::make_shared<seen_priority>();

 private:
  ck::host_stager host_;
};
static_assert(ck::stager<priority_recording_stager>);

TEST_F(AsioCheckpointer, TheWriterRunsAtLowPriorityAndTheCopyDoesNot) {
  const int own_nice = ::getpriority(PRIO_PROCESS, id_t(::syscall(SYS_gettid)));
  ASSERT_LT(own_nice, 19) << "the test runs at nice 19 already: nothing to observe";
  for (const auto priority : {ck::background_priority::low, ck::background_priority::idle,
                              ck::background_priority::normal}) {
    auto writer = std::make_shared<seen_priority>();
    ck::asio_checkpointer_config cfg{
        .dir = dir_ / std::to_string(int(priority)),
        .writer_priority = priority,
        .before_write = [writer](const fs::path&) { writer->record(); }};
    ck::basic_asio_checkpointer<priority_recording_stager> c(cfg);
    const std::shared_ptr<seen_priority> copy = c.stager().copy;
    sample_state s(1);
    c.save(s.view(1));
    c.wait();
    ASSERT_EQ(c.take_error(), std::nullopt);
    EXPECT_EQ(copy->nice.load(), own_nice);
    EXPECT_EQ(copy->policy.load(), SCHED_OTHER);
    switch (priority) {
      case ck::background_priority::low:
        EXPECT_EQ(writer->nice.load(), 19);
        EXPECT_EQ(writer->policy.load(), SCHED_OTHER);
        break;
      case ck::background_priority::idle:
        EXPECT_EQ(writer->policy.load(), SCHED_IDLE);
        break;
      case ck::background_priority::normal:
        EXPECT_EQ(writer->nice.load(), own_nice);
        EXPECT_EQ(writer->policy.load(), SCHED_OTHER);
        break;
    }
  }
  // The loop's own thread is untouched.
  EXPECT_EQ(::getpriority(PRIO_PROCESS, id_t(::syscall(SYS_gettid))), own_nice);
  EXPECT_EQ(::sched_getscheduler(0), SCHED_OTHER);
}

TEST_F(AsioCheckpointer, OneSaveInFlightAndTheWaitIsCountedAsStall) {
  std::atomic<int> writing{0}, most{0};
  ck::asio_checkpointer c({.dir = dir_, .before_write = [&](const fs::path&) {
                             const int now = ++writing;
                             most = std::max(most.load(), now);
                             std::this_thread::sleep_for(150ms);
                             --writing;
                           }});
  sample_state s(1);
  c.save(s.view(1));
  EXPECT_LT(c.last_wait_ms(), 1.0);  // nothing was in flight
  c.save(s.view(2));                 // the first is still sleeping in its write
  EXPECT_GE(c.last_wait_ms(), 100.0);
  EXPECT_GE(c.last_stall_ms(), c.last_wait_ms() + c.last_snapshot_ms() - 1e-9);
  c.wait();
  EXPECT_EQ(most.load(), 1);
  EXPECT_EQ(listed_steps(dir_), (std::vector<std::uint64_t>{1, 2}));
}

TEST_F(AsioCheckpointer, KeepLastPrunesOnlyAfterTheNewCheckpointIsComplete) {
  std::vector<std::vector<std::uint64_t>> seen_while_writing;
  ck::asio_checkpointer c({.dir = dir_, .keep_last = 2, .before_write = [&](const fs::path&) {
                             seen_while_writing.push_back(listed_steps(dir_));
                           }});
  sample_state s(1);
  for (std::uint64_t step = 1; step <= 5; ++step) {
    c.save(s.view(step));
    c.wait();
  }
  EXPECT_EQ(listed_steps(dir_), (std::vector<std::uint64_t>{4, 5}));
  ASSERT_EQ(seen_while_writing.size(), 5u);
  // While step 5 was being written, 3 and 4 (the two newest) were still there.
  EXPECT_EQ(seen_while_writing[4], (std::vector<std::uint64_t>{3, 4}));
  EXPECT_TRUE(hidden_entries(dir_).empty());
}

TEST_F(AsioCheckpointer, InjectedWriteFailureIsReportedAndTheRunGoesOn) {
  const std::string disk_full =
      "cannot write '" + (dir_ / "x").string() + "': No space left on device";
  ck::asio_checkpointer c({.dir = dir_, .before_write = [&](const fs::path& p) {
                             if (p.filename() == ck::step_dir_name(3)) {
                               fs::create_directories(p.parent_path() / ".tmp.step_00000003");
                               throw tk::io_error(disk_full);
                             }
                           }});
  sample_state s(1);
  const sample_state at_two = s;
  c.save(s.view(1));
  c.save(s.view(2));
  c.before_update();  // the state may change from here on
  s.refill(3);
  c.save(s.view(3));  // fails in the background
  c.wait();
  const auto err = c.take_error();
  ASSERT_TRUE(err.has_value());
  EXPECT_TRUE(contains(*err, disk_full)) << *err;
  EXPECT_TRUE(contains(*err, "step 3 was not saved")) << *err;
  EXPECT_TRUE(contains(*err, "step 2, is intact")) << *err;
  EXPECT_EQ(c.take_error(), std::nullopt);  // reported once
  EXPECT_EQ(listed_steps(dir_), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_TRUE(hidden_entries(dir_).empty());  // the half-written directory was removed
  sample_state loaded(9);
  std::uint64_t step = 0;
  ASSERT_TRUE(load_into(dir_, loaded, step));
  EXPECT_EQ(step, 2u);
  EXPECT_TRUE(loaded == at_two);
  // Later saves work again.
  c.save(s.view(4));
  c.wait();
  EXPECT_EQ(c.take_error(), std::nullopt);
  EXPECT_EQ(listed_steps(dir_), (std::vector<std::uint64_t>{1, 2, 4}));
}

TEST_F(AsioCheckpointer, ErrorIsReportedByTheNextSaveWithoutWaitingForWait) {
  ck::asio_checkpointer c({.dir = dir_, .before_write = [](const fs::path& p) {
                             if (p.filename() == ck::step_dir_name(1))
                               throw tk::io_error("cannot create '" + p.string() +
                                                  "': Permission denied");
                           }});
  sample_state s(1);
  c.save(s.view(1));
  c.save(s.view(2));  // collects step 1's failure while waiting for it
  const auto err = c.take_error();
  ASSERT_TRUE(err.has_value());
  EXPECT_TRUE(contains(*err, "Permission denied")) << *err;
  EXPECT_TRUE(contains(*err, "no complete checkpoint exists yet")) << *err;
  c.wait();
  EXPECT_EQ(listed_steps(dir_), (std::vector<std::uint64_t>{2}));
}

TEST_F(AsioCheckpointer, FailOnErrorThrowsFromTheNextCall) {
  auto failing = [](const fs::path& p) {
    throw tk::io_error("cannot write '" + p.string() + "': Input/output error");
  };
  {
    ck::asio_checkpointer c({.dir = dir_, .fail_on_error = true, .before_write = failing});
    sample_state s(1);
    c.save(s.view(1));
    EXPECT_THROW(c.wait(), tk::io_error);
    EXPECT_NO_THROW(c.wait());  // thrown once
  }
  {
    ck::asio_checkpointer c({.dir = dir_, .fail_on_error = true, .before_write = failing});
    sample_state s(1);
    c.save(s.view(1));
    try {
      c.save(s.view(2));
      ADD_FAILURE() << "save after a failed save did not throw";
    } catch (const tk::io_error& e) {
      EXPECT_TRUE(contains(e.what(), "Input/output error")) << e.what();
      EXPECT_TRUE(contains(e.what(), "step 1")) << e.what();
    }
    c.wait();
    EXPECT_TRUE(listed_steps(dir_).empty());  // step 2 was refused, not saved
  }
}

TEST_F(AsioCheckpointer, ResumeSkipsACorruptNewestCheckpointNamingTheTensor) {
  ck::asio_checkpointer c({dir_});
  sample_state s(1);
  const sample_state first = s;
  c.save(s.view(1));
  c.before_update();  // the state may change from here on
  s.refill(2);
  c.save(s.view(2));
  c.wait();
  // Flip a byte inside model.weights of step 2.
  const fs::path bin = dir_ / ck::step_dir_name(2) / "tensors.bin";
  std::string bytes = read_all(bin);
  bytes[100] = char(bytes[100] ^ 0x40);
  std::ofstream(bin, std::ios::binary | std::ios::trunc) << bytes;

  sample_state loaded(7);
  ck::checkpoint_state st = loaded.view(0);
  ASSERT_TRUE(c.load_latest(st));
  EXPECT_EQ(st.step, 1u);
  EXPECT_TRUE(loaded == first);
  ASSERT_EQ(c.warnings().size(), 1u);
  EXPECT_TRUE(contains(c.warnings()[0], "CRC-32C mismatch in tensor 'model.weights'"))
      << c.warnings()[0];
  EXPECT_TRUE(contains(c.warnings()[0], ck::step_dir_name(2))) << c.warnings()[0];
}

TEST_F(AsioCheckpointer, AMetaValueThatIsNotUtf8IsRefusedBySave) {
  ck::asio_checkpointer c({dir_});
  sample_state s(1);
  ck::checkpoint_state bad = s.view(1);
  bad.meta["model"] = "d12\xff";
  EXPECT_THROW(c.save(bad), tk::config_error);  // on the caller's thread, not a later warning
  EXPECT_THROW(c.prepare(bad), tk::config_error);
  c.wait();
  EXPECT_EQ(c.take_error(), std::nullopt);
  EXPECT_EQ(c.completed_saves(), 0u);
  EXPECT_TRUE(listed_steps(dir_).empty());
}

TEST_F(AsioCheckpointer, BadStatesAreConfigErrorsBeforeAnythingIsWritten) {
  ck::asio_checkpointer c({dir_});
  sample_state s(1);
  auto device = s.view(1);
  device.tensors[0].on_device = true;
  try {
    c.save(device);
    ADD_FAILURE() << "device tensor accepted";
  } catch (const tk::config_error& e) {
    EXPECT_TRUE(contains(e.what(), "'model.weights'")) << e.what();
    EXPECT_TRUE(contains(e.what(), "CUDA stager")) << e.what();
  }
  auto twice = s.view(1);
  twice.tensors[1].name = "model.weights";
  EXPECT_THROW(c.save(twice), tk::config_error);
  auto null = s.view(1);
  null.tensors[0].data = nullptr;
  EXPECT_THROW(c.save(null), tk::config_error);
  c.wait();
  EXPECT_FALSE(fs::exists(dir_));
  auto load_device = s.view(0);
  load_device.tensors[2].on_device = true;
  EXPECT_THROW(c.load_latest(load_device), tk::config_error);
  EXPECT_THROW(ck::asio_checkpointer({""}), tk::config_error);
  EXPECT_THROW(ck::asio_checkpointer({dir_, -1}), tk::config_error);
}

namespace {

// Stands in for the CUDA stager: "device" tensors are host memory here, but every byte moves
// through stage/order_after_stage/wait_staged/unstage, whose calls are counted, so the hook's
// contract is tested without a GPU. Like the CUDA stager it "queues" its copies (copying at once),
// so stage runs inside save and before_update calls order_after_stage. wait_staged runs on the
// writer thread, so its counter is atomic.
class recording_stager {
 public:
  static constexpr bool reads_device_memory = true;
  static constexpr bool queues_copies = true;

  std::byte* reserve(std::size_t bytes) { return host_.reserve(bytes); }
  void stage(std::span<const ck::stage_copy> copies) {
    ++stages;
    for (const auto& c : copies) {
      device_copies += c.tensor->on_device ? 1 : 0;
      if (c.tensor->bytes() > 0) std::memcpy(c.staging, c.tensor->data, c.tensor->bytes());
    }
  }
  void order_after_stage() { ++orders; }
  void wait_staged() { ++waits; }
  void unstage(std::span<const ck::stage_copy> copies) {
    ++unstages;
    for (const auto& c : copies)
      if (c.tensor->bytes() > 0) std::memcpy(c.tensor->data, c.staging, c.tensor->bytes());
  }

  int stages = 0, orders = 0, unstages = 0, device_copies = 0;
  std::atomic<int> waits{0};

  recording_stager() = default;
  recording_stager(recording_stager&& o) noexcept
      : stages(o.stages),
        orders(o.orders),
        unstages(o.unstages),
        device_copies(o.device_copies),
        waits(o.waits.load()),
        host_(std::move(o.host_)) {}
  recording_stager& operator=(recording_stager&& o) noexcept {
    stages = o.stages;
    orders = o.orders;
    unstages = o.unstages;
    device_copies = o.device_copies;
    waits = o.waits.load();
    host_ = std::move(o.host_);
    return *this;
  }

 private:
  ck::detail::staging_buffer host_;
};
static_assert(ck::stager<recording_stager>);

}  // namespace

TEST_F(AsioCheckpointer, DeviceTensorsGoThroughTheStagerHook) {
  ck::basic_asio_checkpointer<recording_stager> c({dir_});
  sample_state s(1);
  auto state = s.view(4);
  state.tensors[0].on_device = true;
  c.save(state);
  EXPECT_EQ(c.stager().stages, 1);  // a stager that queues copies is called inside save
  c.before_update();
  c.before_update();  // once per save
  EXPECT_EQ(c.stager().orders, 1);
  c.wait();
  EXPECT_EQ(c.stager().stages, 1);
  EXPECT_EQ(c.stager().device_copies, 1);
  EXPECT_EQ(c.stager().waits.load(), 1);
  sample_state loaded(2);
  auto into = loaded.view(0);
  into.tensors[0].on_device = true;
  ASSERT_TRUE(c.load_latest(into));
  EXPECT_EQ(c.stager().unstages, 1);
  EXPECT_EQ(into.step, 4u);
  EXPECT_EQ(into.meta.at("step"), "4");
  EXPECT_TRUE(loaded == s);
}

TEST_F(AsioCheckpointer, MovingTheCheckpointerWhileASaveIsInFlightIsSafe) {
  std::atomic<bool> release{false};
  ck::asio_checkpointer a({.dir = dir_, .before_write = [&](const fs::path&) {
                             while (!release.load()) std::this_thread::sleep_for(1ms);
                           }});
  sample_state s(1);
  a.save(s.view(1));
  ck::asio_checkpointer b(std::move(a));
  release = true;
  b.wait();
  EXPECT_EQ(listed_steps(dir_), (std::vector<std::uint64_t>{1}));
}

namespace {

// A small tmpfs mounted for one test, so "disk full" is the kernel's ENOSPC, not a simulation.
// Needs CAP_SYS_ADMIN; `mounted()` is false where mounting is not allowed.
struct small_tmpfs {
  fs::path path;
  bool ok = false;
  small_tmpfs(const fs::path& at, const char* size) : path(at) {
    fs::create_directories(path);
    ok = ::mount("tmpfs", path.c_str(), "tmpfs", 0, size) == 0;
  }
  ~small_tmpfs() {
    if (ok) ::umount2(path.c_str(), MNT_DETACH);
  }
  bool mounted() const { return ok; }
};

}  // namespace

TEST_F(AsioCheckpointer, RealDiskFullOnASmallTmpfs) {
  small_tmpfs disk(root_ / "disk", "size=2m");
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs CAP_SYS_ADMIN)";
  const fs::path dir = disk.path / "ckpt";
  ck::asio_checkpointer c({dir, 1});
  sample_state s(1, 100000);  // 400 kB of weights
  const sample_state first = s;
  c.save(s.view(1));
  c.wait();
  ASSERT_EQ(c.take_error(), std::nullopt);
  // Another process fills the disk, leaving less than one checkpoint's worth.
  {
    std::ofstream filler(disk.path / "filler", std::ios::binary);
    const std::string chunk(64 * 1024, 'x');
    const auto free_bytes = [&] { return fs::space(disk.path).available; };
    while (free_bytes() > 200 * 1024 && filler.write(chunk.data(), std::streamsize(chunk.size())))
      filler.flush();
  }
  s.refill(2);
  c.save(s.view(2));
  c.wait();
  const auto err = c.take_error();
  ASSERT_TRUE(err.has_value());
  EXPECT_TRUE(contains(*err, "No space left on device")) << *err;
  EXPECT_TRUE(contains(*err, (dir / ".tmp.step_00000002").string())) << *err;
  EXPECT_TRUE(contains(*err, "step 1, is intact")) << *err;
  EXPECT_EQ(listed_steps(dir), (std::vector<std::uint64_t>{1}));
  EXPECT_TRUE(hidden_entries(dir).empty());
  sample_state loaded(5, 100000);
  std::uint64_t step = 0;
  ASSERT_TRUE(load_into(dir, loaded, step));
  EXPECT_EQ(step, 1u);
  EXPECT_TRUE(loaded == first);
  // Space comes back: the next save succeeds and keep_last=1 then removes step 1.
  fs::remove(disk.path / "filler");
  s.refill(3);
  c.save(s.view(3));
  c.wait();
  EXPECT_EQ(c.take_error(), std::nullopt);
  EXPECT_EQ(listed_steps(dir), (std::vector<std::uint64_t>{3}));
}

// Disk-full soak through the writer's fault seam (runs where no tmpfs can be mounted): the disk
// "fills" at a different byte of each save. Async: every failed save is one error and training
// goes on; sync: the save throws io_error. In both, no temporary is left and the newest complete
// checkpoint loads with the state it was saved with.
TEST_F(AsioCheckpointer, DiskFullAtRandomBytesLeavesNoPartialFilesAsyncAndSync) {
  struct seam_reset {
    ~seam_reset() { ck::detail::simulated_disk_space = -1; }
  } reset;
  std::mt19937 rng(7);
  sample_state s(1);
  const std::uint64_t one_save = [&] {  // bytes a complete checkpoint puts on disk
    ck::sync_checkpointer probe({root_ / "probe"});
    probe.save(s.view(1));
    std::uint64_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(root_ / "probe"))
      if (e.is_regular_file()) n += e.file_size();
    return n;
  }();
  std::uniform_int_distribution<std::int64_t> space(0, std::int64_t(one_save) - 1);

  ck::asio_checkpointer async_ckpt({.dir = dir_});
  ck::sync_checkpointer sync_ckpt({root_ / "sync"});
  std::uint64_t good_step = 0;
  sample_state good(2);
  int async_failures = 0;
  for (std::uint64_t step = 1; step <= 24; ++step) {
    s.refill(unsigned(100 + step));
    const bool full = step % 3 != 0;  // two of three saves hit a full disk
    ck::detail::simulated_disk_space = full ? space(rng) : -1;
    async_ckpt.save(s.view(step));
    async_ckpt.wait();
    if (const auto err = async_ckpt.take_error()) {
      ++async_failures;
      EXPECT_TRUE(full) << *err;
      EXPECT_TRUE(contains(*err, "No space left on device")) << *err;
    } else {
      EXPECT_FALSE(full) << "step " << step << ": a save on a full disk succeeded";
    }
    ck::detail::simulated_disk_space = full ? space(rng) : -1;
    if (full) {
      EXPECT_THROW(sync_ckpt.save(s.view(step)), tk::io_error) << "step " << step;
    } else {
      sync_ckpt.save(s.view(step));
      good_step = step;
      good = s;
    }
    ck::detail::simulated_disk_space = -1;
    EXPECT_TRUE(hidden_entries(dir_).empty()) << "step " << step;
    EXPECT_TRUE(hidden_entries(root_ / "sync").empty()) << "step " << step;
  }
  EXPECT_EQ(async_failures, 16);
  for (const fs::path& d : {dir_, root_ / "sync"}) {
    sample_state loaded(9);
    std::uint64_t step = 0;
    ASSERT_TRUE(load_into(d, loaded, step)) << d;
    EXPECT_EQ(step, good_step) << d;
    EXPECT_TRUE(loaded == good) << d;
  }
}
