// tests/core/test_utf8.cpp — strict UTF-8 decoding and repair.
//
// Checks the decoder against the well-formedness table of the Unicode Standard (overlongs,
// surrogates, > U+10FFFF, truncation) by comparing it, over every 1- to 3-byte sequence and
// sampled 4-byte ones, with an independent encoder-based definition: bytes are valid exactly
// when they are the unique UTF-8 encoding of a scalar value. Replacement is checked on the
// examples of the Unicode Standard's "maximal subpart" practice (table 3-8).
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>

#include "trainkit/core/utf8.hpp"

namespace {

using namespace trainkit;

std::string encode_scalar(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | (cp >> 18));
    s += char(0x80 | ((cp >> 12) & 0x3F));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

bool is_scalar(char32_t cp) {
  return cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
}

// Independent definition: `bytes` is one well-formed character iff re-encoding the value its
// bits spell gives back the same bytes and that value is a scalar value.
bool one_valid_char(const std::string& bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t n = bytes.size();
  char32_t cp;
  if (n == 1)
    cp = p[0];
  else if (n == 2)
    cp = char32_t(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
  else if (n == 3)
    cp = char32_t(p[0] & 0x0F) << 12 | char32_t(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
  else
    cp = char32_t(p[0] & 0x07) << 18 | char32_t(p[1] & 0x3F) << 12 | char32_t(p[2] & 0x3F) << 6 |
         (p[3] & 0x3F);
  return is_scalar(cp) && encode_scalar(cp) == bytes;
}

bool decodes_whole(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const utf8_char c = decode_utf8(p, p + s.size());
  return c.length == static_cast<int>(s.size());
}

}  // namespace

TEST(Utf8, EveryScalarRoundTrips) {
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (!is_scalar(cp)) continue;
    const std::string s = encode_scalar(cp);
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const utf8_char c = decode_utf8(p, p + s.size());
    ASSERT_EQ(c.length, static_cast<int>(s.size())) << std::hex << unsigned(cp);
    ASSERT_EQ(c.code_point, cp);
  }
}

TEST(Utf8, AgreesWithEncoderDefinitionOnAllShortSequences) {
  for (unsigned a = 0; a < 256; ++a) {
    const std::string s1(1, char(a));
    ASSERT_EQ(decodes_whole(s1), one_valid_char(s1)) << a;
    for (unsigned b = 0; b < 256; ++b) {
      const std::string s2 = s1 + char(b);
      ASSERT_EQ(decodes_whole(s2), a >= 0x80 && one_valid_char(s2)) << a << ' ' << b;
      if (a < 0xE0 || a > 0xEF) continue;
      for (unsigned c = 0x70; c < 0xD0; ++c) {  // continuation bytes and neighbours
        const std::string s3 = s2 + char(c);
        ASSERT_EQ(decodes_whole(s3), one_valid_char(s3)) << a << ' ' << b << ' ' << c;
      }
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    std::string s4;
    s4 += char(0xEE + rng() % 18);  // F0..F4 and neighbours
    for (int k = 0; k < 3; ++k) s4 += char(0x70 + rng() % 0x60);
    ASSERT_EQ(decodes_whole(s4), static_cast<unsigned char>(s4[0]) >= 0xF0 && one_valid_char(s4));
  }
}

TEST(Utf8, FindInvalidNamesFirstBadOffset) {
  EXPECT_EQ(find_invalid_utf8("plain ascii text that is long enough"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("caf\xC3\xA9 \xE4\xBD\xA0 \xF0\x9F\x98\x80"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("0123456789abc\xFFxyz"), std::optional<std::size_t>(13));
  EXPECT_EQ(find_invalid_utf8("ab\xC3"), std::optional<std::size_t>(2));             // truncated
  EXPECT_EQ(find_invalid_utf8("ab\xC0\xAF"), std::optional<std::size_t>(2));         // overlong '/'
  EXPECT_EQ(find_invalid_utf8("\xED\xA0\x80"), std::optional<std::size_t>(0));       // surrogate
  EXPECT_EQ(find_invalid_utf8("x\xF4\x90\x80\x80"), std::optional<std::size_t>(1));  // > 10FFFF
}

TEST(Utf8, ReplacementUsesMaximalSubparts) {
  // Unicode Standard table 3-8: "61 F1 80 80 E1 80 C2 62 80 63 80 BF 64" becomes
  // a, FFFD (F1 80 80), FFFD (E1 80), FFFD (C2), b, FFFD, c, FFFD, FFFD, d.
  const std::string in = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(replace_invalid_utf8(in), "a" + r + r + r + "b" + r + "c" + r + r + "d");
  EXPECT_EQ(replace_invalid_utf8("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(find_invalid_utf8(replace_invalid_utf8("\xFF\xFE\xED\xA0\x80\xF0\x9F")), std::nullopt);
}
