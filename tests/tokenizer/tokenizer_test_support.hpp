// tests/tokenizer/tokenizer_test_support.hpp — fixtures and vocabulary lookup for tokenizer tests.
//
// The golden ids were produced once by tools/make_tokenizer_fixtures.py (tiktoken built from the
// same vocab files) and committed, so the tests need no Python. Tests that need the full GPT-2
// vocabulary use the one resolve_vocab_dir("") finds: $TRAINKIT_GPT2_VOCAB when set, else the
// copy bundled in the repository (vocab/gpt2), so they run on every fresh clone and never skip.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
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

/// The directory holding the full GPT-2 vocabulary ($TRAINKIT_GPT2_VOCAB, else the bundled copy).
inline std::filesystem::path full_vocab_dir() {
  return trainkit::tokenizer::resolve_vocab_dir("");
}

/// The full tokenizer, loaded (and SHA-256 checked) once.
inline const trainkit::tokenizer::gpt2_tokenizer* full_tokenizer() {
  static const trainkit::tokenizer::gpt2_tokenizer tok =
      trainkit::tokenizer::gpt2_tokenizer::from_directory(full_vocab_dir());
  return &tok;
}

}  // namespace tokenizer_test

/// Loads the full vocabulary, failing the test (never skipping it) when it cannot.
#define REQUIRE_FULL_VOCAB() ASSERT_NO_THROW((void)tokenizer_test::full_tokenizer())
