// Tests for trainkit/model/gpt2/llmc_file.hpp: fp32 and bf16 round trips, a file written byte by byte
// here (so the layout order is checked against the format, not against our own writer), and the
// errors bad files must give.
#include "trainkit/model/gpt2/llmc_file.hpp"  // first: the header compiles on its own

// .cu units (gpt_fineweb's CUDA driver, the golden GPU test) include gpt2/llmc_file.hpp: no Eigen.
#ifdef EIGEN_WORLD_VERSION
#error "trainkit/model/gpt2/llmc_file.hpp must not include Eigen"
#endif

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "trainkit/model/gpt2/cpu.hpp"

namespace tk = trainkit;
namespace fs = std::filesystem;
using tk::model::gpt2_config;

namespace {

gpt2_config tiny_config() {
  gpt2_config c;
  c.max_seq_len = 8;
  c.vocab_size = 37;
  c.padded_vocab_size = 128;
  c.num_layers = 2;
  c.num_heads = 2;
  c.channels = 8;
  return c;
}

class LlmcFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("trainkit_llmc_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path path(const std::string& name) const { return dir_ / name; }
  fs::path dir_;
};

void write_raw(const fs::path& p, const std::vector<std::int32_t>& header, const void* data,
               std::size_t bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), std::streamsize(header.size() * 4));
  out.write(static_cast<const char*>(data), std::streamsize(bytes));
}

std::vector<std::int32_t> header_for(const gpt2_config& c, int version) {
  std::vector<std::int32_t> h(256, 0);
  h[0] = 20240326;
  h[1] = version;
  h[2] = c.max_seq_len;
  h[3] = c.vocab_size;
  h[4] = c.num_layers;
  h[5] = c.num_heads;
  h[6] = c.channels;
  h[7] = c.padded_vocab_size;
  return h;
}

// Expects a format_error whose message names the file and contains `needle`.
template <class F>
void expect_format_error(F&& f, const fs::path& file, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no exception for " << file;
  } catch (const tk::format_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(file.string()), std::string::npos) << m;
    EXPECT_NE(m.find(needle), std::string::npos) << m;
  }
}

}  // namespace

TEST_F(LlmcFile, Fp32RoundTripIsBitIdentical) {
  tk::model::gpt2_cpu m(tiny_config(), 3);
  // Non-trivial values everywhere, padded rows included, so every byte is exercised.
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (float& p : m.parameters()) p = n(rng);
  tk::model::save_llmc_model(path("m.bin"), m);
  EXPECT_FALSE(fs::exists(path("m.bin.tmp")));
  EXPECT_EQ(fs::file_size(path("m.bin")), 1024 + m.parameters().size_bytes());
  EXPECT_EQ(tk::model::read_llmc_header(path("m.bin")), tiny_config());
  const auto loaded = tk::model::load_llmc_gpt2_cpu(path("m.bin"));
  EXPECT_EQ(loaded.config(), m.config());
  ASSERT_EQ(loaded.parameters().size(), m.parameters().size());
  EXPECT_EQ(
      std::memcmp(loaded.parameters().data(), m.parameters().data(), m.parameters().size_bytes()),
      0);
}

TEST_F(LlmcFile, Bf16RoundTripRoundsEachValueOnce) {
  tk::model::gpt2_cpu m(tiny_config(), 3);
  std::mt19937 rng(2);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (float& p : m.parameters()) p = n(rng);
  tk::model::save_llmc_model(path("m5.bin"), m, 5);
  EXPECT_EQ(fs::file_size(path("m5.bin")), 1024 + 2 * m.parameters().size());
  EXPECT_EQ(tk::model::read_llmc_file_header(path("m5.bin")).version, 5);
  tk::model::gpt2_cpu back(tiny_config(), tk::model::zero_parameters);
  tk::model::load_llmc_model(path("m5.bin"), back);
  std::size_t rounded = 0;
  for (std::size_t i = 0; i < m.parameters().size(); ++i) {
    const float x = m.parameters()[i], y = back.parameters()[i];
    // bf16 keeps 8 significant bits: round-to-nearest is off by at most 2^-8 relative.
    ASSERT_LE(std::abs(x - y), std::ldexp(std::abs(x), -8)) << i;
    // ... and the low 16 bits of the fp32 pattern are gone.
    std::uint32_t bits;
    std::memcpy(&bits, &y, 4);
    ASSERT_EQ(bits & 0xffffu, 0u) << i;
    rounded += x != y;
  }
  EXPECT_GT(rounded, m.parameters().size() / 2) << "random floats almost never fit in bf16";
  // Loading into a double model gives the same values.
  const auto as_double = tk::model::load_llmc_gpt2_cpu<double>(path("m5.bin"));
  for (std::size_t i = 0; i < m.parameters().size(); ++i)
    ASSERT_EQ(as_double.parameters()[i], double(back.parameters()[i]));
}

TEST_F(LlmcFile, HandWrittenFileLandsInTheRightTensors) {
  // Independent writer: each tensor filled with (tensor number + 1) * 1000 + element index,
  // tensors in the order llm.c's train_gpt2.py writes them.
  const gpt2_config c = tiny_config();
  const int V = c.padded_vocab_size, T = c.max_seq_len, L = c.num_layers, C = c.channels;
  const std::vector<std::pair<std::string, std::size_t>> order{
      {"wte", std::size_t(V) * C},
      {"wpe", std::size_t(T) * C},
      {"ln1w", std::size_t(L) * C},
      {"ln1b", std::size_t(L) * C},
      {"qkvw", std::size_t(L) * 3 * C * C},
      {"qkvb", std::size_t(L) * 3 * C},
      {"attprojw", std::size_t(L) * C * C},
      {"attprojb", std::size_t(L) * C},
      {"ln2w", std::size_t(L) * C},
      {"ln2b", std::size_t(L) * C},
      {"fcw", std::size_t(L) * 4 * C * C},
      {"fcb", std::size_t(L) * 4 * C},
      {"fcprojw", std::size_t(L) * 4 * C * C},
      {"fcprojb", std::size_t(L) * C},
      {"lnfw", std::size_t(C)},
      {"lnfb", std::size_t(C)}};
  std::vector<float> values;
  for (std::size_t k = 0; k < order.size(); ++k)
    for (std::size_t i = 0; i < order[k].second; ++i) values.push_back(float((k + 1) * 1000 + i));
  write_raw(path("hand.bin"), header_for(c, 3), values.data(), values.size() * 4);

  const auto m = tk::model::load_llmc_gpt2_cpu(path("hand.bin"));
  ASSERT_EQ(m.parameter_layout().size(), order.size());
  for (std::size_t k = 0; k < order.size(); ++k) {
    const auto& t = m.parameter_layout()[k];
    ASSERT_EQ(t.name, order[k].first);
    ASSERT_EQ(t.numel(), order[k].second);
    EXPECT_EQ(m.parameters()[t.offset], float((k + 1) * 1000)) << t.name;
    EXPECT_EQ(m.parameters()[t.offset + t.numel() - 1], float((k + 1) * 1000 + t.numel() - 1))
        << t.name;
  }
  // The same file in bf16 (version 5): each value is its bf16 rounding, still in order.
  std::vector<std::uint16_t> halves;
  for (float v : values) halves.push_back(tk::bf16::from_float(v).bits);
  write_raw(path("hand5.bin"), header_for(c, 5), halves.data(), halves.size() * 2);
  const auto m5 = tk::model::load_llmc_gpt2_cpu(path("hand5.bin"));
  for (std::size_t i = 0; i < values.size(); ++i)
    ASSERT_EQ(m5.parameters()[i], tk::bf16::from_bits(halves[i]).to_float()) << i;
}

TEST_F(LlmcFile, BadFilesNameTheFileAndTheProblem) {
  using tk::model::read_llmc_header;
  const gpt2_config c = tiny_config();
  std::vector<float> params(c.num_parameters(), 0.5f);

  expect_format_error([&] { read_llmc_header(path("missing.bin")); }, path("missing.bin"),
                      "does not exist");

  auto h = header_for(c, 3);
  h[0] = 20240520;  // a token shard's magic
  write_raw(path("shard.bin"), h, params.data(), params.size() * 4);
  expect_format_error([&] { read_llmc_header(path("shard.bin")); }, path("shard.bin"), "magic");

  h = header_for(c, 2);  // pre-padding llm.c format
  write_raw(path("v2.bin"), h, params.data(), params.size() * 4);
  expect_format_error([&] { read_llmc_header(path("v2.bin")); }, path("v2.bin"), "version 2");

  h = header_for(c, 4);
  write_raw(path("v4.bin"), h, params.data(), params.size() * 4);
  expect_format_error([&] { read_llmc_header(path("v4.bin")); }, path("v4.bin"), "version 4");

  write_raw(path("short.bin"), header_for(c, 3), params.data(), params.size() * 4 - 4);
  expect_format_error([&] { tk::model::load_llmc_gpt2_cpu(path("short.bin")); }, path("short.bin"),
                      std::to_string(1024 + params.size() * 4));

  // A valid file, but bf16-sized data behind an fp32 header.
  write_raw(path("mixed.bin"), header_for(c, 3), params.data(), params.size() * 2);
  expect_format_error([&] { tk::model::load_llmc_gpt2_cpu(path("mixed.bin")); }, path("mixed.bin"),
                      "bytes");

  h = header_for(c, 3);
  h[6] = 9;  // channels not divisible by heads
  write_raw(path("shape.bin"), h, params.data(), params.size() * 4);
  expect_format_error([&] { read_llmc_header(path("shape.bin")); }, path("shape.bin"), "channels");

  {
    std::ofstream out(path("tiny.bin"), std::ios::binary);
    out << "llm.c";
  }
  expect_format_error([&] { read_llmc_header(path("tiny.bin")); }, path("tiny.bin"), "header");

  // A good file for another shape refuses to load into this model.
  gpt2_config other = c;
  other.num_layers = 1;
  tk::model::gpt2_cpu small(other, 1);
  tk::model::save_llmc_model(path("other.bin"), small);
  tk::model::gpt2_cpu m(c, 1);
  expect_format_error([&] { tk::model::load_llmc_model(path("other.bin"), m); }, path("other.bin"),
                      "L=1");

  EXPECT_THROW(tk::model::save_llmc_model(path("x.bin"), m, 4), tk::config_error);
}
