// trainkit/tokenizer/detail/sha256.hpp — SHA-256 (FIPS 180-4), for checking vocabulary files.
//
// The tokenizer refuses a vocabulary whose encoder.json / vocab.bpe differ from the standard GPT-2
// files: a silently different vocabulary would train a model on ids no other tool agrees with.
// The library may not depend on a crypto library, and hashing two small files once needs no
// speed, so this is the plain reference algorithm of FIPS 180-4 section 6.2, checked in the tests
// against the NIST example vectors.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace trainkit::tokenizer::detail {

/// Incremental SHA-256: `update` any number of times, then `digest` once.
class sha256 {
 public:
  sha256() noexcept { reset(); }

  void reset() noexcept {
    state_ = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
              0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
    total_bytes_ = 0;
    buffered_ = 0;
  }

  void update(const void* data, std::size_t n) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    total_bytes_ += n;
    if (buffered_ > 0) {
      const std::size_t take = n < 64 - buffered_ ? n : 64 - buffered_;
      for (std::size_t i = 0; i < take; ++i) block_[buffered_ + i] = p[i];
      buffered_ += take;
      p += take;
      n -= take;
      if (buffered_ < 64) return;
      compress(block_.data());
      buffered_ = 0;
    }
    for (; n >= 64; n -= 64, p += 64) compress(p);
    for (std::size_t i = 0; i < n; ++i) block_[i] = p[i];
    buffered_ = n;
  }

  void update(std::string_view s) noexcept { update(s.data(), s.size()); }

  /// The 32-byte digest of everything updated so far (the object must be reset to reuse it).
  std::array<std::uint8_t, 32> digest() noexcept {
    const std::uint64_t bit_length = total_bytes_ * 8;
    // Padding: one 1 bit, zeros up to 56 mod 64 bytes, then the message length in bits (64-bit
    // big-endian).
    const unsigned char one = 0x80;
    update(&one, 1);
    const unsigned char zero = 0;
    while (buffered_ != 56) update(&zero, 1);
    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(bit_length >> (56 - 8 * i));
    update(length, 8);
    std::array<std::uint8_t, 32> out{};
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 4; ++j)
        out[4 * i + j] = static_cast<std::uint8_t>(state_[i] >> (24 - 8 * j));
    return out;
  }

  /// Lower-case hex of `digest()`, the form sha256sum and SHA256SUMS files use.
  std::string hex_digest() {
    static constexpr char hex[] = "0123456789abcdef";
    std::string s;
    for (std::uint8_t b : digest()) {
      s += hex[b >> 4];
      s += hex[b & 15];
    }
    return s;
  }

 private:
  static constexpr std::uint32_t rotr(std::uint32_t x, int n) noexcept {
    return (x >> n) | (x << (32 - n));
  }

  void compress(const unsigned char* p) noexcept {
    static constexpr std::uint32_t k[64] = {
        0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u,
        0xab1c5ed5u, 0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu,
        0x9bdc06a7u, 0xc19bf174u, 0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu,
        0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau, 0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u,
        0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u, 0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu,
        0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u, 0xa2bfe8a1u, 0xa81a664bu,
        0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u, 0x19a4c116u,
        0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
        0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u,
        0xc67178f2u};
    std::uint32_t w[64];
    for (int t = 0; t < 16; ++t)
      w[t] = (std::uint32_t{p[4 * t]} << 24) | (std::uint32_t{p[4 * t + 1]} << 16) |
             (std::uint32_t{p[4 * t + 2]} << 8) | std::uint32_t{p[4 * t + 3]};
    for (int t = 16; t < 64; ++t) {
      const std::uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      const std::uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    std::uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
    std::uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
    for (int t = 0; t < 64; ++t) {
      const std::uint32_t t1 =
          h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[t] + w[t];
      const std::uint32_t t2 =
          (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state_[0] += a;
    state_[1] += b;
    state_[2] += c;
    state_[3] += d;
    state_[4] += e;
    state_[5] += f;
    state_[6] += g;
    state_[7] += h;
  }

  std::array<std::uint32_t, 8> state_{};
  std::array<unsigned char, 64> block_{};
  std::uint64_t total_bytes_ = 0;
  std::size_t buffered_ = 0;
};

/// Lower-case hex SHA-256 of `bytes`.
inline std::string sha256_hex(std::string_view bytes) {
  sha256 h;
  h.update(bytes);
  return h.hex_digest();
}

}  // namespace trainkit::tokenizer::detail
