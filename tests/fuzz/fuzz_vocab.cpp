// fuzz_vocab.cpp — libFuzzer target: loading encoder.json and vocab.bpe (gpt2_tokenizer's
// public constructor). The first byte picks which file the rest of the input replaces; the other
// one is the real GPT-2 file (TRAINKIT_FUZZ_VOCAB_DIR or $TRAINKIT_GPT2_VOCAB), so the checks
// after the first file's are reached. A vocabulary that loads must encode and decode a probe.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "trainkit/core/error.hpp"
#include "trainkit/tokenizer/gpt2_tokenizer.hpp"
#include "trainkit/tokenizer/vocab_files.hpp"

namespace tt = trainkit::tokenizer;

namespace {
const tt::vocab_files& real_files() {
  static const tt::vocab_files f = tt::read_vocab_files(
      tt::resolve_vocab_dir(std::getenv("TRAINKIT_GPT2_VOCAB") ? "" : TRAINKIT_FUZZ_VOCAB_DIR),
      /*verify=*/true);
  return f;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const bool replace_encoder = (data[0] & 1) == 0;
  try {
    const tt::gpt2_tokenizer tok(replace_encoder ? input : real_files().encoder_json,
                                 replace_encoder ? real_files().vocab_bpe : input);
    const std::string probe = "Hello, world";
    std::vector<std::uint32_t> ids;
    tok.encode_into(probe, ids);
    for (const auto id : ids)
      if (int(id) >= tok.vocab_size()) std::abort();
    if (tok.decode(std::span<const std::uint32_t>(ids)) != probe) std::abort();
  } catch (const trainkit::format_error&) {
  }
  return 0;
}
