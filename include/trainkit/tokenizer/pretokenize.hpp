// trainkit/tokenizer/pretokenize.hpp — GPT-2's pre-tokenization: cutting text into pieces.
//
// Before BPE, GPT-2 cuts text with the regular expression (tiktoken's spelling of it)
//
//   '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s
//
// and merges never cross a cut. No std::regex (no Unicode classes, and slow): this is the same
// expression as a hand-written scanner over code points, alternative by alternative:
//  - an apostrophe followed by s, d, m, t, ll, ve or re (lower case only) is a piece;
//  - otherwise an optional U+0020 followed by a maximal run of one class — letters (\p{L}),
//    numbers (\p{N}) or "other" (neither, nor whitespace) — is a piece;
//  - a whitespace run that reaches the end of the text is one piece; one followed by a
//    non-space gives all but its last character as a piece (\s+(?!\S)), and the last character
//    is left to start the next piece (as the optional space) or, when it is not U+0020 or the
//    run was one character long, becomes a piece on its own (\s).
// Character classes come from utf8proc's Unicode tables (general category L*, N*; whitespace =
// the White_Space property, which is Zs, Zl, Zp and U+0009..U+000D, U+0085), with an ASCII table
// for the common case. Text must be valid UTF-8: an ill-formed byte raises format_error naming
// its offset (callers that want replacement repair the text first, see gpt2_tokenizer).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <utf8proc.h>

#include "trainkit/core/error.hpp"
#include "trainkit/core/utf8.hpp"

namespace trainkit::tokenizer {

/// The classes the GPT-2 pattern distinguishes.
enum class char_class : std::uint8_t { letter, number, space, other };

/// Class of any Unicode scalar value, from utf8proc's general category.
inline char_class classify(char32_t cp) noexcept {
  if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x85) return char_class::space;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return char_class::letter;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return char_class::number;
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
      return char_class::space;
    default:
      return char_class::other;
  }
}

namespace detail {

/// classify() for the 128 ASCII code points, computed once from utf8proc itself.
inline const std::array<char_class, 128>& ascii_classes() noexcept {
  static const std::array<char_class, 128> table = [] {
    std::array<char_class, 128> t{};
    for (char32_t c = 0; c < 128; ++c) t[c] = classify(c);
    return t;
  }();
  return table;
}

/// Scans `text`, handing each piece to the callback in order; the pieces concatenate to `text`.
class gpt2_piece_scanner {
 public:
  /// `base_offset`: where `text` starts in the caller's buffer, for error messages.
  explicit gpt2_piece_scanner(std::string_view text, std::size_t base_offset = 0) noexcept
      : text_(text),
        base_(base_offset),
        p_(reinterpret_cast<const unsigned char*>(text.data())),
        n_(text.size()),
        ascii_(ascii_classes()) {}

  template <class OnPiece>
  void run(OnPiece&& on_piece) {
    std::size_t i = 0;
    while (i < n_) {
      const std::size_t start = i;
      std::size_t len;
      char_class c = class_at(i, len);
      if (p_[i] == '\'') {
        if (const std::size_t k = contraction_length(i); k > 0) {
          on_piece(text_.substr(i, k));
          i += k;
          continue;
        }
      }
      if (p_[i] == ' ' && i + 1 < n_) {
        std::size_t len2;
        const char_class c2 = class_at(i + 1, len2);
        if (c2 != char_class::space) {  // " ?" prefix on a letter/number/other run
          i += 1;
          c = c2;
          len = len2;
        }
      }
      if (c != char_class::space) {
        std::size_t j = i + len;
        while (j < n_) {
          std::size_t lj;
          if (class_at(j, lj) != c) break;
          j += lj;
        }
        on_piece(text_.substr(start, j - start));
        i = j;
        continue;
      }
      // A whitespace run [i, j); `last` is the start of its final character.
      std::size_t j = i + len, last = i;
      while (j < n_) {
        std::size_t lj;
        if (class_at(j, lj) != char_class::space) break;
        last = j;
        j += lj;
      }
      if (j == n_) {  // \s++$
        on_piece(text_.substr(i, j - i));
        i = j;
      } else if (last > i) {  // \s+(?!\S): leave the final character for the next piece
        on_piece(text_.substr(i, last - i));
        i = last;
      } else {  // \s
        on_piece(text_.substr(i, j - i));
        i = j;
      }
    }
  }

 private:
  /// Class of the character at byte i, and its length in bytes.
  char_class class_at(std::size_t i, std::size_t& len) const {
    const unsigned char b = p_[i];
    if (b < 0x80) {
      len = 1;
      return ascii_[b];
    }
    const utf8_char ch = decode_utf8(p_ + i, p_ + n_);
    if (ch.length < 0) throw_invalid(i);
    len = static_cast<std::size_t>(ch.length);
    return classify(ch.code_point);
  }

  [[noreturn]] void throw_invalid(std::size_t i) const {
    // Offsets in the message count from the caller's buffer, not from this segment.
    std::string what = describe_invalid_utf8(text_, i);
    if (base_ > 0) {
      const std::string local = "byte offset " + std::to_string(i);
      what.replace(what.find(local), local.size(), "byte offset " + std::to_string(base_ + i));
    }
    throw format_error(what);
  }

  /// Length of the contraction ('s 'd 'm 't 'll 've 're) starting at the apostrophe at i, or 0.
  std::size_t contraction_length(std::size_t i) const noexcept {
    if (i + 1 >= n_) return 0;
    const unsigned char a = p_[i + 1];
    if (a == 's' || a == 'd' || a == 'm' || a == 't') return 2;
    if (i + 2 >= n_) return 0;
    const unsigned char b = p_[i + 2];
    if ((a == 'l' && b == 'l') || (a == 'v' && b == 'e') || (a == 'r' && b == 'e')) return 3;
    return 0;
  }

  std::string_view text_;
  std::size_t base_;
  const unsigned char* p_;
  std::size_t n_;
  const std::array<char_class, 128>& ascii_;
};

}  // namespace detail

/// Calls `on_piece(std::string_view)` for each GPT-2 pre-tokenization piece of `text`, in order.
/// Throws format_error ("invalid UTF-8 at byte offset N ...") on ill-formed input; the offset is
/// counted from `base_offset` (where `text` starts in the caller's buffer).
template <class OnPiece>
void for_each_gpt2_piece(std::string_view text, OnPiece&& on_piece, std::size_t base_offset = 0) {
  detail::gpt2_piece_scanner(text, base_offset).run(on_piece);
}

/// The pieces of `text` as strings (for tests and tools; encoding uses for_each_gpt2_piece).
inline std::vector<std::string> gpt2_pieces(std::string_view text) {
  std::vector<std::string> pieces;
  for_each_gpt2_piece(text, [&](std::string_view p) { pieces.emplace_back(p); });
  return pieces;
}

}  // namespace trainkit::tokenizer
