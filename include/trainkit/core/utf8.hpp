// trainkit/core/utf8.hpp — strict UTF-8 decoding, validation and repair.
//
// The one UTF-8 validator of the library, for the tokenizer and the checkpoint writer alike.
// A checkpoint manifest is JSON, and JSON text is UTF-8 (RFC 8259): its reader (nlohmann_json)
// refuses a string holding a byte sequence that is not, so the writer checks names and meta values
// with these rules first (tests/checkpoint compares the two on every short byte string).
// The tokenizer promises the ids tiktoken gives for valid UTF-8 and a clear error (or, when asked,
// U+FFFD replacement) for anything else, never undefined behaviour on arbitrary bytes. Decoding
// follows the Unicode Standard's well-formed byte sequences (table 3-7): no overlong forms, no
// surrogates, nothing above U+10FFFF. Replacement follows the standard's "maximal subpart"
// practice (also Python's `errors="replace"` and the WHATWG decoder), so a repaired text is the
// one tiktoken users get from `bytes.decode("utf-8", "replace")`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace trainkit {

/// One decoded code point: `length` > 0 bytes were valid; `length` < 0 means the bytes are
/// ill-formed and -`length` of them form the maximal subpart to replace by one U+FFFD.
struct utf8_char {
  char32_t code_point;
  int length;
};

/// Decodes the character starting at `p` (`p < end`).
inline utf8_char decode_utf8(const unsigned char* p, const unsigned char* end) noexcept {
  const unsigned b0 = p[0];
  if (b0 < 0x80) return {b0, 1};
  int need;                       // continuation bytes after the lead byte
  unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte (table 3-7)
  char32_t cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return {0, -1};  // continuation byte, C0/C1 (always overlong) or F5..FF
  }
  for (int k = 1; k <= need; ++k) {
    if (p + k >= end) return {0, -k};
    const unsigned b = p[k];
    const unsigned min = k == 1 ? lo : 0x80u, max = k == 1 ? hi : 0xBFu;
    if (b < min || b > max) return {0, -k};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {cp, need + 1};
}

/// Byte offset of the first ill-formed sequence in `text`, or nullopt when it is valid UTF-8.
inline std::optional<std::size_t> find_invalid_utf8(std::string_view text) noexcept {
  const auto* begin = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = begin + text.size();
  const auto* p = begin;
  while (p < end) {
    // ASCII dominates real text: skip it eight bytes at a time.
    while (end - p >= 8) {
      std::uint64_t v;
      std::memcpy(&v, p, 8);
      if (v & 0x8080808080808080ull) break;
      p += 8;
    }
    if (p == end) break;
    if (*p < 0x80) {
      ++p;
      continue;
    }
    const utf8_char c = decode_utf8(p, end);
    if (c.length < 0) return static_cast<std::size_t>(p - begin);
    p += c.length;
  }
  return std::nullopt;
}

/// `text` with each maximal ill-formed subpart replaced by U+FFFD (EF BF BD).
inline std::string replace_invalid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  const auto* begin = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = begin + text.size();
  const auto* p = begin;
  while (p < end) {
    const utf8_char c = decode_utf8(p, end);
    if (c.length > 0) {
      out.append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(c.length));
      p += c.length;
    } else {
      out += "\xEF\xBF\xBD";
      p += -c.length;
    }
  }
  return out;
}

/// "byte offset N (0xXX)" for error messages about ill-formed input.
inline std::string describe_invalid_utf8(std::string_view text, std::size_t offset) {
  static constexpr char hex[] = "0123456789ABCDEF";
  const auto b = static_cast<unsigned char>(text[offset]);
  std::string s = "invalid UTF-8 at byte offset " + std::to_string(offset) + " (byte 0x";
  s += hex[b >> 4];
  s += hex[b & 15];
  s += ')';
  return s;
}

/// `s` for an error message: printable ASCII as is, every other byte as \xNN.
inline std::string escaped_for_message(std::string_view s) {
  std::string out;
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f) {
      out += c;
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", b);
      out += hex;
    }
  }
  return out;
}

}  // namespace trainkit
