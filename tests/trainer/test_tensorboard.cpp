// Tests for the TensorBoard event writer: TFRecord framing and masked CRCs, the hand-encoded Event
// protobuf (decoded here independently), and the trainer writing one Event per step.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <trainkit/trainer/sinks/tensorboard.hpp>
#include <trainkit/trainer/tensorboard.hpp>
#include <trainkit/trainkit.hpp>

namespace tk = trainkit;
namespace fs = std::filesystem;

namespace {

struct temp_dir {
  fs::path path;
  temp_dir() {
    static int counter = 0;
    path = fs::temp_directory_path() /
           ("trainkit-tb-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
};

/// A decoded Event: only the fields the writer produces.
struct event {
  double wall_time = 0;
  std::int64_t step = 0;
  std::string file_version;
  std::map<std::string, float> values;
};

/// Minimal protobuf reader, written from the wire-format spec rather than from the writer.
struct pb_reader {
  const std::string& b;
  std::size_t i = 0;
  bool done() const { return i >= b.size(); }
  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (i >= b.size()) throw std::runtime_error("truncated varint");
      const auto c = std::uint8_t(b[i++]);
      v |= std::uint64_t(c & 0x7f) << shift;
      if (!(c & 0x80)) return v;
    }
  }
  std::string bytes() {
    const auto n = varint();
    if (i + n > b.size()) throw std::runtime_error("truncated bytes");
    std::string s = b.substr(i, n);
    i += n;
    return s;
  }
  template <class T>
  T fixed() {
    T v;
    if (i + sizeof v > b.size()) throw std::runtime_error("truncated fixed");
    std::memcpy(&v, b.data() + i, sizeof v);
    i += sizeof v;
    return v;
  }
};

event decode_event(const std::string& data) {
  event e;
  pb_reader r{data};
  while (!r.done()) {
    const auto key = r.varint();
    const auto field = key >> 3, wire = key & 7;
    if (field == 1 && wire == 1) {
      e.wall_time = r.fixed<double>();
    } else if (field == 2 && wire == 0) {
      e.step = std::int64_t(r.varint());
    } else if (field == 3 && wire == 2) {
      e.file_version = r.bytes();
    } else if (field == 5 && wire == 2) {
      const std::string summary = r.bytes();
      pb_reader s{summary};
      while (!s.done()) {
        const auto skey = s.varint();
        EXPECT_EQ(skey, (1u << 3) | 2u) << "Summary.value";
        const std::string value = s.bytes();
        pb_reader v{value};
        std::string tag;
        float x = NAN;
        while (!v.done()) {
          const auto vkey = v.varint();
          if (vkey == ((1u << 3) | 2u))
            tag = v.bytes();
          else if (vkey == ((2u << 3) | 5u))
            x = v.fixed<float>();
          else
            ADD_FAILURE() << "unexpected Summary.Value key " << vkey;
        }
        e.values[tag] = x;
      }
    } else {
      ADD_FAILURE() << "unexpected Event field " << field << " wire type " << wire;
      break;
    }
  }
  return e;
}

std::uint32_t masked(const void* p, std::size_t n) {
  const std::uint32_t c = tk::crc32c(p, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/// Splits a TFRecord file, checking both CRCs of every record.
std::vector<std::string> read_records(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string all{std::istreambuf_iterator<char>(in), {}};
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < all.size()) {
    EXPECT_GE(all.size() - i, 16u) << "truncated record header";
    std::uint64_t len;
    std::uint32_t len_crc, data_crc;
    std::memcpy(&len, all.data() + i, 8);
    std::memcpy(&len_crc, all.data() + i + 8, 4);
    EXPECT_EQ(len_crc, masked(all.data() + i, 8)) << "length CRC of record " << out.size();
    EXPECT_LE(i + 12 + len + 4, all.size());
    std::string data = all.substr(i + 12, len);
    std::memcpy(&data_crc, all.data() + i + 12 + len, 4);
    EXPECT_EQ(data_crc, masked(data.data(), data.size())) << "data CRC of record " << out.size();
    out.push_back(std::move(data));
    i += 12 + len + 4;
  }
  return out;
}

fs::path only_event_file(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  EXPECT_EQ(files.size(), 1u);
  return files.empty() ? fs::path{} : files.front();
}

}  // namespace

TEST(TensorBoard, MaskedCrcMatchesTensorFlowsDefinition) {
  // The mask of CRC-32C("123456789") = 0xe3069283, computed by hand from TF's formula.
  const std::uint32_t crc = 0xe3069283u;
  const std::uint32_t expect = ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
  EXPECT_EQ(tk::detail::masked_crc32c("123456789", 9), expect);
}

TEST(TensorBoard, EventEncodingKnownBytes) {
  // step 300 is varint 0xac 0x02; simple_value 1.5f is 0x3fc00000 little-endian.
  const std::string ev = tk::encode_tensorboard_event(0.0, 300, {}, {{"a", 1.5f}});
  const std::string expect = std::string("\x09\0\0\0\0\0\0\0\0", 9) + "\x10\xac\x02" + "\x2a\x0a" +
                             "\x0a\x08" + "\x0a\x01" + "a" + "\x15" +
                             std::string("\0\0\xc0\x3f", 4);
  EXPECT_EQ(ev, expect);
}

TEST(TensorBoard, WriterFramesRecordsAndStartsWithFileVersion) {
  temp_dir dir;
  fs::path file;
  {
    tk::tensorboard_writer w(dir.path / "tb");
    file = w.path();
    w.write_scalars(1, {{"train/loss", 5.25f}, {"perf/mfu", 0.125f}});
    w.write_scalars(2, {{"train/loss", 4.5f}});
    w.write_scalars(3, {});  // nothing to write: no record
  }
  EXPECT_EQ(file.filename().string().rfind("events.out.tfevents.", 0), 0u) << file;
  const auto records = read_records(file);
  ASSERT_EQ(records.size(), 3u);
  const auto e0 = decode_event(records[0]);
  EXPECT_EQ(e0.file_version, "brain.Event:2");
  EXPECT_GT(e0.wall_time, 1.6e9);  // seconds since the epoch, not milliseconds or zero
  const auto e1 = decode_event(records[1]);
  EXPECT_EQ(e1.step, 1);
  EXPECT_EQ(e1.values.size(), 2u);
  EXPECT_FLOAT_EQ(e1.values.at("train/loss"), 5.25f);
  EXPECT_FLOAT_EQ(e1.values.at("perf/mfu"), 0.125f);
  EXPECT_GE(e1.wall_time, e0.wall_time);
  const auto e2 = decode_event(records[2]);
  EXPECT_EQ(e2.step, 2);
  EXPECT_FLOAT_EQ(e2.values.at("train/loss"), 4.5f);
}

TEST(TensorBoard, TwoWritersInOneDirectoryGetDistinctFiles) {
  temp_dir dir;
  tk::tensorboard_writer a(dir.path), b(dir.path);
  EXPECT_NE(a.path(), b.path());
}

TEST(TensorBoard, UnwritableDirectoryIsAnIoError) {
  temp_dir dir;
  std::ofstream(dir.path / "file") << "x";
  EXPECT_THROW(tk::tensorboard_writer(dir.path / "file" / "tb"), tk::io_error);
}

TEST(TensorBoard, SinkLeavesOutUnknownValues) {
  tk::step_metrics m;
  m.step = 4;
  m.loss = 3.0;
  m.mfu = NAN;
  const auto v = tk::tensorboard_sink::scalars(m);
  std::map<std::string, float> by_tag;
  for (const auto& s : v) by_tag[s.tag] = s.value;
  EXPECT_TRUE(by_tag.contains("train/loss"));
  EXPECT_TRUE(by_tag.contains("phase/compute_ms"));
  EXPECT_FALSE(by_tag.contains("perf/mfu"));
  EXPECT_FALSE(by_tag.contains("val/loss"));
}

TEST(TensorBoard, TrainerWritesOneEventPerStep) {
  temp_dir dir;
  tk::trainer_config cfg;
  cfg.steps = 5;
  cfg.output.console.quiet = true;
  cfg.eval_every = 2;
  cfg.eval_batches = 2;
  cfg.output.tensorboard_dir = dir.path / "tb";
  auto source = [] {
    return tk::data::synthetic_source({.batch_size = 2,
                                       .seq_len = 8,
                                       .vocab_size = 100,
                                       .alphabet = 16,
                                       .branching = 2,
                                       .seed = 3});
  };
  tk::trainer<tk::data::synthetic_source, tk::prefetch::synchronous, tk::model::gpt2_cpu,
              tk::optim::adamw_cpu, tk::checkpoint::no_checkpoint>
      t(cfg, source(), source(),
        tk::model::gpt2_cpu({.max_seq_len = 8,
                             .vocab_size = 100,
                             .padded_vocab_size = 128,
                             .num_layers = 1,
                             .num_heads = 2,
                             .channels = 16},
                            1),
        tk::optim::adamw_config{}, tk::checkpoint::no_checkpoint{});
  const auto r = t.run();
  const auto records = read_records(only_event_file(cfg.output.tensorboard_dir));
  ASSERT_EQ(records.size(), 1 + r.steps.size());
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    const auto e = decode_event(records[i + 1]);
    const auto& m = r.steps[i];
    EXPECT_EQ(std::uint64_t(e.step), m.step);
    EXPECT_FLOAT_EQ(e.values.at("train/loss"), float(m.loss));
    EXPECT_FLOAT_EQ(e.values.at("train/lr"), float(m.lr));
    EXPECT_FLOAT_EQ(e.values.at("phase/compute_ms"), float(m.compute_ms));
    EXPECT_FLOAT_EQ(e.values.at("perf/tok_per_s"), float(m.tok_per_s));
    EXPECT_TRUE(e.values.contains("perf/mfu"));  // "cpu" is in the peak table
    EXPECT_EQ(e.values.contains("val/loss"), m.step % 2 == 0 || m.step == 5) << m.step;
  }
}
