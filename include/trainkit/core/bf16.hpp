// trainkit/core/bf16.hpp — a host-side bfloat16 storage type.
//
// Used where bf16 crosses the host: llm.c version-5 model files, checkpoints of CUDA models and
// CPU references for bf16 kernels. Conversion rounds to nearest even, as `__float2bfloat16` does,
// and keeps NaN a NaN (a plain truncation of a NaN payload could produce infinity).
#pragma once

#include <bit>
#include <cstdint>

namespace trainkit {

struct bf16 {
  std::uint16_t bits = 0;

  static constexpr bf16 from_bits(std::uint16_t b) noexcept { return bf16{b}; }

  static constexpr bf16 from_float(float f) noexcept {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{std::uint16_t((u >> 16) | 0x0040u)};  // NaN
    const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
    return bf16{std::uint16_t((u + rounding) >> 16)};
  }

  constexpr float to_float() const noexcept {
    return std::bit_cast<float>(std::uint32_t(bits) << 16);
  }

  friend constexpr bool operator==(bf16, bf16) = default;
};

static_assert(sizeof(bf16) == 2);

}  // namespace trainkit
