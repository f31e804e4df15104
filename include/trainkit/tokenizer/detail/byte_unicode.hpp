// trainkit/tokenizer/detail/byte_unicode.hpp — GPT-2's reversible byte <-> code point map.
//
// GPT-2's encoder.json and vocab.bpe spell every token's bytes as text: each byte is shown as one
// printable code point so that the files contain no whitespace or control characters inside a
// token. Printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the other
// 68 bytes map, in increasing order, to U+0100, U+0101, ... (bytes_to_unicode() in OpenAI's
// encoder.py). Loading the vocabulary runs this map backwards to recover the raw bytes.
#pragma once

#include <array>
#include <cstdint>

namespace trainkit::tokenizer::detail {

/// True for the bytes GPT-2 shows as themselves.
constexpr bool byte_is_self_printed(unsigned b) noexcept {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/// byte -> code point used to spell it in the vocabulary files.
constexpr std::array<char32_t, 256> make_byte_to_unicode() noexcept {
  std::array<char32_t, 256> map{};
  char32_t next = 0x100;
  for (unsigned b = 0; b < 256; ++b) map[b] = byte_is_self_printed(b) ? char32_t(b) : next++;
  return map;
}

inline constexpr std::array<char32_t, 256> byte_to_unicode = make_byte_to_unicode();

/// The byte that code point `cp` spells, or -1 when `cp` is not one of the 256 images.
constexpr int unicode_to_byte(char32_t cp) noexcept {
  if (cp < 0x100) return byte_is_self_printed(unsigned(cp)) ? int(cp) : -1;
  if (cp < 0x100 + 68) {
    // The (cp - 0x100)-th byte that is not printed as itself.
    unsigned k = unsigned(cp - 0x100);
    for (unsigned b = 0; b < 256; ++b)
      if (!byte_is_self_printed(b) && k-- == 0) return int(b);
  }
  return -1;
}

static_assert(byte_to_unicode[' '] == 0x120, "GPT-2 shows the space byte as U+0120 'Ġ'");
static_assert(byte_to_unicode['\n'] == 0x10A, "GPT-2 shows the newline byte as U+010A 'Ċ'");
static_assert(unicode_to_byte(0x120) == ' ' && unicode_to_byte('A') == 'A');

}  // namespace trainkit::tokenizer::detail
