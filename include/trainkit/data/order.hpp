// trainkit/data/order.hpp — the order in which a data source visits its token windows.
//
// `sequential` is llm.c's loader order (so llm.c and trainkit see the same batches from the same
// files); `random` visits every window once per epoch in a seeded permutation. The permutation is
// built from std::mt19937_64 (whose output the standard fixes) with our own Fisher–Yates and our
// own bounded draw, because std::shuffle and std::uniform_int_distribution are implementation
// defined: a run resumed on another standard library must still see the same batches.
#pragma once

#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainkit/core/error.hpp"

namespace trainkit::data {

enum class order_kind { sequential, random };

constexpr std::string_view to_string(order_kind o) noexcept {
  return o == order_kind::sequential ? "sequential" : "random";
}

/// Parses "sequential" / "random" (a value for mmap_source_config.order); config_error names
/// the field and the bad value.
inline order_kind parse_order(std::string_view s) {
  if (s == "sequential") return order_kind::sequential;
  if (s == "random") return order_kind::random;
  throw config_error("mmap_source_config.order '" + std::string(s) +
                     "' is not a data order (sequential|random)");
}

/// Uniform integer in [0, n) from a 64-bit engine, by rejection: draws below 2^64 mod n are
/// discarded so every residue is equally likely (no modulo bias). n must be > 0.
inline std::uint64_t uniform_below(std::mt19937_64& engine, std::uint64_t n) {
  const std::uint64_t reject_below = (0 - n) % n;  // 2^64 mod n
  for (;;) {
    const std::uint64_t r = engine();
    if (r >= reject_below) return r % n;
  }
}

/// Fisher–Yates shuffle of `v` in place, driven by `engine` (Knuth's algorithm P, high to low).
template <class T>
void shuffle_in_place(std::vector<T>& v, std::mt19937_64& engine) {
  for (std::size_t i = v.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(uniform_below(engine, i));
    std::swap(v[i - 1], v[j]);
  }
}

/// The permutation of window ids [0, n) that epoch `epoch` of a run seeded with `seed` visits.
/// Each epoch gets its own engine seeded with seed + epoch, so any epoch can be rebuilt directly
/// on resume without replaying the earlier ones.
inline std::vector<std::uint32_t> epoch_permutation(std::uint32_t n, std::uint64_t seed,
                                                    std::uint64_t epoch) {
  std::vector<std::uint32_t> perm(n);
  std::iota(perm.begin(), perm.end(), std::uint32_t{0});
  std::mt19937_64 engine(seed + epoch);
  shuffle_in_place(perm, engine);
  return perm;
}

}  // namespace trainkit::data
