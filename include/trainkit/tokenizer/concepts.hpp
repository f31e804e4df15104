// trainkit/tokenizer/concepts.hpp — the Tokenizer role: text <-> token ids.
//
// The trainer never tokenizes (it reads shards); tokenizers serve `prepare`, which writes the
// shards, and generation, which turns sampled ids back into text. Both need only this much, so a
// different vocabulary (a SentencePiece model, a byte tokenizer) can stand in for GPT-2's.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace trainkit::tokenizer {

/// Requires:
///  - `encode(text)`: the ids of `text` (special-token spellings in it are treated as text);
///  - `decode(ids)`: the exact bytes the ids stand for (may be partial UTF-8 for a prefix);
///  - `vocab_size()`: every id `encode` returns is in [0, vocab_size);
///  - `eot_token()`: the document separator written before each document in shards;
///  - encode/decode are const and safe to call from several threads at once.
template <class T>
concept text_tokenizer = requires(const T t, std::string_view text,
                                  std::span<const std::uint32_t> ids) {
  { t.encode(text) } -> std::same_as<std::vector<std::uint32_t>>;
  { t.decode(ids) } -> std::same_as<std::string>;
  { t.vocab_size() } -> std::convertible_to<int>;
  { t.eot_token() } -> std::convertible_to<std::uint32_t>;
};

}  // namespace trainkit::tokenizer
