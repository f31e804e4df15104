// fuzz_bpe_roundtrip.cpp — libFuzzer target: the GPT-2 BPE encoder on arbitrary bytes.
//
// Valid UTF-8 must encode to ids below the vocabulary size and decode back to the same bytes;
// invalid UTF-8 must be refused with format_error (the default) or, with `replace`, encode to
// ids that decode to the input with each ill-formed subpart replaced by U+FFFD.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "trainkit/core/error.hpp"
#include "trainkit/core/utf8.hpp"
#include "trainkit/tokenizer/gpt2_tokenizer.hpp"
#include "trainkit/tokenizer/vocab_files.hpp"

namespace tt = trainkit::tokenizer;

namespace {
const tt::gpt2_tokenizer& tokenizer() {
  static const tt::gpt2_tokenizer tok = tt::gpt2_tokenizer::from_directory(
      tt::resolve_vocab_dir(std::getenv("TRAINKIT_GPT2_VOCAB") ? "" : TRAINKIT_FUZZ_VOCAB_DIR));
  return tok;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto& tok = tokenizer();
  const bool valid = !trainkit::find_invalid_utf8(text).has_value();
  std::vector<std::uint32_t> ids;
  try {
    tok.encode_into(text, ids);
    if (!valid) std::abort();  // ill-formed UTF-8 was accepted
  } catch (const trainkit::format_error&) {
    if (valid) std::abort();  // well-formed UTF-8 was refused
    ids.clear();
    tok.encode_into(text, ids, {.on_invalid = tt::invalid_utf8::replace});
    for (const auto id : ids)
      if (int(id) >= tok.vocab_size()) std::abort();
    if (tok.decode(std::span<const std::uint32_t>(ids)) != trainkit::replace_invalid_utf8(text))
      std::abort();
    return 0;
  }
  for (const auto id : ids)
    if (int(id) >= tok.vocab_size()) std::abort();
  if (tok.decode(std::span<const std::uint32_t>(ids)) != text) std::abort();
  return 0;
}
