// trainkit/tokenizer/detail/flat_json.hpp — parser for a flat JSON object of string -> integer.
//
// encoder.json is one object mapping 50257 token spellings to ids. The library may not use a JSON
// library, and a general parser (boost::property_tree) would be slower and lose nothing we need,
// so this reads exactly that shape: an object whose keys are strings (all JSON escapes, including
// \uXXXX surrogate pairs, decoded to UTF-8) and whose values are non-negative integers. Anything
// else is a format_error naming the file, line and column.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "trainkit/core/error.hpp"

namespace trainkit::tokenizer::detail {

class flat_json_reader {
 public:
  flat_json_reader(std::string_view text, std::string source) noexcept
      : text_(text), source_(std::move(source)) {}

  /// Calls `on_entry(const std::string& key, std::int64_t value)` for each member, in file order.
  template <class OnEntry>
  void read(OnEntry&& on_entry) {
    skip_space();
    expect('{');
    skip_space();
    if (peek() == '}') {
      ++pos_;
    } else {
      std::string key;
      for (;;) {
        skip_space();
        read_string(key);
        skip_space();
        expect(':');
        skip_space();
        const std::int64_t value = read_integer();
        on_entry(key, value);
        skip_space();
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        expect('}');
        break;
      }
    }
    skip_space();
    if (pos_ != text_.size()) fail("unexpected content after the object");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw format_error(source_ + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " +
                       what + " (expected a flat JSON object of string -> integer)");
  }

  int peek() const noexcept {
    return pos_ < text_.size() ? static_cast<unsigned char>(text_[pos_]) : -1;
  }

  void skip_space() noexcept {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t'))
      ++pos_;
  }

  void expect(char c) {
    if (peek() != static_cast<unsigned char>(c)) fail(std::string("expected '") + c + "'");
    ++pos_;
  }

  unsigned read_hex4() {
    if (text_.size() - pos_ < 4) fail("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= unsigned(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= unsigned(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= unsigned(c - 'A' + 10);
      else
        fail("bad hex digit in \\u escape");
    }
    return v;
  }

  static void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  void read_string(std::string& out) {
    out.clear();
    expect('"');
    for (;;) {
      if (pos_ >= text_.size()) fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character inside a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) fail("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          char32_t cp = read_hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            // A high surrogate must be followed by an escaped low surrogate: together they
            // spell one code point above U+FFFF.
            if (text_.substr(pos_, 2) != "\\u") fail("high surrogate without a low surrogate");
            pos_ += 2;
            const char32_t low = read_hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("high surrogate without a low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("lone low surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail(std::string("unknown escape \\") + e);
      }
    }
  }

  std::int64_t read_integer() {
    if (peek() < '0' || peek() > '9') fail("expected a non-negative integer value");
    std::int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (text_[pos_++] - '0');
      if (v > (std::int64_t{1} << 40)) fail("integer value out of range");
    }
    return v;
  }

  std::string_view text_;
  std::string source_;
  std::size_t pos_ = 0;
};

}  // namespace trainkit::tokenizer::detail
