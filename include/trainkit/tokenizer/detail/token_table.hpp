// trainkit/tokenizer/detail/token_table.hpp — byte string -> token id lookup for BPE.
//
// Byte-pair merging asks "is this byte string a token, and of which rank?" once per candidate
// pair, so the lookup dominates encoding time. std::unordered_map<std::string, ...> would hash
// through std::hash and chase a node pointer per probe; this is an open-addressing table over one
// byte arena with a 16-bit hash tag per slot, so a miss rarely touches the key bytes at all.
// Filled once when the vocabulary loads, then only read (safe to share between threads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainkit::tokenizer::detail {

/// 64-bit hash of a short byte string: 8-byte words folded with multiply-xorshift rounds
/// (constants from splitmix64), good enough for a fixed table of ~50k keys.
inline std::uint64_t hash_bytes(const char* p, std::size_t n) noexcept {
  std::uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xFF51AFD7ED558CCDull);
  while (n >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    std::uint64_t v = 0;
    std::memcpy(&v, p, n);
    h = (h ^ v) * 0x94D049BB133111EBull;
    h ^= h >> 29;
  }
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 32);
}

class token_table {
 public:
  static constexpr std::uint32_t not_found = 0xFFFFFFFFu;

  /// Sizes the table for `n` keys (load factor <= 0.5).
  explicit token_table(std::size_t n = 0) { rehash(n); }

  /// Adds `key` -> `id`; returns false (and changes nothing) when `key` is already present.
  bool insert(std::string_view key, std::uint32_t id) {
    if (key.empty() || key.size() > 0xFFFF) return false;
    if ((count_ + 1) * 2 > slots_.size()) grow();
    const std::uint64_t h = hash_bytes(key.data(), key.size());
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      slot& s = slots_[i];
      if (s.length == 0) {
        s.offset = static_cast<std::uint32_t>(arena_.size());
        s.id = id;
        s.length = static_cast<std::uint16_t>(key.size());
        s.tag = static_cast<std::uint16_t>(h >> 48);
        arena_.append(key);
        ++count_;
        return true;
      }
      if (matches(s, h, key.data(), key.size())) return false;
    }
  }

  /// Id of the token whose bytes are [p, p+n), or not_found.
  std::uint32_t find(const char* p, std::size_t n) const noexcept {
    const std::uint64_t h = hash_bytes(p, n);
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      const slot& s = slots_[i];
      if (s.length == 0) return not_found;
      if (matches(s, h, p, n)) return s.id;
    }
  }
  std::uint32_t find(std::string_view key) const noexcept { return find(key.data(), key.size()); }

  std::size_t size() const noexcept { return count_; }

 private:
  struct slot {
    std::uint32_t offset = 0;  // of the key in arena_
    std::uint32_t id = 0;
    std::uint16_t length = 0;  // 0 = empty slot (no token is the empty string)
    std::uint16_t tag = 0;     // top 16 bits of the key's hash
  };

  bool matches(const slot& s, std::uint64_t h, const char* p, std::size_t n) const noexcept {
    return s.tag == static_cast<std::uint16_t>(h >> 48) && s.length == n &&
           std::memcmp(arena_.data() + s.offset, p, n) == 0;
  }

  void rehash(std::size_t n) {
    std::size_t cap = 16;
    while (cap < 2 * n + 2) cap *= 2;
    slots_.assign(cap, slot{});
    mask_ = cap - 1;
  }

  void grow() {
    std::vector<slot> old = std::move(slots_);
    rehash(old.size());  // doubles: capacity >= 2 * old capacity + 2
    for (const slot& s : old) {
      if (s.length == 0) continue;
      const std::uint64_t h = hash_bytes(arena_.data() + s.offset, s.length);
      std::size_t i = h & mask_;
      while (slots_[i].length != 0) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::vector<slot> slots_;
  std::string arena_;
  std::size_t mask_ = 0;
  std::size_t count_ = 0;
};

}  // namespace trainkit::tokenizer::detail
