// fuzz_prepare_jsonl.cpp — libFuzzer target: prepare's JSONL reader (examples/gpt_fineweb,
// through its chunk interface: one raw JSON line per document, a "text" field each). Every line
// is either tokenized (<|endoftext|> first, then ids that decode to the field) or reported bad
// with its line number; nothing else may happen.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "commands/prepare.hpp"
#include "trainkit/tokenizer/gpt2_tokenizer.hpp"

namespace tt = trainkit::tokenizer;
namespace pd = gpt_fineweb::prepare_detail;

namespace {
const tt::gpt2_tokenizer& tokenizer() {
  static const tt::gpt2_tokenizer tok = tt::gpt2_tokenizer::from_directory(
      tt::resolve_vocab_dir(std::getenv("TRAINKIT_GPT2_VOCAB") ? "" : TRAINKIT_FUZZ_VOCAB_DIR));
  return tok;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  pd::chunk c{.source = "fuzz.jsonl", .jsonl = true};
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::uint64_t line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    c.docs.push_back(line);
    c.line_numbers.push_back(line_number);
    c.bytes += line.size();
  }
  gpt_fineweb::prepare_options o;
  o.on_bad_input = gpt_fineweb::bad_input_policy::skip;
  const pd::chunk_result r = pd::tokenize_chunk(c, tokenizer(), o);
  if (r.docs + r.bad.size() != c.docs.size()) std::abort();  // every line accounted for
  std::size_t eots = 0;
  for (const auto t : r.tokens) {
    if (int(t) >= tokenizer().vocab_size()) std::abort();
    eots += t == tokenizer().eot_token();
  }
  if (eots < r.docs) std::abort();  // one <|endoftext|> before each document
  return 0;
}
