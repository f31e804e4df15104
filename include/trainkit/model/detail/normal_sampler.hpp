// trainkit/model/detail/normal_sampler.hpp — standard normal draws that are the same with every
// standard library.
//
// std::normal_distribution's algorithm is implementation-defined, so the same seed would give
// different GPT-2 weights with libstdc++ and libc++. std::mt19937_64's output is fixed by the
// standard; Box–Muller over it depends only on log/sqrt/sin/cos, which agree to the last bit or so
// across C libraries.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

namespace trainkit::model::detail {

class normal_sampler {
 public:
  explicit normal_sampler(std::uint64_t seed) : rng_(seed) {}

  /// The next N(0, 1) draw; draws come in Box–Muller pairs (cos, then sin).
  double operator()() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - uniform();  // (0, 1]: log(u1) is finite
    const double u2 = uniform();
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 6.283185307179586 * u2;
    spare_ = radius * std::sin(angle);
    has_spare_ = true;
    return radius * std::cos(angle);
  }

 private:
  double uniform() { return double(rng_() >> 11) * 0x1.0p-53; }  // [0, 1), 53 random bits

  std::mt19937_64 rng_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace trainkit::model::detail
