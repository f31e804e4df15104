// tests/io/test_safetensors.cpp — safetensors write/read: round trips, the reference Python
// implementation reading trainkit's file and trainkit reading the reference's, and refusal of
// malformed files (short, oversized header, gap, overlap, wrong byte count, unknown dtype).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "python_support.hpp"
#include "trainkit/io/safetensors_read.hpp"
#include "trainkit/io/safetensors_write.hpp"

namespace {

namespace fs = std::filesystem;
using trainkit::format_error;
using trainkit::io::safetensors_dtype;
using trainkit::io::safetensors_entry_of;
using trainkit::io::safetensors_file;

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("trainkit_safetensors_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// The values safetensors_interop.py expects: exact in bf16 and f16, different per tensor.
std::vector<float> expected(const std::string& name, std::size_t n) {
  int k = 0;
  for (char c : name) k += static_cast<unsigned char>(c);
  k = k % 7 + 1;
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = float((int(i % 17) - 8) * k) / 4.0f;
  return v;
}

struct fixture_tensor {
  std::string name;
  std::vector<std::int64_t> shape;
  safetensors_dtype dtype;
  std::vector<float> values;
};

std::vector<fixture_tensor> fixture_tensors() {
  std::vector<fixture_tensor> t = {{"alpha", {3, 5}, safetensors_dtype::f32, {}},
                                   {"beta.weight", {4, 2, 3}, safetensors_dtype::bf16, {}},
                                   {"gamma", {7}, safetensors_dtype::f32, {}},
                                   {"scalar", {}, safetensors_dtype::f32, {}}};
  for (auto& x : t) x.values = expected(x.name, trainkit::shape_numel(x.shape));
  return t;
}

void write_fixture(const fs::path& path, const std::vector<fixture_tensor>& ts) {
  std::vector<trainkit::io::safetensors_entry> entries;
  for (const auto& t : ts)
    entries.push_back(safetensors_entry_of(t.name, t.dtype, t.shape, t.values));
  trainkit::io::write_safetensors(path, entries, {{"format", "pt"}, {"writer", "trainkit"}});
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << s;
}

/// A file with `header` as its JSON header and `data_bytes` zero bytes of data.
void write_raw(const fs::path& p, const std::string& header, std::size_t data_bytes) {
  std::string s(8, '\0');
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) s[std::size_t(i)] = char((n >> (8 * i)) & 0xff);
  write_bytes(p, s + header + std::string(data_bytes, '\0'));
}

void expect_format_error(const fs::path& p, const std::string& needle) {
  try {
    safetensors_file f(p);
    ADD_FAILURE() << "expected format_error containing '" << needle << "'";
  } catch (const format_error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
  }
}

TEST(Safetensors, RoundTripKeepsNamesShapesDtypesValuesAndMetadata) {
  const fs::path d = scratch("roundtrip");
  const auto ts = fixture_tensors();
  write_fixture(d / "a.safetensors", ts);
  EXPECT_FALSE(fs::exists(d / "a.safetensors.tmp"));
  safetensors_file f(d / "a.safetensors");
  EXPECT_EQ(f.metadata().at("writer"), "trainkit");
  ASSERT_EQ(f.tensors().size(), ts.size());
  for (const auto& t : ts) {
    const auto* s = f.find(t.name);
    ASSERT_NE(s, nullptr) << t.name;
    EXPECT_EQ(s->shape, t.shape);
    EXPECT_EQ(s->dtype, t.dtype);
    EXPECT_EQ(f.read(t.name), t.values) << t.name;
  }
  // Header padded to 8 bytes, so every tensor starts aligned.
  const std::string bytes = read_bytes(d / "a.safetensors");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[std::size_t(i)]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + (15 + 7 + 1) * 4 + 24 * 2);
}

TEST(Safetensors, Bf16RoundsToNearestEven) {
  const fs::path d = scratch("bf16");
  // 1 + 2^-8 is halfway between two bf16 values: ties to even gives 1; 1 + 3*2^-8 rounds up.
  const std::vector<float> v{1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -2.5f};
  trainkit::io::write_safetensors(d / "b.safetensors",
                                  {safetensors_entry_of("x", safetensors_dtype::bf16, {3}, v)});
  safetensors_file f(d / "b.safetensors");
  EXPECT_EQ(f.read("x"), (std::vector<float>{1.0f, 1.0f + 4.0f / 256, -2.5f}));
}

TEST(Safetensors, ReferenceImplementationReadsTrainkitsFile) {
  const fs::path d = scratch("python_reads");
  write_fixture(d / "t.safetensors", fixture_tensors());
  RUN_PYTHON_CHECK("io/safetensors_interop.py", "check '" + (d / "t.safetensors").string() + "'");
}

TEST(Safetensors, TrainkitReadsReferenceImplementationsFile) {
  const fs::path d = scratch("trainkit_reads");
  RUN_PYTHON_CHECK("io/safetensors_interop.py", "write '" + (d / "p.safetensors").string() + "'");
  safetensors_file f(d / "p.safetensors");
  EXPECT_EQ(f.metadata().at("source"), "python");
  for (const auto& t : fixture_tensors()) {
    const auto* s = f.find(t.name);
    ASSERT_NE(s, nullptr) << t.name;
    EXPECT_EQ(s->shape, t.shape) << t.name;
    EXPECT_EQ(s->dtype, t.name == "gamma" ? safetensors_dtype::f16 : safetensors_dtype::f32);
    EXPECT_EQ(f.read(t.name), t.values) << t.name;
  }
}

TEST(Safetensors, HalfToFloatCoversEveryClass) {
  using trainkit::io::detail::half_to_float;
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0xc000), -2.0f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(half_to_float(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_TRUE(std::isinf(half_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(half_to_float(0x7e00)));
  EXPECT_TRUE(std::signbit(half_to_float(0x8000)));
}

TEST(Safetensors, RefusesMalformedFiles) {
  const fs::path d = scratch("malformed");
  write_bytes(d / "short", "abc");
  expect_format_error(d / "short", "shorter than the 8-byte");
  write_raw(d / "huge", "{}", 0);
  {
    std::string s = read_bytes(d / "huge");
    s[0] = char(0xff);
    s[3] = char(0x7f);
    write_bytes(d / "huge", s);
  }
  expect_format_error(d / "huge", "header length");
  write_raw(d / "json", "{not json", 0);
  expect_format_error(d / "json", "not valid JSON");
  // A number beyond double's range is nlohmann's out_of_range, not parse_error (found by
  // fuzz_safetensors; it ended the program with std::terminate).
  write_raw(d / "number", R"({"a":{"dtype":"F32","shape":[1E400],"data_offsets":[0,4]}})", 4);
  expect_format_error(d / "number", "not valid JSON");
  write_raw(d / "count", R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", 12);
  expect_format_error(d / "count", "do not hold 4 F32");
  write_raw(d / "gap",
            R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
            12);
  expect_format_error(d / "gap", "(gap)");
  write_raw(d / "overlap",
            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
            8);
  expect_format_error(d / "overlap", "(overlap)");
  write_raw(d / "trailing", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8);
  expect_format_error(d / "trailing", "its header describes");
  write_raw(d / "dtype", R"({"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8);
  expect_format_error(d / "dtype", "dtype 'I64'");
  // 2^32 * 2^32 elements would wrap a 64-bit count to 0, matching an empty byte range.
  write_raw(d / "overflow",
            R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0);
  expect_format_error(d / "overflow", "more elements than the file has bytes");
  expect_format_error(d / "missing", "does not exist");
  EXPECT_THROW(
      trainkit::io::write_safetensors(
          d / "dup", {safetensors_entry_of("x", safetensors_dtype::f32, {1}, expected("x", 1)),
                      safetensors_entry_of("x", safetensors_dtype::f32, {1}, expected("x", 1))}),
      trainkit::config_error);
}

}  // namespace
