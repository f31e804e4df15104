// tests/data/shard_fixture.hpp — temporary directories and shard files for data/prefetch tests.
//
// Each test gets its own directory under the system temp dir (named after the process and the
// test) so tests can run in parallel under ctest, and the directory is removed afterwards.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace trainkit_test {

class temp_dir_test : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ =
        std::filesystem::temp_directory_path() / ("trainkit_" + std::to_string(::getpid()) + "_" +
                                                  info->test_suite_name() + "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  /// Writes raw bytes (for malformed files the library's writer would never produce).
  std::string write_bytes(const std::string& name, const void* data, std::size_t n) const {
    const std::string p = path(name);
    std::ofstream f(p, std::ios::binary);
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
    return p;
  }

  /// A headered shard built by hand (independently of write_shard): header ints then tokens.
  std::string write_raw_shard(const std::string& name, std::vector<std::int32_t> header,
                              const std::vector<std::uint16_t>& tokens) const {
    header.resize(256, 0);
    std::vector<char> bytes(header.size() * 4 + tokens.size() * 2);
    std::memcpy(bytes.data(), header.data(), header.size() * 4);
    if (!tokens.empty())  // memcpy from an empty vector's null data() is UB
      std::memcpy(bytes.data() + header.size() * 4, tokens.data(), tokens.size() * 2);
    return write_bytes(name, bytes.data(), bytes.size());
  }

  std::filesystem::path dir_;
};

}  // namespace trainkit_test
