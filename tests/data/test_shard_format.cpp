// Tests for trainkit/data/shard_format.hpp: the llm.c header layout, headerless nanoGPT files
// (only when asked for),
// atomic writes, and that every malformed file is rejected with the right exception type and a
// message naming the file and the reason.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "shard_fixture.hpp"
#include "trainkit/data/shard_format.hpp"

namespace tk = trainkit;
namespace td = trainkit::data;
using trainkit_test::temp_dir_test;

namespace {

std::vector<std::uint16_t> random_tokens(std::size_t n, std::uint32_t seed, int vocab = 50257) {
  std::mt19937 rng(seed);
  std::vector<std::uint16_t> t(n);
  for (auto& x : t) x = static_cast<std::uint16_t>(rng() % vocab);
  return t;
}

std::vector<char> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Runs `f`, expects exception type E, and checks every `needle` is in its message.
template <class E, class F>
void expect_error(F&& f, std::initializer_list<std::string> needles) {
  try {
    f();
    ADD_FAILURE() << "no exception thrown";
  } catch (const E& e) {
    const std::string what = e.what();
    for (const auto& n : needles) EXPECT_NE(what.find(n), std::string::npos) << what << " / " << n;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

}  // namespace

using ShardFormat = temp_dir_test;

TEST_F(ShardFormat, WrittenFileHasTheLlmcLayout) {
  const auto tokens = random_tokens(1234, 1);
  const std::string p = path("s.bin");
  td::write_shard(p, tokens);
  const std::vector<char> bytes = slurp(p);
  ASSERT_EQ(bytes.size(), 1024u + 2 * tokens.size());
  std::int32_t header[256];
  std::memcpy(header, bytes.data(), 1024);
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], 1234);
  for (int i = 3; i < 256; ++i) EXPECT_EQ(header[i], 0) << i;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    std::uint16_t t;
    std::memcpy(&t, bytes.data() + 1024 + 2 * i, 2);
    ASSERT_EQ(t, tokens[i]) << i;
  }
  EXPECT_FALSE(std::filesystem::exists(p + ".tmp"));
}

TEST_F(ShardFormat, RoundTripAndHeader) {
  const auto tokens = random_tokens(5000, 2);
  const std::string p = path("s.bin");
  td::write_shard(p, tokens);
  EXPECT_EQ(td::read_shard(p), tokens);
  const td::shard_header h = td::read_shard_header(p);
  EXPECT_TRUE(h.has_header);
  EXPECT_EQ(h.version, 1);
  EXPECT_EQ(h.token_count, 5000u);
  EXPECT_EQ(h.data_offset, 1024u);
}

TEST_F(ShardFormat, RewriteReplacesTheWholeFile) {
  const std::string p = path("s.bin");
  td::write_shard(p, random_tokens(3000, 3));
  const auto shorter = random_tokens(10, 4);
  td::write_shard(p, shorter);
  EXPECT_EQ(td::read_shard(p), shorter);
  EXPECT_EQ(std::filesystem::file_size(p), 1024u + 20u);
}

TEST_F(ShardFormat, EmptyShardIsValid) {
  const std::string p = path("empty.bin");
  td::write_shard(p, {});
  EXPECT_TRUE(td::read_shard(p).empty());
  EXPECT_TRUE(td::read_shard_header(p).has_header);
}

TEST_F(ShardFormat, HeaderlessNanoGptFileWhenAskedFor) {
  const auto tokens = random_tokens(777, 5);
  const std::string p = write_bytes("nanogpt.bin", tokens.data(), tokens.size() * 2);
  const td::shard_header h = td::read_shard_header(p, td::shard_layout::headerless_uint16);
  EXPECT_FALSE(h.has_header);
  EXPECT_EQ(h.token_count, 777u);
  EXPECT_EQ(h.data_offset, 0u);
  EXPECT_EQ(td::read_shard(p, 65536, td::shard_layout::headerless_uint16), tokens);
}

TEST_F(ShardFormat, HeaderlessFileOfOneToken) {
  const std::uint16_t t = 42;
  const std::string p = write_bytes("one.bin", &t, 2);
  EXPECT_EQ(td::read_shard(p, 65536, td::shard_layout::headerless_uint16),
            std::vector<std::uint16_t>{42});
}

// The guess this replaced read any file without the magic as tokens: a foreign or headerless
// file read as llm.c must be refused, naming the file and the int32 found.
TEST_F(ShardFormat, FileWithoutMagicIsNotGuessedHeaderless) {
  const auto tokens = random_tokens(777, 5);
  const std::string p = write_bytes("nanogpt.bin", tokens.data(), tokens.size() * 2);
  std::int32_t first;
  std::memcpy(&first, tokens.data(), 4);
  expect_error<td::shard_magic_error>(
      [&] { td::read_shard(p); },
      {p, "not an llm.c token shard", std::to_string(first), "20240520", "headerless_uint16"});
}

TEST_F(ShardFormat, HeaderedShardOpenedAsHeaderlessIsRefused) {
  const std::string p = path("s.bin");
  td::write_shard(p, random_tokens(10, 9));
  expect_error<tk::format_error>(
      [&] { td::read_shard(p, 65536, td::shard_layout::headerless_uint16); },
      {p, "shard magic", "open it as llmc"});
}

TEST_F(ShardFormat, ParseShardLayoutNamesTheBadValue) {
  EXPECT_EQ(td::parse_shard_layout("llmc"), td::shard_layout::llmc);
  EXPECT_EQ(td::parse_shard_layout("headerless_uint16"), td::shard_layout::headerless_uint16);
  expect_error<tk::config_error>([] { td::parse_shard_layout("raw"); }, {"'raw'"});
}

TEST_F(ShardFormat, MissingFileIsIoError) {
  const std::string p = path("nope.bin");
  expect_error<tk::io_error>([&] { td::read_shard(p); }, {p});
}

TEST_F(ShardFormat, WrongVersion) {
  const std::string p = write_raw_shard("v2.bin", {20240520, 2, 3}, {1, 2, 3});
  expect_error<tk::format_error>([&] { td::read_shard(p); }, {p, "version 2", "expected 1"});
}

TEST_F(ShardFormat, CountLargerThanFile) {
  const std::string p = write_raw_shard("short.bin", {20240520, 1, 10}, {1, 2, 3});
  expect_error<tk::format_error>([&] { td::read_shard(p); }, {p, "10 tokens", "only 3"});
}

TEST_F(ShardFormat, TrailingBytes) {
  const std::string p = write_raw_shard("long.bin", {20240520, 1, 2}, {1, 2, 3});
  expect_error<tk::format_error>([&] { td::read_shard(p); }, {p, "2 trailing bytes"});
}

TEST_F(ShardFormat, NegativeCount) {
  const std::string p = write_raw_shard("neg.bin", {20240520, 1, -1}, {});
  expect_error<tk::format_error>([&] { td::read_shard(p); }, {p, "-1"});
}

TEST_F(ShardFormat, TruncatedHeader) {
  const std::int32_t h[3] = {20240520, 1, 0};
  const std::string p = write_bytes("trunc.bin", h, sizeof h);
  expect_error<tk::format_error>([&] { td::read_shard(p); }, {p, "truncated shard header"});
}

TEST_F(ShardFormat, OtherLlmcMagicIsNamed) {
  const std::string p = write_raw_shard("model.bin", {20240326, 3, 1024}, {});
  expect_error<tk::format_error>([&] { td::read_shard(p); }, {p, "20240326", "model file"});
}

TEST_F(ShardFormat, BigEndianMagicIsNamed) {
  const std::int32_t swapped = static_cast<std::int32_t>(0x88D83401u);  // 20240520 = 0x0134D888
  const std::string p = write_raw_shard("be.bin", {swapped, 0x01000000, 0}, {});
  expect_error<tk::format_error>([&] { td::read_shard(p); }, {p, "byte-swapped"});
}

TEST_F(ShardFormat, OddSizedHeaderlessFile) {
  const char bytes[5] = {1, 0, 2, 0, 3};
  const std::string p = write_bytes("odd.bin", bytes, 5);
  expect_error<tk::format_error>(
      [&] { td::read_shard(p, 65536, td::shard_layout::headerless_uint16); }, {p, "odd size 5"});
}

TEST_F(ShardFormat, TinyFiles) {
  const char one = 7;
  const std::string p1 = write_bytes("one_byte.bin", &one, 1);
  expect_error<tk::format_error>([&] { td::read_shard(p1); }, {p1, "too small"});
  expect_error<tk::format_error>(
      [&] { td::read_shard(p1, 65536, td::shard_layout::headerless_uint16); }, {p1, "too small"});
  const std::string p0 = write_bytes("zero.bin", &one, 0);
  expect_error<tk::format_error>([&] { td::read_shard(p0); }, {p0, "too small"});
}

TEST_F(ShardFormat, TokenOutOfVocabularyNamesValueAndIndex) {
  auto tokens = random_tokens(300000, 6, 1000);
  tokens[200003] = 1000;  // == vocab: out of range, past the first scan block
  tokens[250000] = 60000;
  const std::string p = path("oov.bin");
  td::write_shard(p, tokens);
  expect_error<tk::format_error>([&] { td::read_shard(p, 1000); },
                                 {p, "token 1000", "index 200003"});
  EXPECT_NO_THROW(td::read_shard(p, 60001));
}

TEST_F(ShardFormat, CheckTokenRangeAcceptsTheBoundMinusOne) {
  const std::vector<std::uint16_t> t = {0, 49999, 5};
  EXPECT_NO_THROW(td::check_token_range(t, 50000, "x"));
  EXPECT_THROW(td::check_token_range(t, 49999, "x"), tk::format_error);
}

TEST_F(ShardFormat, WriteIntoMissingDirectoryIsIoError) {
  const std::string p = path("no/such/dir/s.bin");
  expect_error<tk::io_error>([&] { td::write_shard(p, random_tokens(3, 7)); }, {p});
}

TEST_F(ShardFormat, DirectoryIsNotATokenFile) {
  std::filesystem::create_directories(path("d.bin"));
  expect_error<tk::format_error>([&] { td::read_shard(path("d.bin")); }, {path("d.bin")});
}
