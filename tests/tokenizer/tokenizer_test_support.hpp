// tests/tokenizer/tokenizer_test_support.hpp — fixtures and vocabulary lookup for tokenizer tests.
//
// The golden ids were produced once by tools/make_tokenizer_fixtures.py (tiktoken built from the
// same vocab files) and committed, so the tests need no Python. Tests that need the full GPT-2
// vocabulary find it in $TRAINKIT_GPT2_VOCAB or ../shared/data/gpt2 and skip, saying so, when
// neither holds it.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>

#include "trainkit/tokenizer/gpt2_tokenizer.hpp"

namespace tokenizer_test {

inline std::filesystem::path fixtures_dir() {
  return std::filesystem::path(TRAINKIT_SOURCE_DIR) / "tests" / "tokenizer" / "fixtures";
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open fixture " + p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline const nlohmann::json& golden() {
  static const nlohmann::json j =
      nlohmann::json::parse(read_file(fixtures_dir() / "gpt2_golden.json"));
  return j;
}

/// The directory holding the full GPT-2 vocabulary, if this machine has one.
inline std::optional<std::filesystem::path> full_vocab_dir() {
  std::vector<std::filesystem::path> candidates;
  if (const char* env = std::getenv("TRAINKIT_GPT2_VOCAB"); env && *env)
    candidates.emplace_back(env);
  candidates.emplace_back(std::filesystem::path(TRAINKIT_SHARED_DATA_DIR) / "gpt2");
  for (const auto& d : candidates)
    if (std::filesystem::exists(d / "encoder.json") && std::filesystem::exists(d / "vocab.bpe"))
      return d;
  return std::nullopt;
}

/// The full tokenizer, loaded once; null when the vocabulary is absent.
inline const trainkit::tokenizer::gpt2_tokenizer* full_tokenizer() {
  static const std::unique_ptr<trainkit::tokenizer::gpt2_tokenizer> tok = [] {
    std::unique_ptr<trainkit::tokenizer::gpt2_tokenizer> t;
    if (auto dir = full_vocab_dir())
      t = std::make_unique<trainkit::tokenizer::gpt2_tokenizer>(
          trainkit::tokenizer::gpt2_tokenizer::from_directory(*dir));
    return t;
  }();
  return tok.get();
}

}  // namespace tokenizer_test

/// Skips the current test, saying why, when the full GPT-2 vocabulary is not on this machine.
#define REQUIRE_FULL_VOCAB()                                                         \
  if (tokenizer_test::full_tokenizer() == nullptr)                                   \
  GTEST_SKIP() << "full GPT-2 vocabulary not found (set TRAINKIT_GPT2_VOCAB or put " \
                  "encoder.json + vocab.bpe in ../shared/data/gpt2); skipping full-vocab test"
