// trainkit/report/detail/log_scan.hpp — a small cursor for reading other programs' log lines.
//
// The log readers match printf/f-string formats ("iter %d: loss %.4f, time %.2fms, ...") by
// walking the line with literals and numbers instead of std::regex: no backtracking blow-up on
// long or hostile lines (the readers are fuzzed), and a failed match simply means "not this
// rule", so the reader counts the line as skipped. Numbers go through std::from_chars, so the
// reading does not depend on the C locale.
#pragma once

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace trainkit::report::detail {

inline bool is_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\r';
}

inline std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

/// `s` without ANSI colour sequences (ESC '[' ... 'm'): torchtitan colours its metric lines.
inline std::string strip_ansi(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b' && i + 1 < s.size() && s[i + 1] == '[') {
      std::size_t j = i + 2;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == ';')) ++j;
      if (j < s.size() && s[j] == 'm') {
        i = j;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

/// A number in `s` (all of it), thousands separators (',') allowed; nullopt otherwise.
inline std::optional<double> to_number(std::string_view s) {
  std::string digits;
  for (char c : s)
    if (c != ',') digits += c;
  if (digits.empty() || digits.size() > 64) return std::nullopt;
  std::string_view d = digits;
  if (d.front() == '+') d.remove_prefix(1);
  double v = 0;
  const auto [end, ec] = std::from_chars(d.data(), d.data() + d.size(), v);
  if (ec != std::errc{} || end != d.data() + d.size()) return std::nullopt;
  return v;
}

/// Walks one line: each call consumes on success and leaves the cursor alone on failure.
struct scanner {
  std::string_view s;
  std::size_t i = 0;

  void skip_spaces() noexcept {
    while (i < s.size() && is_space(s[i])) ++i;
  }
  bool done() noexcept {
    skip_spaces();
    return i == s.size();
  }
  /// The literal `t` after optional spaces.
  bool lit(std::string_view t) noexcept {
    skip_spaces();
    if (s.substr(i).starts_with(t)) {
      i += t.size();
      return true;
    }
    return false;
  }
  /// A number after optional spaces: sign, digits, '.', exponent, thousands commas; "nan"/"inf".
  std::optional<double> number() {
    skip_spaces();
    std::size_t j = i;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    const bool negative = j > i && s[i] == '-';
    for (std::string_view word : {"nan", "inf"})
      if (s.substr(j).starts_with(word)) {
        const double v = word == "nan" ? NAN : INFINITY;
        i = j + word.size();
        return negative ? -v : v;
      }
    const std::size_t digits_from = j;
    bool exp = false;
    while (j < s.size()) {
      const char c = s[j];
      if (std::isdigit(static_cast<unsigned char>(c)) || c == '.' ||
          (c == ',' && j + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[j + 1])))) {
        ++j;
      } else if ((c == 'e' || c == 'E') && !exp && j > digits_from && j + 1 < s.size() &&
                 (std::isdigit(static_cast<unsigned char>(s[j + 1])) || s[j + 1] == '-' ||
                  s[j + 1] == '+')) {
        exp = true;
        j += 2;
      } else {
        break;
      }
    }
    if (j == digits_from) return std::nullopt;
    const auto v = to_number(s.substr(i, j - i));
    if (v) i = j;
    return v;
  }
  /// A non-negative whole number that fits in uint64.
  std::optional<std::uint64_t> whole() {
    const std::size_t at = i;
    const auto v = number();
    if (!v || !(*v >= 0 && *v < 18446744073709551616.0 && *v == std::floor(*v))) {
      i = at;
      return std::nullopt;
    }
    return std::uint64_t(*v);
  }
  /// Plain digits (no sign, separator or fraction) as a whole number; for dates and times.
  std::optional<std::uint64_t> digits() {
    skip_spaces();
    std::size_t j = i;
    std::uint64_t v = 0;
    while (j < s.size() && j - i < 18 && std::isdigit(static_cast<unsigned char>(s[j])))
      v = v * 10 + std::uint64_t(s[j++] - '0');
    if (j == i) return std::nullopt;
    i = j;
    return v;
  }
  /// Everything up to (not including) `stop`, or to the end; trimmed.
  std::string_view until(char stop) noexcept {
    skip_spaces();
    const std::size_t from = i;
    while (i < s.size() && s[i] != stop) ++i;
    return trim(s.substr(from, i - from));
  }
  std::string_view rest() noexcept { return trim(s.substr(std::min(i, s.size()))); }
};

}  // namespace trainkit::report::detail
