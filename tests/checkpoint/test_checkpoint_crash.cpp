// Crash safety of the asynchronous checkpointer: a training process that saves after every step
// (asio_crash_child) is killed with SIGKILL at random moments, 30 times, each run resuming from
// what the killed one left. After every kill, every complete checkpoint in the directory must
// load with all CRCs valid (no corrupt or half-written one is ever listed), resume must find one
// without skipping anything, and the newest step never goes backwards.
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "trainkit/checkpoint/asio_checkpointer.hpp"
#include "trainkit/checkpoint/list.hpp"
#include "trainkit/checkpoint/read.hpp"

extern char** environ;

namespace ck = trainkit::checkpoint;
namespace fs = std::filesystem;

namespace {

pid_t spawn_child(const fs::path& dir, bool stop_on_signal = false) {
  std::string exe = TRAINKIT_CRASH_CHILD;
  std::string arg = dir.string();
  std::string flag = "--stop-on-signal";
  char* argv[] = {exe.data(), arg.data(), stop_on_signal ? flag.data() : nullptr, nullptr};
  // One OpenMP thread: two spinning OpenMP threads beside the writer thread on a busy 2-core
  // machine made a step take ~0.5 s (4 steps in 2 s against 170 with one), so the kills, 40 to
  // 400 ms apart, came before the first save and the test measured the scheduler, not the saves.
  ::setenv("OMP_NUM_THREADS", "1", 1);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, environ);
  if (rc != 0) return -1;
  return pid;
}

}  // namespace

TEST(CheckpointCrash, SigkillDuringSavesNeverLeavesACorruptCheckpoint) {
  std::string pattern = (fs::temp_directory_path() / "trainkit_crash_XXXXXX").string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  const fs::path root = pattern;
  const fs::path dir = root / "ckpt";
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> delay_ms(40, 400);
  SCOPED_TRACE("random seed " + std::to_string(seed));

  constexpr int kills = 30;
  std::uint64_t newest = 0;
  int runs_with_a_checkpoint = 0;
  for (int i = 0; i < kills; ++i) {
    const pid_t pid = spawn_child(dir);
    ASSERT_GT(pid, 0) << "cannot start " << TRAINKIT_CRASH_CHILD;
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "kill " << i << ": the child ended on its own (status " << status << ")";

    const auto all = ck::list_checkpoints(dir);
    for (const auto& c : all) {
      ck::checkpoint_state verify_only;  // asks for no tensors: every CRC is still checked
      EXPECT_NO_THROW(ck::load_checkpoint(c.path, verify_only)) << "kill " << i << ": " << c.path;
    }
    if (all.empty()) {
      EXPECT_EQ(newest, 0u) << "kill " << i << ": every checkpoint vanished";
      continue;
    }
    ++runs_with_a_checkpoint;
    ck::asio_checkpointer resume({dir});
    ck::checkpoint_state latest;
    ASSERT_TRUE(resume.load_latest(latest)) << "kill " << i;
    // The only warnings allowed: the killed save's temporaries (a save or a prune), removed by
    // name.
    for (const auto& w : resume.warnings())
      EXPECT_EQ(w.rfind("removed .tmp.", 0), 0u) << "kill " << i << ": " << w;
    for (const auto& e : fs::directory_iterator(dir))
      EXPECT_NE(e.path().filename().string().rfind(".tmp.", 0), 0u)
          << "kill " << i << ": " << e.path() << " survived the checkpointer's start-up";
    EXPECT_GE(latest.step, newest) << "kill " << i << ": the newest checkpoint went backwards";
    newest = latest.step;
  }
  // The runs made progress across kills (each resumed from the last one's checkpoint).
  EXPECT_GE(runs_with_a_checkpoint, kills / 2);
  EXPECT_GT(newest, std::uint64_t(kills));
  std::printf("%d kills, newest checkpoint step %llu\n", kills, (unsigned long long)newest);
  fs::remove_all(root);
}

// SIGINT while a background save is (almost always) in flight: the run waits for the write,
// writes its final checkpoint and exits 0; nothing half-written is left and the newest loads.
TEST(CheckpointCrash, SigintDuringABackgroundWriteEndsWithExitZeroAfterTheWrite) {
  std::string pattern = (fs::temp_directory_path() / "trainkit_sigint_XXXXXX").string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  const fs::path root = pattern;
  const fs::path dir = root / "ckpt";
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> delay_ms(150, 500);
  SCOPED_TRACE("random seed " + std::to_string(seed));
  std::uint64_t newest = 0;
  for (int i = 0; i < 5; ++i) {
    const pid_t pid = spawn_child(dir, true);
    ASSERT_GT(pid, 0) << "cannot start " << TRAINKIT_CRASH_CHILD;
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    ASSERT_EQ(::kill(pid, SIGINT), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "run " << i << ": status " << status;
    EXPECT_EQ(WEXITSTATUS(status), 0) << "run " << i;
    for (const auto& e : fs::directory_iterator(dir))
      EXPECT_NE(e.path().filename().string().rfind(".tmp.", 0), 0u)
          << "run " << i << ": " << e.path();
    const auto all = ck::list_checkpoints(dir);
    ASSERT_FALSE(all.empty()) << "run " << i << ": no final checkpoint";
    for (const auto& c : all) {
      ck::checkpoint_state verify_only;
      EXPECT_NO_THROW(ck::load_checkpoint(c.path, verify_only)) << "run " << i << ": " << c.path;
    }
    EXPECT_GT(all.back().step, newest) << "run " << i << ": the final checkpoint made no progress";
    newest = all.back().step;
  }
  fs::remove_all(root);
}
