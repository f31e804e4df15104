// trainkit/tokenizer/vocab_files.hpp — finding, reading and verifying GPT-2 vocabulary files.
//
// The tokenizer loads the standard encoder.json + vocab.bpe from a directory the caller names,
// else the TRAINKIT_GPT2_VOCAB environment variable, else the copy bundled with trainkit
// (vocab/gpt2 in the sources, share/trainkit/gpt2 once installed; the build system names it in
// TRAINKIT_GPT2_VOCAB_DIR). Nothing is downloaded at run time. Both files are checked against
// the SHA-256 of OpenAI's published files — the values tiktoken also pins — so a truncated
// download or a different vocabulary is refused instead of yielding ids no other tool would
// produce.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "trainkit/core/error.hpp"
#include "trainkit/tokenizer/detail/sha256.hpp"

namespace trainkit::tokenizer {

/// SHA-256 of OpenAI's gpt-2/encodings/main/encoder.json.
inline constexpr std::string_view gpt2_encoder_json_sha256 =
    "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783";
/// SHA-256 of OpenAI's gpt-2/encodings/main/vocab.bpe.
inline constexpr std::string_view gpt2_vocab_bpe_sha256 =
    "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5";

/// Environment variable consulted when no vocabulary directory is given.
inline constexpr const char* vocab_dir_env = "TRAINKIT_GPT2_VOCAB";

/// The vocabulary bundled with trainkit when the build system named it (TRAINKIT_GPT2_VOCAB_DIR,
/// set by the trainkit::trainkit CMake target and the Conan package) and it exists; else none.
inline std::optional<std::filesystem::path> bundled_vocab_dir() {
#if defined(TRAINKIT_GPT2_VOCAB_DIR)
  const std::filesystem::path dir(TRAINKIT_GPT2_VOCAB_DIR);
  std::error_code ec;
  if (std::filesystem::is_regular_file(dir / "encoder.json", ec) &&
      std::filesystem::is_regular_file(dir / "vocab.bpe", ec))
    return dir;
#endif
  return std::nullopt;
}

/// The parameter name that resolve_vocab_dir's messages give the directory a caller passes; a
/// program maps it to its own flag.
inline constexpr std::string_view vocab_dir_field = "vocab_dir";

/// The vocabulary directory: `vocab_dir` when non-empty, else $TRAINKIT_GPT2_VOCAB, else the
/// bundled copy. Throws config_error naming where the directory came from (`vocab_dir_field` or
/// the environment variable) when it does not exist, or naming all three when none applies.
inline std::filesystem::path resolve_vocab_dir(std::string_view vocab_dir) {
  std::string dir(vocab_dir);
  std::string origin = std::string(vocab_dir_field) + " " + dir;
  if (dir.empty()) {
    const char* env = std::getenv(vocab_dir_env);
    if (env == nullptr || *env == '\0') {
      if (auto bundled = bundled_vocab_dir()) return *bundled;
      throw config_error("no GPT-2 vocabulary directory: give " + std::string(vocab_dir_field) +
                         " DIR or set " + vocab_dir_env +
                         " (a directory holding encoder.json and vocab.bpe); the copy bundled "
                         "with trainkit was not found (TRAINKIT_GPT2_VOCAB_DIR" +
#if defined(TRAINKIT_GPT2_VOCAB_DIR)
                         std::string("=") + TRAINKIT_GPT2_VOCAB_DIR +
#else
                         std::string(" not defined: build through trainkit's CMake or Conan "
                                     "package") +
#endif
                         ")");
    }
    dir = env;
    origin = std::string(vocab_dir_env) + "=" + dir;
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw config_error(origin +
                       ": not a directory (expected one holding encoder.json and "
                       "vocab.bpe)");
  return dir;
}

/// Whole contents of `path`; io_error names the file and the OS's reason.
inline std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw io_error(path.string() + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw io_error(path.string() + ": read failed");
  return std::move(ss).str();
}

/// Throws format_error when `contents` (read from `path`) does not hash to `expected_hex`.
inline void verify_sha256(std::string_view contents, std::string_view expected_hex,
                          const std::filesystem::path& path) {
  const std::string actual = detail::sha256_hex(contents);
  if (actual != expected_hex)
    throw format_error(path.string() + ": SHA-256 " + actual + " differs from the standard " +
                       "GPT-2 file's " + std::string(expected_hex) +
                       " (truncated download or a different vocabulary)");
}

/// The two vocabulary files, read (and by default verified) from a directory.
struct vocab_files {
  std::string encoder_json;  // contents of encoder.json
  std::string vocab_bpe;     // contents of vocab.bpe
  std::filesystem::path encoder_json_path;
  std::filesystem::path vocab_bpe_path;
};

/// Reads DIR/encoder.json and DIR/vocab.bpe; with `verify`, checks their SHA-256.
inline vocab_files read_vocab_files(const std::filesystem::path& dir, bool verify = true) {
  vocab_files f;
  f.encoder_json_path = dir / "encoder.json";
  f.vocab_bpe_path = dir / "vocab.bpe";
  f.encoder_json = read_text_file(f.encoder_json_path);
  f.vocab_bpe = read_text_file(f.vocab_bpe_path);
  if (verify) {
    verify_sha256(f.encoder_json, gpt2_encoder_json_sha256, f.encoder_json_path);
    verify_sha256(f.vocab_bpe, gpt2_vocab_bpe_sha256, f.vocab_bpe_path);
  }
  return f;
}

}  // namespace trainkit::tokenizer
