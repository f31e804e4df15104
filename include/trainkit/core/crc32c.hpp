// trainkit/core/crc32c.hpp — CRC-32C (Castagnoli), the checksum in checkpoint manifests.
//
// CRC-32C rather than zlib's CRC-32 because it is what storage systems (ext4, iSCSI, LevelDB,
// Parquet) use and it has a hardware instruction on x86 (SSE4.2) and ARMv8. On x86-64 the
// `crc32` instruction is used when the CPU has it (checked once at run time, so a binary built
// for baseline x86-64 still uses it): one 8-byte step per ~3 cycles, several GB/s, where the
// portable slicing-by-8 tables (Intel's technique, as in Mark Adler's crc32c.c) reach ~1 GB/s —
// enough to keep up with a disk, but a checkpoint's CRC thread then takes a core from training
// for the whole write on a small machine. The table version stays as the fallback and as the
// reference the hardware path is tested against. `crc32c_extend` allows streaming.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define TRAINKIT_CRC32C_HAS_SSE42 1
#endif

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace trainkit {

namespace detail {

inline constexpr std::uint32_t crc32c_poly = 0x82f63b78u;  // reflected Castagnoli polynomial

constexpr std::array<std::array<std::uint32_t, 256>, 8> make_crc32c_tables() {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  for (std::uint32_t n = 0; n < 256; ++n) {
    std::uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ crc32c_poly : c >> 1;
    t[0][n] = c;
  }
  for (std::uint32_t n = 0; n < 256; ++n) {
    std::uint32_t c = t[0][n];
    for (int k = 1; k < 8; ++k) {
      c = t[0][c & 0xff] ^ (c >> 8);
      t[k][n] = c;
    }
  }
  return t;
}

inline constexpr auto crc32c_tables = make_crc32c_tables();

/// The portable CRC-32C (slicing-by-8 tables); same contract as `crc32c_extend`.
inline std::uint32_t crc32c_extend_table(std::uint32_t crc, const void* data,
                                         std::size_t n) noexcept {
  const auto& t = crc32c_tables;
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t c = ~crc;
  while (n >= 8) {
    std::uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;  // little-endian hosts only (x86-64, aarch64): checked in the test
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
        t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) c = t[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  return ~c;
}

#ifdef TRAINKIT_CRC32C_HAS_SSE42
/// CRC-32C with the SSE4.2 `crc32` instruction; same contract as `crc32c_extend`. Only call it
/// where `cpu_has_sse42()`: the target attribute compiles it for SSE4.2 whatever -march says.
__attribute__((target("sse4.2"))) inline std::uint32_t crc32c_extend_sse42(std::uint32_t crc,
                                                                           const void* data,
                                                                           std::size_t n) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t c = ~crc;
  // Bytes up to an 8-byte boundary first, so no 8-byte load straddles a cache line.
  while (n > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7) != 0) {
    c = _mm_crc32_u8(c, *p++);
    --n;
  }
  std::uint64_t c64 = c;
  while (n >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
    p += 8;
    n -= 8;
  }
  c = static_cast<std::uint32_t>(c64);
  while (n--) c = _mm_crc32_u8(c, *p++);
  return ~c;
}

inline bool cpu_has_sse42() noexcept {
  static const bool has = [] {
    __builtin_cpu_init();  // needed when first asked from a static initializer
    return __builtin_cpu_supports("sse4.2") != 0;
  }();
  return has;
}
#endif

}  // namespace detail

/// Which implementation `crc32c_extend` uses on this machine.
enum class crc32c_engine { table, sse42 };

inline crc32c_engine crc32c_engine_in_use() noexcept {
#ifdef TRAINKIT_CRC32C_HAS_SSE42
  if (detail::cpu_has_sse42()) return crc32c_engine::sse42;
#endif
  return crc32c_engine::table;
}

/// Continues a CRC-32C over more bytes: crc32c(a+b) == crc32c_extend(crc32c(a), b).
inline std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t n) noexcept {
#ifdef TRAINKIT_CRC32C_HAS_SSE42
  if (detail::cpu_has_sse42()) return detail::crc32c_extend_sse42(crc, data, n);
#endif
  return detail::crc32c_extend_table(crc, data, n);
}

/// CRC-32C of a byte range. crc32c("123456789") == 0xe3069283.
inline std::uint32_t crc32c(const void* data, std::size_t n) noexcept {
  return crc32c_extend(0, data, n);
}

}  // namespace trainkit
