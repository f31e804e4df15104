// Tests for trainkit/checkpoint: round trips (bit-identical tensors, meta, step), keep-last-K,
// hidden temporary directories, and every corruption resume must survive (flipped byte, truncated
// data, missing or malformed manifest, dtype/shape mismatch), with fallback to older checkpoints,
// plus io_error for an unwritable directory and an end-to-end optimizer resume.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../optim/mock_model.hpp"
#include "trainkit/checkpoint/concepts.hpp"
#include "trainkit/checkpoint/detail/chunked_writer.hpp"
#include "trainkit/checkpoint/format.hpp"
#include "trainkit/checkpoint/list.hpp"
#include "trainkit/checkpoint/no_checkpoint.hpp"
#include "trainkit/checkpoint/read.hpp"
#include "trainkit/checkpoint/sync_checkpointer.hpp"
#include "trainkit/checkpoint/write.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/grad_clip.hpp"

namespace tk = trainkit;
namespace ck = trainkit::checkpoint;
namespace fs = std::filesystem;

static_assert(ck::checkpointer<ck::sync_checkpointer>);
static_assert(ck::checkpointer<ck::no_checkpoint>);

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A fresh directory per test, removed afterwards.
class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "trainkit_ckpt_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    dir_ = root_ / "ckpt";
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path root_;
  fs::path dir_;
};

// Owns the buffers behind a checkpoint_state with tensors of several dtypes and odd sizes, so
// 64-byte alignment padding is exercised.
struct sample_state {
  std::vector<float> weights;          // (3, 5)
  std::vector<std::uint64_t> counter;  // (1,)
  std::vector<std::int32_t> ids;       // (7,)
  std::vector<std::uint8_t> bytes;     // (13,)
  std::vector<tk::bf16> halves;        // (2, 3)
  std::vector<double> empty;           // (0,)

  explicit sample_state(std::uint32_t seed)
      : weights(15), counter(1), ids(7), bytes(13), halves(6) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    for (auto& w : weights) w = normal(rng);
    counter[0] = rng() * 1000003ull;
    for (auto& i : ids) i = std::int32_t(rng());
    for (auto& b : bytes) b = std::uint8_t(rng());
    for (auto& h : halves) h = tk::bf16::from_float(normal(rng));
  }

  ck::checkpoint_state view(std::uint64_t step) {
    ck::checkpoint_state s;
    s.step = step;
    s.tensors = {tk::make_state_tensor("model.weights", std::span(weights), {3, 5}),
                 tk::make_state_tensor("optim.step", std::span(counter), {1}),
                 tk::make_state_tensor("data.ids", std::span(ids), {7}),
                 tk::make_state_tensor("data.bytes", std::span(bytes), {13}),
                 tk::make_state_tensor("model.halves", std::span(halves), {2, 3}),
                 tk::make_state_tensor("model.empty", std::span(empty), {0})};
    s.meta = {{"data_position", "epoch=0 shard=1 offset=2 seed=3"},
              {"note", "quote \" backslash \\ newline \n tab \t bell \x07 utf8 \xc3\xa9"}};
    return s;
  }

  bool same_as(const sample_state& o) const {
    auto eq = [](const auto& a, const auto& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
    };
    return eq(weights, o.weights) && eq(counter, o.counter) && eq(ids, o.ids) &&
           eq(bytes, o.bytes) && eq(halves, o.halves);
  }
};

void flip_byte(const fs::path& file, std::uint64_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(std::streamoff(offset));
  char c = 0;
  f.read(&c, 1);
  c = char(c ^ 0x5a);
  f.seekp(std::streamoff(offset));
  f.write(&c, 1);
}

void write_file(const fs::path& file, const std::string& text) {
  std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
}

std::vector<std::uint64_t> listed_steps(const fs::path& dir) {
  std::vector<std::uint64_t> steps;
  for (const auto& c : ck::list_checkpoints(dir)) steps.push_back(c.step);
  return steps;
}

// Runs f, expecting format_error whose message contains every needle.
template <class F>
void expect_format_error(F&& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no format_error";
  } catch (const tk::format_error& e) {
    for (const auto& n : needles) EXPECT_TRUE(contains(e.what(), n)) << e.what() << " lacks " << n;
  }
}

}  // namespace

TEST(CheckpointFormat, StepDirectoryNames) {
  EXPECT_EQ(ck::step_dir_name(12), "step_00000012");  // docs/formats_checkpoint.md's example
  EXPECT_EQ(ck::step_dir_name(123456789), "step_123456789");
  EXPECT_EQ(ck::parse_step_dir_name("step_00000012"), 12u);
  EXPECT_EQ(ck::parse_step_dir_name("step_123456789"), 123456789u);
  for (const char* bad : {"step_12", "step_0000001x", ".tmp.step_00000012", "step_000000012",
                          "step_+0000012", "steps_00000012", "step_"})
    EXPECT_FALSE(ck::parse_step_dir_name(bad).has_value()) << bad;
}

TEST(CheckpointFormat, ManifestJsonRoundTrip) {
  ck::manifest m;
  m.step = 42;
  m.meta = {{"a", "x\"y\\z\n\x01"}, {"config.lr", "6e-4"}};
  m.tensors = {{"wte", tk::dtype::f32, {4, 8}, 0, 128, 0xdeadbeefu},
               {"scalar", tk::dtype::u64, {}, 128, 8, 7u},
               {"h.0.w", tk::dtype::bf16, {3}, 192, 6, 0u}};
  const std::string json = ck::manifest_to_json(m);
  EXPECT_TRUE(contains(json, "\"format\": \"trainkit-checkpoint\"")) << json;
  EXPECT_EQ(ck::parse_manifest(json, "mem"), m);
  ck::manifest empty;
  EXPECT_EQ(ck::parse_manifest(ck::manifest_to_json(empty), "mem"), empty);
}

// The writer's UTF-8 check must refuse exactly what the manifest reader (nlohmann_json) refuses:
// fixed cases at each rule's edge, then random strings biased to bytes >= 0x80.
TEST(CheckpointFormat, Utf8CheckAgreesWithTheManifestReader) {
  const auto reader_accepts = [](const std::string& value) {
    ck::manifest m;
    m.meta = {{"k", value}};
    try {
      return ck::parse_manifest(ck::manifest_to_json(m), "mem").meta.at("k") == value;
    } catch (const tk::format_error&) {
      return false;
    }
  };
  const std::vector<std::pair<std::string, bool>> cases = {
      {"", true},
      {"plain \x7f", true},
      {"\xc3\xa9", true},                  // é
      {"\xe6\x97\xa5\xe6\x9c\xac", true},  // 日本
      {"\xf0\x9f\x98\x80", true},          // U+1F600
      {"\xf4\x8f\xbf\xbf", true},          // U+10FFFF
      {"\xed\x9f\xbf", true},              // U+D7FF
      {"\xff", false},
      {"\x80", false},              // continuation without a lead
      {"\xc0\x80", false},          // overlong NUL
      {"\xe0\x9f\xbf", false},      // overlong
      {"\xed\xa0\x80", false},      // surrogate U+D800
      {"\xf4\x90\x80\x80", false},  // U+110000
      {"\xe2\x82", false},          // cut short
      {"ok \xc3", false},           // cut short at the end
      {"\xc3\x28", false}};         // bad continuation
  for (const auto& [s, valid] : cases) {
    EXPECT_EQ(!tk::find_invalid_utf8(s).has_value(), valid) << tk::escaped_for_message(s);
    EXPECT_EQ(reader_accepts(s), valid) << tk::escaped_for_message(s);
  }
  std::mt19937 rng(21);
  int valid_seen = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string s(rng() % 6, '\0');
    for (auto& c : s) c = char(rng() % 4 == 0 ? rng() % 0x80 : 0x80 + rng() % 0x80);
    const bool valid = !tk::find_invalid_utf8(s).has_value();
    valid_seen += valid;
    ASSERT_EQ(valid, reader_accepts(s)) << tk::escaped_for_message(s);
  }
  EXPECT_GT(valid_seen, 100);  // both outcomes were exercised
}

TEST_F(CheckpointTest, MetaOrNamesThatAreNotUtf8AreRefusedBeforeAnythingIsWritten) {
  sample_state s(3);
  auto bad_value = s.view(4);
  bad_value.meta["config"] = "lr=6e-4 \xff\xfe";
  try {
    ck::write_checkpoint(dir_, bad_value, 0);
    ADD_FAILURE() << "an invalid UTF-8 meta value was written";
  } catch (const tk::config_error& e) {
    EXPECT_TRUE(contains(e.what(), "meta \"config\" value is not valid UTF-8 (byte 8")) << e.what();
    EXPECT_TRUE(contains(e.what(), "\\xff\\xfe")) << e.what();
  }
  auto bad_key = s.view(4);
  bad_key.meta["k\xc0\x80"] = "v";
  EXPECT_THROW(ck::write_checkpoint(dir_, bad_key, 0), tk::config_error);
  auto bad_name = s.view(4);
  bad_name.tensors[2].name = "data.\xed\xa0\x80";
  EXPECT_THROW(ck::write_checkpoint(dir_, bad_name, 0), tk::config_error);
  ck::sync_checkpointer sync({.dir = dir_});
  EXPECT_THROW(sync.save(bad_value), tk::config_error);
  EXPECT_TRUE(!fs::exists(dir_) || fs::is_empty(dir_));
  // Valid multi-byte text is kept as it was.
  auto good = s.view(5);
  good.meta["note"] = "na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80";
  ck::write_checkpoint(dir_, good, 0);
  sample_state back(9);
  auto into = back.view(0);
  ck::load_checkpoint(dir_ / "step_00000005", into);
  EXPECT_EQ(into.meta.at("note"), good.meta.at("note"));
}

TEST_F(CheckpointTest, WriteListLoadRoundTripIsBitIdentical) {
  sample_state saved(1);
  const fs::path path = ck::write_checkpoint(dir_, saved.view(12), 0);
  EXPECT_EQ(path, dir_ / "step_00000012");
  EXPECT_TRUE(fs::is_regular_file(path / "tensors.bin"));
  EXPECT_TRUE(fs::is_regular_file(path / "manifest.json"));
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_FALSE(e.path().filename().string().starts_with(".tmp")) << e.path();
  ASSERT_EQ(listed_steps(dir_), std::vector<std::uint64_t>{12});

  const ck::manifest m = ck::read_manifest(path / "manifest.json");
  ASSERT_EQ(m.tensors.size(), 6u);
  for (const auto& e : m.tensors) EXPECT_EQ(e.offset % 64, 0u) << e.name;
  EXPECT_EQ(fs::file_size(path / "tensors.bin"), m.data_size());

  sample_state loaded(2);
  ASSERT_FALSE(loaded.same_as(saved));
  ck::checkpoint_state into = loaded.view(0);
  into.meta.clear();
  ck::load_checkpoint(path, into);
  EXPECT_TRUE(loaded.same_as(saved));
  EXPECT_EQ(into.step, 12u);
  EXPECT_EQ(into.meta, saved.view(12).meta);
}

TEST_F(CheckpointTest, KeepLastKeepsTheNewestK) {
  sample_state s(3);
  for (std::uint64_t step = 1; step <= 5; ++step) ck::write_checkpoint(dir_, s.view(step * 10), 2);
  EXPECT_EQ(listed_steps(dir_), (std::vector<std::uint64_t>{40, 50}));
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_FALSE(e.path().filename().string().starts_with(".tmp")) << e.path();

  const fs::path all = root_ / "all";
  for (std::uint64_t step = 1; step <= 4; ++step) ck::write_checkpoint(all, s.view(step), 0);
  EXPECT_EQ(listed_steps(all), (std::vector<std::uint64_t>{1, 2, 3, 4}));
}

TEST_F(CheckpointTest, KeepLastNeverDeletesTheOneJustWritten) {
  sample_state s(4);
  ck::write_checkpoint(dir_, s.view(10), 0);
  ck::write_checkpoint(dir_, s.view(20), 0);
  ck::write_checkpoint(dir_, s.view(5), 1);  // older than what is there (a restarted run)
  EXPECT_EQ(listed_steps(dir_), (std::vector<std::uint64_t>{5, 20}));
}

TEST_F(CheckpointTest, ResavingAStepReplacesIt) {
  sample_state first(5), second(6), loaded(7);
  ck::write_checkpoint(dir_, first.view(3), 0);
  ck::write_checkpoint(dir_, second.view(3), 0);
  EXPECT_EQ(listed_steps(dir_), std::vector<std::uint64_t>{3});
  auto into = loaded.view(0);
  ck::load_checkpoint(dir_ / "step_00000003", into);
  EXPECT_TRUE(loaded.same_as(second));
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_FALSE(e.path().filename().string().starts_with(".tmp")) << e.path();
}

TEST_F(CheckpointTest, TemporaryAndIncompleteDirectoriesAreIgnored) {
  sample_state good(8), newer(9);
  ck::write_checkpoint(dir_, good.view(7), 0);
  // A crashed save of step 9 that got as far as its manifest, still under the hidden name.
  // A complete-looking name without a manifest, a badly named one, and a stray file.
  const fs::path no_manifest = ck::write_checkpoint(dir_, newer.view(8), 0);
  fs::remove(no_manifest / "manifest.json");
  const fs::path crashed = ck::write_checkpoint(root_ / "other", newer.view(9), 0);
  fs::rename(crashed, dir_ / ".tmp.step_00000009");
  fs::create_directory(dir_ / "step_11");
  write_file(dir_ / "step_00000010", "not a directory");
  EXPECT_EQ(listed_steps(dir_), std::vector<std::uint64_t>{7});

  sample_state loaded(10);
  ck::sync_checkpointer c({.dir = dir_});
  auto into = loaded.view(0);
  ASSERT_TRUE(c.load_latest(into));
  EXPECT_EQ(into.step, 7u);
  EXPECT_TRUE(loaded.same_as(good));
  ASSERT_EQ(c.warnings().size(), 1u);  // the crashed save's directory, removed at construction
  EXPECT_TRUE(contains(c.warnings()[0], ".tmp.step_00000009")) << c.warnings()[0];
}

TEST_F(CheckpointTest, StaleTemporariesAreRemovedBeforeASaveAndOnlyTrainkitsOwn) {
  sample_state s(11), old(12);
  fs::create_directories(dir_ / ".tmp.step_00000001");
  fs::create_directories(dir_ / ".tmp.step_00000009");  // saves are serial: nothing is running
  fs::create_directories(dir_ / ".tmp.replaced.step_00000001");
  fs::create_directories(dir_ / ".tmp.delete.step_00000000");
  // A crash between moving step 5 aside and renaming its new copy in: the only copy of step 5.
  const fs::path five = ck::write_checkpoint(dir_, old.view(5), 0);
  fs::rename(five, dir_ / ".tmp.replaced.step_00000005");
  // Not trainkit's names: left alone.
  for (const char* foreign : {".tmp.notes", ".tmp.step_12", ".tmp.delete.x", "tmp.step_00000003"})
    fs::create_directories(dir_ / foreign);
  ck::write_checkpoint(dir_, s.view(2), 0);
  for (const char* gone :
       {".tmp.step_00000001", ".tmp.step_00000009", ".tmp.replaced.step_00000001",
        ".tmp.delete.step_00000000", ".tmp.replaced.step_00000005"})
    EXPECT_FALSE(fs::exists(dir_ / gone)) << gone;
  for (const char* foreign : {".tmp.notes", ".tmp.step_12", ".tmp.delete.x", "tmp.step_00000003"})
    EXPECT_TRUE(fs::exists(dir_ / foreign)) << foreign;
  EXPECT_EQ(listed_steps(dir_), (std::vector<std::uint64_t>{2, 5}));
  sample_state back(13);
  auto into = back.view(0);
  ck::load_checkpoint(dir_ / "step_00000005", into);
  EXPECT_TRUE(back.same_as(old));
}

// Another process saving into the same directory right now holds a lock on its temporary folder:
// start-up cleanup (and a save's) must leave it alone, and remove it once that process is dead.
TEST_F(CheckpointTest, ATemporaryOfALiveWriterIsLeftAloneAndRemovedWhenItDies) {
  sample_state s(15);
  fs::create_directories(dir_);
  const fs::path live = dir_ / ".tmp.step_00000007";
  const fs::path dead = dir_ / ".tmp.step_00000006";
  fs::create_directories(dead);  // a crashed writer's: nobody holds it
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t writer = ::fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {  // the other process: only async-signal-safe calls after fork
    ::mkdir(live.c_str(), 0755);
    const int fd = ::open(live.c_str(), O_RDONLY | O_DIRECTORY);
    const bool locked = fd >= 0 && ::flock(fd, LOCK_EX) == 0;
    const char ok = locked ? 'y' : 'n';
    (void)!::write(ready[1], &ok, 1);
    for (;;) ::pause();
  }
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  {
    ck::sync_checkpointer c({.dir = dir_});  // start-up cleanup
    ASSERT_EQ(c.warnings().size(), 1u);
    EXPECT_TRUE(contains(c.warnings()[0], ".tmp.step_00000006")) << c.warnings()[0];
    EXPECT_FALSE(fs::exists(dead));
    EXPECT_TRUE(fs::exists(live));
    c.save(s.view(8));  // the cleanup before a save leaves it too
    EXPECT_TRUE(fs::exists(live));
    // Saving the very step the other process is writing is refused, and its folder kept.
    try {
      c.save(s.view(7));
      ADD_FAILURE() << "a second writer of step 7 was let in";
    } catch (const tk::io_error& e) {
      EXPECT_TRUE(contains(e.what(), "in use by another process")) << e.what();
    }
    EXPECT_TRUE(fs::exists(live));
  }
  ::kill(writer, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(writer, &status, 0), writer);
  ::close(ready[0]);
  ::close(ready[1]);
  // Dead now: the kernel dropped its lock, and the next start-up removes its wreck.
  ck::sync_checkpointer after({.dir = dir_});
  ASSERT_EQ(after.warnings().size(), 1u);
  EXPECT_TRUE(contains(after.warnings()[0], ".tmp.step_00000007")) << after.warnings()[0];
  EXPECT_FALSE(fs::exists(live));
  EXPECT_EQ(listed_steps(dir_), std::vector<std::uint64_t>{8});
}

// Two checkpointers in one process are told apart too (flock is per open file description), and a
// writer's lock lasts exactly while its temporary folder exists.
TEST_F(CheckpointTest, AWritersLockCoversItsTemporaryOnlyWhileItExists) {
  fs::create_directories(dir_ / ".tmp.step_00000003");
  {
    auto held = ck::detail::dir_lock::lock(dir_ / ".tmp.step_00000003");
    EXPECT_FALSE(ck::detail::dir_lock::try_lock(dir_ / ".tmp.step_00000003").has_value());
    EXPECT_TRUE(ck::remove_stale_temporaries(dir_).empty());
    EXPECT_TRUE(held.still_at(dir_ / ".tmp.step_00000003"));
  }
  EXPECT_EQ(ck::remove_stale_temporaries(dir_), std::vector<std::string>{".tmp.step_00000003"});
  // A save's own lock is gone once it returns: nothing it leaves is held.
  sample_state s(16);
  ck::write_checkpoint(dir_, s.view(4), 0);
  EXPECT_TRUE(ck::detail::dir_lock::try_lock(dir_ / "step_00000004").has_value());
}

TEST_F(CheckpointTest, ConstructingACheckpointerRemovesStaleTemporariesWithAWarning) {
  fs::create_directories(dir_ / ".tmp.step_00000004" / "deep");
  write_file(dir_ / ".tmp.step_00000004" / "deep" / "tensors.bin", "partial");
  ck::sync_checkpointer c({.dir = dir_});
  EXPECT_FALSE(fs::exists(dir_ / ".tmp.step_00000004"));
  ASSERT_EQ(c.warnings().size(), 1u);
  EXPECT_TRUE(contains(c.warnings()[0], ".tmp.step_00000004")) << c.warnings()[0];
}

TEST_F(CheckpointTest, AFailedSaveRemovesItsOwnTemporaryDirectory) {
  sample_state s(14);
  ck::write_checkpoint(dir_, s.view(1), 0);
  auto state = s.view(2);
  state.tensors[0].data = nullptr;  // rejected before anything is written
  EXPECT_THROW(ck::write_checkpoint(dir_, state, 0), tk::config_error);
  EXPECT_FALSE(fs::exists(dir_ / ".tmp.step_00000002"));
  // The disk fills up 100 bytes into tensors.bin (the writer's fault seam): the half-written
  // directory must go with the error, leaving step 1 the newest complete checkpoint.
  ck::detail::simulated_disk_space = 100;
  try {
    ck::write_checkpoint(dir_, s.view(3), 0);
    ADD_FAILURE() << "the full disk went unnoticed";
  } catch (const tk::io_error& e) {
    EXPECT_TRUE(contains(e.what(), "No space left")) << e.what();
  }
  ck::detail::simulated_disk_space = -1;
  EXPECT_FALSE(fs::exists(dir_ / ".tmp.step_00000003"));
  EXPECT_EQ(listed_steps(dir_), std::vector<std::uint64_t>{1});
}

// tensors.bin goes out in aligned chunks, with O_DIRECT where the file system takes it: every
// length around the block and chunk sizes must come back byte for byte, at its exact size, in
// both modes (the test's temporary directory is on a disk that takes O_DIRECT on the machines
// CI runs on; where it is not, the direct case checks the fallback instead).
TEST_F(CheckpointTest, ChunkedWriterWritesExactlyTheBytesAppendedDirectOrBuffered) {
  fs::create_directories(dir_);
  std::mt19937 rng(5);
  const std::size_t chunk = 2 * ck::detail::chunked_writer::block;  // small: many chunks
  for (const bool direct : {true, false}) {
    for (const std::size_t n :
         {std::size_t(0), std::size_t(1), std::size_t(4095), std::size_t(4096), std::size_t(4097),
          chunk - 1, chunk, chunk + 1, 5 * chunk + 77}) {
      std::vector<unsigned char> want;
      const fs::path f = dir_ / (direct ? "direct" : "buffered") / std::to_string(n);
      fs::create_directories(f.parent_path());
      ck::detail::chunked_writer w(f, direct, chunk);
      // Bytes and zero runs interleaved, as tensors.bin's data and alignment padding are.
      std::size_t left = n;
      while (left > 0) {
        const std::size_t k = std::min<std::size_t>(left, 1 + rng() % 3000);
        if (rng() % 4 == 0) {
          w.append_zeros(k);
          want.insert(want.end(), k, 0);
        } else {
          std::vector<unsigned char> bytes(k);
          for (auto& b : bytes) b = static_cast<unsigned char>(1 + rng() % 255);
          w.append(bytes.data(), k);
          want.insert(want.end(), bytes.begin(), bytes.end());
        }
        left -= k;
      }
      EXPECT_EQ(w.size(), n);
      if (!direct) {
        EXPECT_EQ(w.mode(), ck::detail::chunked_writer::io_mode::buffered);
      }
      w.finish();
      ASSERT_EQ(fs::file_size(f), n) << f;
      std::ifstream in(f, std::ios::binary);
      std::vector<unsigned char> got(n);
      in.read(reinterpret_cast<char*>(got.data()), std::streamsize(n));
      EXPECT_TRUE(got == want) << f;
    }
  }
}

// A state laid out as tensors.bin's image in one block-aligned buffer (as the asynchronous
// checkpointer stages it) is written straight from that buffer; the file must be byte for byte
// the one written tensor by tensor from separate buffers, and load back the same.
TEST_F(CheckpointTest, AStateLaidOutAsTheFilesImageWritesTheSameFile) {
  sample_state s(21);
  ck::checkpoint_state separate = s.view(1);
  std::vector<float> big(5000);  // ~20 KB: several whole blocks written in place, then a tail
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = float(i) * 0.5f - 7.0f;
  separate.tensors.push_back(tk::make_state_tensor("model.big", std::span(big), {5000}));
  // The same tensors copied into one zeroed, 4096-aligned buffer at tensors.bin's offsets.
  std::vector<std::uint64_t> offsets;
  std::uint64_t end = 0;
  for (const auto& t : separate.tensors) {
    const std::uint64_t at =
        (end + ck::tensor_alignment - 1) / ck::tensor_alignment * ck::tensor_alignment;
    offsets.push_back(at);
    end = at + t.bytes();
  }
  ASSERT_GT(end, 4 * ck::detail::chunked_writer::block);
  const std::size_t block = ck::detail::chunked_writer::block;
  std::unique_ptr<std::byte[]> storage(new std::byte[end + 2 * block]());
  auto* base = reinterpret_cast<std::byte*>(
      (reinterpret_cast<std::uintptr_t>(storage.get()) + block - 1) / block * block);
  ck::checkpoint_state image = separate;
  for (std::size_t i = 0; i < image.tensors.size(); ++i) {
    auto& t = image.tensors[i];
    if (t.bytes() == 0) continue;
    std::memcpy(base + offsets[i], t.data, t.bytes());
    t.data = base + offsets[i];
  }
  ck::write_checkpoint(dir_ / "a", separate, 0);
  ck::write_checkpoint(dir_ / "b", image, 0);
  auto read_all = [](const fs::path& f) {
    std::ifstream in(f, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string a = read_all(dir_ / "a" / ck::step_dir_name(1) / ck::tensors_file_name);
  const std::string b = read_all(dir_ / "b" / ck::step_dir_name(1) / ck::tensors_file_name);
  EXPECT_EQ(a.size(), end);
  EXPECT_TRUE(a == b);
  EXPECT_EQ(read_all(dir_ / "a" / ck::step_dir_name(1) / ck::manifest_file_name),
            read_all(dir_ / "b" / ck::step_dir_name(1) / ck::manifest_file_name));
}

TEST_F(CheckpointTest, ChunkedWriterUsesODirectOnADiskThatTakesIt) {
#if defined(O_DIRECT)
  fs::create_directories(dir_);
  const fs::path probe = dir_ / "probe";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_DIRECT, 0644);
  if (fd < 0) {
    GTEST_SKIP() << "the temporary directory's file system refuses O_DIRECT";
  }
  ::close(fd);
  ck::detail::chunked_writer w(dir_ / "f");
  w.append("abc", 3);
  w.finish();  // the first write happens here: a refused O_DIRECT would have fallen back
  EXPECT_EQ(w.mode(), ck::detail::chunked_writer::io_mode::direct);
  EXPECT_EQ(fs::file_size(dir_ / "f"), 3u);
#else
  GTEST_SKIP() << "no O_DIRECT on this platform";
#endif
}

TEST_F(CheckpointTest, FlippedByteIsACrcErrorAndResumeFallsBack) {
  sample_state older(12), newer(13);
  ck::write_checkpoint(dir_, older.view(100), 0);
  const fs::path bad = ck::write_checkpoint(dir_, newer.view(200), 0);
  const ck::manifest m = ck::read_manifest(bad / "manifest.json");
  const ck::manifest_entry* ids = m.find("data.ids");
  ASSERT_NE(ids, nullptr);
  flip_byte(bad / "tensors.bin", ids->offset + 5);

  sample_state loaded(14);
  const sample_state untouched = loaded;
  auto into = loaded.view(0);
  expect_format_error([&] { ck::load_checkpoint(bad, into); },
                      {"'data.ids'", "CRC", "step_00000200"});
  EXPECT_TRUE(loaded.same_as(untouched)) << "a failed load must not modify the destination";

  ck::sync_checkpointer c({.dir = dir_});
  ASSERT_TRUE(c.load_latest(into));
  EXPECT_EQ(into.step, 100u);
  EXPECT_TRUE(loaded.same_as(older));
  ASSERT_EQ(c.warnings().size(), 1u);
  EXPECT_TRUE(contains(c.warnings()[0], "step_00000200")) << c.warnings()[0];
  EXPECT_TRUE(contains(c.warnings()[0], "data.ids")) << c.warnings()[0];
}

TEST_F(CheckpointTest, CorruptionInAPaddingByteIsHarmlessButInATensorIsNot) {
  // Flip the last byte of each tensor in turn: every one must be caught by its own CRC.
  sample_state s(15);
  const fs::path p = ck::write_checkpoint(dir_, s.view(1), 0);
  const ck::manifest m = ck::read_manifest(p / "manifest.json");
  for (const auto& e : m.tensors) {
    if (e.bytes == 0) continue;
    flip_byte(p / "tensors.bin", e.offset + e.bytes - 1);
    sample_state loaded(16);
    auto into = loaded.view(0);
    expect_format_error([&] { ck::load_checkpoint(p, into); }, {"'" + e.name + "'"});
    flip_byte(p / "tensors.bin", e.offset + e.bytes - 1);  // restore
  }
  sample_state loaded(17);
  auto into = loaded.view(0);
  EXPECT_NO_THROW(ck::load_checkpoint(p, into));
}

TEST_F(CheckpointTest, TruncatedTensorsFile) {
  sample_state s(18);
  const fs::path p = ck::write_checkpoint(dir_, s.view(4), 0);
  fs::resize_file(p / "tensors.bin", fs::file_size(p / "tensors.bin") - 3);
  sample_state loaded(19);
  auto into = loaded.view(0);
  expect_format_error([&] { ck::load_checkpoint(p, into); }, {"truncated", "step_00000004"});
  fs::resize_file(p / "tensors.bin", 0);
  expect_format_error([&] { ck::load_checkpoint(p, into); }, {"truncated"});
  std::vector<std::string> warnings;
  EXPECT_FALSE(ck::load_latest_checkpoint(dir_, into, warnings));
  EXPECT_EQ(warnings.size(), 1u);
}

TEST_F(CheckpointTest, MissingManifest) {
  sample_state s(20);
  const fs::path p = ck::write_checkpoint(dir_, s.view(4), 0);
  fs::remove(p / "manifest.json");
  EXPECT_TRUE(ck::list_checkpoints(dir_).empty());
  auto into = s.view(0);
  expect_format_error([&] { ck::load_checkpoint(p, into); }, {"manifest.json", "step_00000004"});
}

TEST_F(CheckpointTest, MalformedManifestsNameTheManifest) {
  sample_state s(21);
  const fs::path p = ck::write_checkpoint(dir_, s.view(6), 0);
  const fs::path manifest_path = p / "manifest.json";
  const std::string good = ck::manifest_to_json(ck::read_manifest(manifest_path));
  // Edits `good` and gives it a matching checksum, so the field checks behind it are reached.
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    const std::string marker = ",\n  \"manifest_crc32c\": ";
    text.resize(text.rfind(marker));
    return text + marker + std::to_string(tk::crc32c(text.data(), text.size())) + "\n}\n";
  };
  auto edited_without_checksum = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    return text.replace(text.find(from), from.size(), to);
  };
  auto without_checksum = [&] {
    std::string text = good;
    text.resize(text.rfind(",\n  \"manifest_crc32c\""));
    return text + "\n}\n";
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{ not json", "line"},
      {"", "line 1"},
      {"[1, 2]", "missing \"format\""},
      {replaced("trainkit-checkpoint", "other-format"), "other-format"},
      {replaced("\"version\": 2", "\"version\": 3"), "version 3"},
      {replaced("\"version\": 2", "\"version\": 0"), "version 0"},
      {edited_without_checksum("\"offset\": 0", "\"offset\": 64"), "checksum mismatch"},
      {edited_without_checksum("\"data.ids\"", "\"data.idz\""), "checksum mismatch"},
      {without_checksum(), "no \"manifest_crc32c\""},
      {good + " ", "must be the last member"},
      {replaced("\"step\": 6", "\"step\": -6"), "\"step\""},
      {replaced("\"step\": 6", "\"step\": \"6\""), "\"step\" must be an unsigned integer"},
      {replaced("\"step\": 6", "\"step\": 1e999"), "number overflow"},
      {replaced("\"step\": 6", "\"step\": 7"), "says step 7"},
      {replaced("\"tensors\"", "\"tensor_list\""), "missing \"tensors\""},
      {replaced("\"dtype\": \"f32\"", "\"dtype\": \"f17\""), "f17"},
      {replaced("\"offset\": 0", "\"offset\": \"zero\""), "'zero'"},
      {replaced("\"offset\": 0", "\"offset\": 8"), "not a multiple of 64"},
      {replaced("\"bytes\": 60", "\"bytes\": 64"), "do not match shape"},
      {replaced("\"shape\": [3, 5]", "\"shape\": {\"a\": 3}"), "must be an array"},
      {replaced("\"name\": \"data.ids\"", "\"name\": \"optim.step\""), "appears twice"},
  };
  for (const auto& [text, needle] : cases) {
    write_file(manifest_path, text);
    auto into = s.view(0);
    SCOPED_TRACE(text.substr(0, 60));
    expect_format_error([&] { ck::load_checkpoint(p, into); }, {manifest_path.string(), needle});
  }
}

TEST_F(CheckpointTest, DtypeShapeAndMissingTensorMismatches) {
  sample_state s(22);
  const fs::path p = ck::write_checkpoint(dir_, s.view(8), 0);
  {
    auto into = s.view(0);
    into.tensors[0].shape = {5, 3};
    expect_format_error([&] { ck::load_checkpoint(p, into); },
                        {"'model.weights'", "[3, 5]", "[5, 3]", "step_00000008"});
  }
  {
    std::vector<std::int32_t> as_int(15);
    auto into = s.view(0);
    into.tensors[0] = tk::make_state_tensor("model.weights", std::span(as_int), {3, 5});
    expect_format_error([&] { ck::load_checkpoint(p, into); }, {"'model.weights'", "f32", "i32"});
  }
  {
    std::vector<float> extra(2);
    auto into = s.view(0);
    into.tensors.push_back(tk::make_state_tensor("model.missing", std::span(extra), {2}));
    expect_format_error([&] { ck::load_checkpoint(p, into); }, {"'model.missing'"});
    EXPECT_THROW(ck::load_checkpoint(p, into), ck::checkpoint_mismatch);
  }
  {  // Resuming into another configuration stops: older checkpoints would not fit either, and
     // falling back to a fresh start would hide the mistake.
    ck::write_checkpoint(dir_, s.view(4), 0);
    auto into = s.view(0);
    into.tensors[0].shape = {15};
    ck::sync_checkpointer c({.dir = dir_});
    EXPECT_THROW(c.load_latest(into), ck::checkpoint_mismatch);
  }
  {  // Loading a subset is fine: the trainer may ask only for the model.
    sample_state loaded(23);
    auto into = loaded.view(0);
    into.tensors.resize(1);
    ck::load_checkpoint(p, into);
    EXPECT_EQ(loaded.weights, s.weights);
  }
}

TEST_F(CheckpointTest, NoValidCheckpointReturnsFalseAndLeavesStateAlone) {
  sample_state a(24), b(25);
  for (std::uint64_t step : {1u, 2u}) {
    const fs::path p = ck::write_checkpoint(dir_, (step == 1 ? a : b).view(step), 0);
    flip_byte(p / "tensors.bin", 1);
  }
  sample_state loaded(26);
  const sample_state before = loaded;
  ck::sync_checkpointer c({.dir = dir_});
  auto into = loaded.view(77);
  EXPECT_FALSE(c.load_latest(into));
  EXPECT_EQ(c.warnings().size(), 2u);
  EXPECT_TRUE(loaded.same_as(before));
  EXPECT_EQ(into.step, 77u);

  ck::sync_checkpointer empty({.dir = root_ / "does-not-exist"});
  EXPECT_FALSE(empty.load_latest(into));
  EXPECT_TRUE(empty.warnings().empty());
}

// Version 1 manifests (before the manifest checksum) still load: their tensors carry CRCs.
TEST_F(CheckpointTest, VersionOneManifestWithoutChecksumStillLoads) {
  sample_state s(22), into_buffers(23);
  const fs::path p = ck::write_checkpoint(dir_, s.view(6), 0);
  std::string text = ck::detail::read_text_file(p / "manifest.json");
  text.resize(text.rfind(",\n  \"manifest_crc32c\""));
  text.replace(text.find("\"version\": 2"), 12, "\"version\": 1");
  write_file(p / "manifest.json", text + "\n}\n");
  EXPECT_EQ(ck::read_manifest(p / "manifest.json").version, 1);
  auto into = into_buffers.view(0);
  ck::load_checkpoint(p, into);
  EXPECT_TRUE(into_buffers.same_as(s));
}

TEST_F(CheckpointTest, UnwritableDirectoryIsAnIoErrorNamingThePath) {
  // Root ignores permission bits, so use a path that runs through a regular file.
  write_file(root_ / "file", "x");
  const fs::path impossible = root_ / "file" / "sub";
  sample_state s(27);
  try {
    ck::write_checkpoint(impossible, s.view(1), 0);
    ADD_FAILURE() << "no io_error";
  } catch (const tk::io_error& e) {
    EXPECT_TRUE(contains(e.what(), impossible.string())) << e.what();
    EXPECT_TRUE(contains(e.what(), "Not a directory")) << e.what();
  }
  // The checkpointer says so when it is made, before any training step.
  try {
    ck::sync_checkpointer c({.dir = impossible});
    ADD_FAILURE() << "an unwritable directory was accepted";
  } catch (const tk::io_error& e) {
    EXPECT_TRUE(contains(e.what(), impossible.string())) << e.what();
  }
  EXPECT_THROW(ck::check_checkpoint_dir_writable("/proc/trainkit_no_such_ckpt"), tk::io_error);
  EXPECT_NO_THROW(ck::check_checkpoint_dir_writable(root_ / "not" / "yet" / "made"));
  EXPECT_FALSE(fs::exists(root_ / "not")) << "the check creates nothing";
  for (const auto& e : fs::directory_iterator(root_))
    EXPECT_FALSE(contains(e.path().filename().string(), "probe")) << e.path();
  EXPECT_THROW(ck::list_checkpoints(root_ / "file"), tk::io_error);
}

TEST_F(CheckpointTest, DeviceTensorsAndBadConfigsAreConfigErrors) {
  sample_state s(28);
  auto state = s.view(1);
  state.tensors[2].on_device = true;
  try {
    ck::write_checkpoint(dir_, state, 0);
    ADD_FAILURE() << "device tensor accepted";
  } catch (const tk::config_error& e) {
    EXPECT_TRUE(contains(e.what(), "CUDA checkpointer")) << e.what();
    EXPECT_TRUE(contains(e.what(), "data.ids")) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir_ / "step_00000001"));
  ck::sync_checkpointer c({.dir = dir_});
  EXPECT_THROW(c.load_latest(state), tk::config_error);

  auto dup = s.view(1);
  dup.tensors[1].name = dup.tensors[0].name;
  EXPECT_THROW(ck::write_checkpoint(dir_, dup, 0), tk::config_error);
  EXPECT_THROW(ck::write_checkpoint(dir_, s.view(1), -1), tk::config_error);
  EXPECT_THROW(ck::sync_checkpointer({.dir = ""}), tk::config_error);
  EXPECT_THROW(ck::sync_checkpointer({.dir = dir_, .keep_last = -2}), tk::config_error);
}

TEST(NoCheckpoint, SavesNothingAndNeverResumes) {
  ck::no_checkpoint c;
  std::vector<float> v(3, 1.0f);
  ck::checkpoint_state s{
      .step = 5, .tensors = {tk::make_state_tensor("x", std::span(v), {3})}, .meta = {}};
  c.save(s);
  c.wait();
  EXPECT_FALSE(c.load_latest(s));
  EXPECT_EQ(c.last_stall_ms(), 0.0);
  EXPECT_EQ(s.step, 5u);
}

TEST_F(CheckpointTest, OptimizerAndModelResumeBitIdenticallyThroughACheckpoint) {
  using model_t = trainkit_test::quadratic_model<>;
  const tk::optim::adamw_config cfg{};
  auto run_steps = [](model_t& m, tk::optim::adamw_cpu& o, int from, int to) {
    for (int s = from; s < to; ++s) {
      m.zero_grad();
      m.forward_backward({}, 1.0f);
      tk::optim::clip_then_update<tk::host_memory>(1.0)(o, m, 1e-2f * float(s + 1));
    }
  };
  auto gather = [](model_t& m, tk::optim::adamw_cpu& o, std::uint64_t step) {
    ck::checkpoint_state st{.step = step, .tensors = m.state(), .meta = {}};
    for (auto& t : o.state()) st.tensors.push_back(t);
    return st;
  };

  model_t straight(31), resumed(31);
  tk::optim::adamw_cpu opt_straight(straight, cfg);
  run_steps(straight, opt_straight, 0, 8);
  {
    tk::optim::adamw_cpu opt(resumed, cfg);
    run_steps(resumed, opt, 0, 4);
    ck::sync_checkpointer c({.dir = dir_, .keep_last = 1});
    c.save(gather(resumed, opt, 4));
  }
  model_t fresh(31);  // a new process: parameters scrambled, moments zero
  std::fill(fresh.parameters().begin(), fresh.parameters().end(), 0.5f);
  tk::optim::adamw_cpu opt(fresh, cfg);
  ck::sync_checkpointer c({.dir = dir_});
  auto st = gather(fresh, opt, 0);
  ASSERT_TRUE(c.load_latest(st));
  EXPECT_EQ(st.step, 4u);
  EXPECT_EQ(opt.steps_taken(), 4u);
  run_steps(fresh, opt, 4, 8);
  EXPECT_EQ(std::memcmp(fresh.parameters().data(), straight.parameters().data(),
                        straight.parameters().size_bytes()),
            0);
}
