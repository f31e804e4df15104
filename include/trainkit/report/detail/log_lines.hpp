// trainkit/report/detail/log_lines.hpp — log lines as people paste them, reduced to the tool's
// text.
//
// A training program prints "iter 10: loss 3.2, time 893.76ms, mfu 16.68%", but the line that
// reaches `gpt_fineweb report` is often wrapped: a timestamp ("2023-03-22 09:30:39 ",
// "[2026-05-23 10:11:12]", "12:01:02.345 "), a launcher's rank tag (torchrun's "[rank0]:" and
// "[default0]:", srun's or torchrun --tee's "0: ", mpirun's "[1,0]<stdout>:"), a Python logging
// prefix ("[titan] DATE TIME,ms - root - INFO - ", "DATE TIME,ms - root - INFO - ", "INFO:root:",
// glog's "I0305 07:36:08.276310 1957 run.py:792] ", "[I][components/metrics:526:log] "), a
// Markdown quote ("> "), ANSI colour codes, '\r' progress overwrites and CRLF line ends. This
// header strips all of that, keeps the timestamp it found (so a reader can measure time between
// lines) and the rank tag, and keeps one rank's lines when every rank printed its own copy (no
// rank filter): the rank with the most lines, the lowest of those. Each reader then matches its
// printf format on the text.
//
// Everything is a bounded left-to-right walk (no regex): the readers are fuzzed.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/report/detail/log_scan.hpp"

namespace trainkit::report::detail {

/// One line of a log reduced to the tool's own text.
struct log_line {
  std::string text;             // the tool's text: prefixes, ANSI codes, '\r' pieces removed
  std::size_t line = 0;         // 1-based line of the file
  std::optional<long long> ms;  // the prefix's timestamp in ms (date-less: since a midnight)
  int rank = -1;                // the launcher's rank tag; -1 when none
};

/// A log's lines after normalisation.
struct normalised_log {
  std::vector<log_line> lines;  // non-empty lines of the kept rank (and untagged ones)
  std::size_t total = 0;        // lines in the file
  std::size_t other_ranks = 0;  // lines dropped because another rank printed them too
  int rank = -1;                // the rank kept; -1 when no line had a rank tag
  int ranks_seen = 0;           // distinct rank tags seen
};

/// `s` without ANSI escape sequences (CSI "ESC [ ... final", OSC "ESC ] ... BEL", and lone ESC).
inline std::string strip_escapes(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\x1b') {
      out += s[i];
      continue;
    }
    if (i + 1 < s.size() && s[i + 1] == '[') {
      std::size_t j = i + 2;
      while (j < s.size() && (unsigned char)s[j] >= 0x20 && (unsigned char)s[j] <= 0x3f) ++j;
      while (j < s.size() && (unsigned char)s[j] >= 0x20 && (unsigned char)s[j] <= 0x2f) ++j;
      i = j < s.size() ? j : s.size();  // the final byte (or the end of a cut-off sequence)
    } else if (i + 1 < s.size() && s[i + 1] == ']') {
      std::size_t j = i + 2;
      while (j < s.size() && s[j] != '\x07' && s[j] != '\x1b') ++j;
      i = j < s.size() && s[j] == '\x1b' ? j + 1 : j;
    } else {
      ++i;  // ESC and the one character it introduces
    }
  }
  return out;
}

/// The piece of a line a terminal shows after '\r' overwrites: the last non-blank one.
inline std::string_view last_overwrite(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n')) s.remove_suffix(1);
  for (;;) {
    const auto cr = s.rfind('\r');
    if (cr == std::string_view::npos) return s;
    if (!trim(s.substr(cr + 1)).empty()) return s.substr(cr + 1);
    s = s.substr(0, cr);
  }
}

namespace lines_impl {

inline bool digit_at(std::string_view s, std::size_t i) {
  return i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]));
}

/// `n` digits at `i` as a number; nullopt unless all are digits.
inline std::optional<int> fixed_digits(std::string_view s, std::size_t i, std::size_t n) {
  if (i + n > s.size()) return std::nullopt;
  int v = 0;
  for (std::size_t k = 0; k < n; ++k) {
    if (!digit_at(s, i + k)) return std::nullopt;
    v = v * 10 + (s[i + k] - '0');
  }
  return v;
}

/// "HH:MM:SS" with an optional ",mmm" / ".ffffff" fraction at `i`; ms of the day and the length.
inline std::optional<std::pair<long long, std::size_t>> time_of_day(std::string_view s,
                                                                    std::size_t i) {
  std::size_t j = i;
  const auto h = fixed_digits(s, j, 2);
  if (!h || j + 2 >= s.size() || s[j + 2] != ':') return std::nullopt;
  const auto m = fixed_digits(s, j + 3, 2);
  if (!m || j + 5 >= s.size() || s[j + 5] != ':') return std::nullopt;
  const auto sec = fixed_digits(s, j + 6, 2);
  if (!sec || *h > 23 || *m > 59 || *sec > 60) return std::nullopt;
  j += 8;
  long long ms = ((long long)*h * 3600 + *m * 60 + *sec) * 1000;
  if (j + 1 < s.size() && (s[j] == ',' || s[j] == '.') && digit_at(s, j + 1)) {
    ++j;
    long long frac = 0, scale = 1;
    std::size_t k = 0;
    for (; digit_at(s, j) && k < 9; ++j, ++k) {
      frac = frac * 10 + (s[j] - '0');
      scale *= 10;
    }
    while (digit_at(s, j)) ++j;
    ms += frac * 1000 / scale;
  }
  return std::pair{ms, j - i};
}

/// Days from 1970-01-01 to y-m-d (proleptic Gregorian; H. Hinnant's algorithm).
inline long long days_from_civil(long long y, unsigned m, unsigned d) noexcept {
  y -= m <= 2;
  const long long era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = unsigned(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (long long)doe - 719468;
}

/// A timestamp at the start of `s`: "YYYY-MM-DD[ T]HH:MM:SS[,.frac][Z|+hh:mm]", "YYYY/MM/DD ...",
/// or "HH:MM:SS[.frac]", optionally in brackets. Its ms and length (with a closing bracket).
struct stamp {
  long long ms = 0;
  bool dated = false;
  std::size_t length = 0;
};

inline std::optional<stamp> timestamp_at(std::string_view s) {
  std::size_t i = 0;
  const bool bracket = !s.empty() && s[0] == '[';
  if (bracket) ++i;
  stamp st;
  const auto y = fixed_digits(s, i, 4);
  if (y && i + 4 < s.size() && (s[i + 4] == '-' || s[i + 4] == '/')) {
    const char sep = s[i + 4];
    const auto mo = fixed_digits(s, i + 5, 2);
    const auto d = fixed_digits(s, i + 8, 2);
    if (!mo || !d || i + 7 >= s.size() || s[i + 7] != sep || *mo < 1 || *mo > 12 || *d < 1 ||
        *d > 31)
      return std::nullopt;
    i += 10;
    if (i >= s.size() || (s[i] != ' ' && s[i] != 'T')) return std::nullopt;
    ++i;
    const auto t = time_of_day(s, i);
    if (!t) return std::nullopt;
    i += t->second;
    st.ms = days_from_civil(*y, unsigned(*mo), unsigned(*d)) * 86'400'000LL + t->first;
    st.dated = true;
  } else {
    const auto t = time_of_day(s, i);
    if (!t) return std::nullopt;
    i += t->second;
    st.ms = t->first;
  }
  if (i < s.size() && s[i] == 'Z') ++i;
  if (i + 5 < s.size() + 0 && (s[i] == '+' || s[i] == '-') && fixed_digits(s, i + 1, 2) &&
      s[i + 3] == ':' && fixed_digits(s, i + 4, 2))
    i += 6;
  if (bracket) {
    if (i >= s.size() || s[i] != ']') return std::nullopt;
    ++i;
  }
  // A timestamp ends at a separator, not inside a word or number.
  if (i < s.size() && std::isalnum(static_cast<unsigned char>(s[i]))) return std::nullopt;
  st.length = i;
  return st;
}

inline bool is_level(std::string_view w) {
  for (std::string_view l : {"DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL", "NOTICE"})
    if (w == l) return true;
  return false;
}

/// A rank tag at the start of `s`: "[rank3]:", "[default3]:", "[1,3]<stdout>:", "3: ",
/// "rank3: ", "rank3]:" (a paste that lost the "["). The rank and the tag's length.
inline std::optional<std::pair<int, std::size_t>> rank_tag(std::string_view s) {
  auto number_at = [&](std::size_t i, std::size_t& end) -> std::optional<int> {
    std::size_t j = i;
    int v = 0;
    while (digit_at(s, j) && j - i < 7) v = v * 10 + (s[j++] - '0');
    if (j == i || digit_at(s, j)) return std::nullopt;
    end = j;
    return v;
  };
  std::size_t end = 0;
  for (std::string_view open : {"[rank", "[default", "[Rank ", "[RANK "}) {
    if (!s.starts_with(open)) continue;
    const auto r = number_at(open.size(), end);
    if (r && end + 1 < s.size() + 1 && end < s.size() && s[end] == ']') {
      std::size_t j = end + 1;
      if (j < s.size() && s[j] == ':') ++j;
      return std::pair{*r, j};
    }
  }
  if (s.starts_with("[")) {  // mpirun --tag-output: [jobid,rank]<stdout>:
    std::size_t j = 0;
    if (number_at(1, j) && j < s.size() && s[j] == ',') {
      const auto r = number_at(j + 1, end);
      if (r && end < s.size() && s[end] == ']') {
        std::size_t k = end + 1;
        for (std::string_view stream : {"<stdout>:", "<stderr>:", "<stddiag>:"})
          if (s.substr(k).starts_with(stream)) return std::pair{*r, k + stream.size()};
      }
    }
  }
  if (s.starts_with("rank")) {
    const auto r = number_at(4, end);
    if (r && end + 1 < s.size() && s[end] == ':' && s[end + 1] == ' ')
      return std::pair{*r, end + 2};
    // "rank0]:" - torchrun's tag with its "[" lost where a paste starts one character late
    // (pytorch/torchtitan#153's log opens so).
    if (r && end + 1 < s.size() && s[end] == ']' && s[end + 1] == ':')
      return std::pair{*r, end + 2};
  }
  const auto r = number_at(0, end);  // "0: " (srun -l, torchrun --tee with a filter)
  if (r && end + 1 < s.size() && s[end] == ':' && s[end + 1] == ' ') return std::pair{*r, end + 2};
  return std::nullopt;
}

/// Python logging's " - name - LEVEL - " after the time; the length, or 0.
inline std::size_t name_level_dash(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  if (!s.substr(i).starts_with("- ") && !s.substr(i).starts_with("| ")) {
    // "LEVEL name: " / "LEVEL " (loguru-like) or nothing
    return 0;
  }
  const char sep = s[i];
  i += 2;
  // one or two fields before the message: "name - LEVEL - " or "LEVEL - "
  for (int field = 0; field < 2; ++field) {
    const std::size_t from = i;
    while (i < s.size() && s[i] != ' ') ++i;
    const std::string_view word = s.substr(from, i - from);
    if (i + 2 < s.size() + 0 && s[i] == ' ' && s[i + 1] == sep && s[i + 2] == ' ') {
      i += 3;
      if (is_level(word)) return i;
    } else {
      return 0;
    }
  }
  return 0;
}

/// One prefix stripped from the front of `s` into `out`; false when none is there.
inline bool strip_one(std::string_view& s, log_line& out) {
  if (s.empty()) return false;
  if (s[0] == '>' && (s.size() == 1 || s[1] == ' ')) {  // a Markdown quote
    s.remove_prefix(1);
    return true;
  }
  if (const auto r = rank_tag(s)) {
    if (out.rank < 0) out.rank = r->first;
    s.remove_prefix(r->second);
    return true;
  }
  if (s.starts_with("[titan]")) {
    s.remove_prefix(7);
    return true;
  }
  // glog: "I0305 07:36:08.276310 1957 file.py:792] "
  if (s.size() > 6 && std::string_view("DIWEF").find(s[0]) != std::string_view::npos &&
      fixed_digits(s, 1, 4) && s[5] == ' ') {
    if (const auto t = time_of_day(s, 6)) {
      const auto close = s.find("] ", 6 + t->second);
      if (close != std::string_view::npos && close < 120) {
        out.ms = t->first;
        s.remove_prefix(close + 2);
        return true;
      }
    }
  }
  // "[I][components/metrics:526:log] ", "[INFO] ", "[2026-...]" handled below
  if (s.size() > 3 && s[0] == '[' && s[2] == ']' &&
      std::string_view("DIWEC").find(s[1]) != std::string_view::npos) {
    std::size_t k = 3;
    if (k < s.size() && s[k] == '[') {
      const auto close = s.find(']', k);
      if (close == std::string_view::npos || close > 160) return false;
      k = close + 1;
    }
    s.remove_prefix(k);
    return true;
  }
  if (s[0] == '[') {
    const auto close = s.find(']');
    if (close != std::string_view::npos && is_level(s.substr(1, close - 1))) {
      s.remove_prefix(close + 1);
      if (!s.empty() && s[0] == ':') s.remove_prefix(1);
      return true;
    }
  }
  // Python's default "INFO:root:message"
  for (std::string_view l : {"DEBUG:", "INFO:", "WARNING:", "ERROR:", "CRITICAL:"}) {
    if (!s.starts_with(l)) continue;
    const auto colon = s.find(':', l.size());
    if (colon != std::string_view::npos && colon - l.size() < 64 &&
        s.substr(l.size(), colon - l.size()).find(' ') == std::string_view::npos) {
      s.remove_prefix(colon + 1);
      return true;
    }
  }
  if (const auto st = timestamp_at(s)) {
    out.ms = st->ms;
    s.remove_prefix(st->length);
    if (const auto n = name_level_dash(s)) {
      s.remove_prefix(n);
    } else {
      while (!s.empty() && (s[0] == ' ' || s[0] == '\t')) s.remove_prefix(1);
      if (s.starts_with("- ") || s.starts_with("| ") || s.starts_with(": ")) s.remove_prefix(2);
    }
    return true;
  }
  // "LEVEL - msg" or "root - LEVEL - msg" without a time
  if (const auto n = name_level_dash(std::string(" - ").append(s.substr(0, 80)))) {
    if (n > 3) {
      s.remove_prefix(n - 3);
      return true;
    }
  }
  return false;
}

}  // namespace lines_impl

/// One raw line reduced to the tool's text, with its timestamp and rank tag if it had any.
inline log_line normalise_line(std::string_view raw, std::size_t line_no) {
  log_line out;
  out.line = line_no;
  const std::string clean = strip_escapes(last_overwrite(raw));
  std::string_view s = clean;
  for (int k = 0; k < 8; ++k) {  // prefixes nest ("[rank0]:[titan] DATE - root - INFO - ")
    while (!s.empty() && (s[0] == ' ' || s[0] == '\t')) s.remove_prefix(1);
    if (!lines_impl::strip_one(s, out)) break;
  }
  out.text = std::string(trim(s));
  return out;
}

/// Every line of a log normalised; lines of ranks other than the one kept (most lines, then
/// lowest) are dropped (counted), untagged lines kept; date-less timestamps that go back by more
/// than 12 hours are taken to have crossed midnight.
inline normalised_log normalise_log(std::span<const std::string> raw) {
  normalised_log out;
  out.total = raw.size();
  std::vector<log_line> all;
  all.reserve(raw.size());
  std::vector<int> ranks;
  for (std::size_t n = 0; n < raw.size(); ++n) {
    auto l = normalise_line(raw[n], n + 1);
    if (l.text.empty()) continue;
    if (l.rank >= 0 && ranks.size() < 4096) {
      bool seen = false;
      for (int r : ranks) seen = seen || r == l.rank;
      if (!seen) ranks.push_back(l.rank);
    }
    all.push_back(std::move(l));
  }
  out.ranks_seen = int(ranks.size());
  // The rank with the most lines (a pasted excerpt may cut one rank's copy short), ties to the
  // lowest: with every rank logging, each prints the same lines.
  std::vector<std::size_t> count(ranks.size(), 0);
  for (const auto& l : all)
    for (std::size_t k = 0; k < ranks.size(); ++k)
      if (l.rank == ranks[k]) ++count[k];
  std::size_t best = 0;
  for (std::size_t k = 1; k < ranks.size(); ++k)
    if (count[k] > count[best] || (count[k] == count[best] && ranks[k] < ranks[best])) best = k;
  if (!ranks.empty()) out.rank = ranks[best];
  long long day = 0, last = -1;
  for (auto& l : all) {
    if (l.rank >= 0 && l.rank != out.rank) {
      ++out.other_ranks;
      continue;
    }
    if (l.ms && *l.ms < 86'400'000LL * 2) {  // a time of day: keep it monotonic across midnight
      if (last >= 0 && *l.ms + day < last - 43'200'000LL) day += 86'400'000LL;
      l.ms = *l.ms + day;
      last = *l.ms;
    }
    out.lines.push_back(std::move(l));
  }
  return out;
}

}  // namespace trainkit::report::detail
