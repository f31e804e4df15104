// trainkit/checkpoint/detail/utf8.hpp — UTF-8 validation for the strings a manifest carries.
//
// A manifest is JSON, and JSON text is UTF-8 (RFC 8259): the reader (nlohmann_json) refuses a
// string holding a byte sequence that is not, so a checkpoint whose meta value or tensor name
// held one would be written and then never read back. The writer checks with the same rules
// the reader applies (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF) and
// refuses such a state before anything is written.
#pragma once

#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace trainkit::checkpoint::detail {

/// The offset of the first byte that does not begin a valid UTF-8 sequence, or nullopt when all
/// of `s` is valid UTF-8.
inline std::optional<std::size_t> first_invalid_utf8(std::string_view s) noexcept {
  const auto byte = [&s](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto in = [](unsigned char b, unsigned lo, unsigned hi) { return b >= lo && b <= hi; };
  std::size_t i = 0;
  while (i < s.size()) {
    const unsigned char b = byte(i);
    std::size_t n = 0;              // continuation bytes that follow
    unsigned lo = 0x80, hi = 0xbf;  // the range of the first continuation byte
    if (b < 0x80) {
      ++i;
      continue;
    } else if (in(b, 0xc2, 0xdf)) {
      n = 1;
    } else if (b == 0xe0) {
      n = 2, lo = 0xa0;  // below: overlong
    } else if (in(b, 0xe1, 0xec) || in(b, 0xee, 0xef)) {
      n = 2;
    } else if (b == 0xed) {
      n = 2, hi = 0x9f;  // above: UTF-16 surrogates
    } else if (b == 0xf0) {
      n = 3, lo = 0x90;  // below: overlong
    } else if (in(b, 0xf1, 0xf3)) {
      n = 3;
    } else if (b == 0xf4) {
      n = 3, hi = 0x8f;  // above: beyond U+10FFFF
    } else {
      return i;  // a continuation byte without a lead, 0xc0/0xc1 (overlong) or 0xf5..0xff
    }
    if (i + n >= s.size()) return i;  // cut short by the end of the string
    if (!in(byte(i + 1), lo, hi)) return i;
    for (std::size_t k = 2; k <= n; ++k)
      if (!in(byte(i + k), 0x80, 0xbf)) return i;
    i += n + 1;
  }
  return std::nullopt;
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

}  // namespace trainkit::checkpoint::detail
