// Tests for trainkit/core: CRC-32C, bf16 rounding, dtype names, the device peak table, timing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "trainkit/core/batch.hpp"
#include "trainkit/core/bf16.hpp"
#include "trainkit/core/crc32c.hpp"
#include "trainkit/core/device_info.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/core/timing.hpp"

namespace tk = trainkit;

TEST(Crc32c, KnownVectors) {
  // RFC 3720 appendix B.4 check value and iSCSI test patterns.
  EXPECT_EQ(tk::crc32c("123456789", 9), 0xe3069283u);
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xff), inc(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(tk::crc32c(zeros.data(), 32), 0x8a9136aau);
  EXPECT_EQ(tk::crc32c(ones.data(), 32), 0x62a8ab43u);
  EXPECT_EQ(tk::crc32c(inc.data(), 32), 0x46dd794eu);
  EXPECT_EQ(tk::crc32c(nullptr, 0), 0u);
}

TEST(Crc32c, ExtendEqualsWholeAtEverySplit) {
  std::mt19937 rng(7);
  std::vector<unsigned char> data(1000);
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  const std::uint32_t whole = tk::crc32c(data.data(), data.size());
  for (std::size_t split : {0u, 1u, 7u, 8u, 9u, 500u, 999u, 1000u}) {
    const std::uint32_t a = tk::crc32c(data.data(), split);
    EXPECT_EQ(tk::crc32c_extend(a, data.data() + split, data.size() - split), whole) << split;
  }
}

TEST(Crc32c, DetectsSingleBitFlip) {
  std::vector<unsigned char> data(4096, 0x5a);
  const auto before = tk::crc32c(data.data(), data.size());
  data[1234] ^= 0x10;
  EXPECT_NE(tk::crc32c(data.data(), data.size()), before);
}

// Random bytes and a random starting CRC, so neither path can pass by chance on zeros.
static std::vector<unsigned char> random_bytes(std::size_t n, std::mt19937& rng) {
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

TEST(Crc32c, TableMatchesTheKnownVector) {
  EXPECT_EQ(tk::detail::crc32c_extend_table(0, "123456789", 9), 0xe3069283u);
}

#ifdef TRAINKIT_CRC32C_HAS_SSE42
// The hardware path against the table reference: every length 0..300 at every alignment within
// a word (its head, 8-byte and tail loops all take part), from random starting CRCs.
TEST(Crc32c, Sse42EqualsTheTableAtEveryLengthAndAlignment) {
  if (!tk::detail::cpu_has_sse42()) GTEST_SKIP() << "this CPU has no SSE4.2";
  std::mt19937 rng(11);
  const std::vector<unsigned char> data = random_bytes(300 + 16, rng);
  for (std::size_t align = 0; align < 16; ++align)
    for (std::size_t n = 0; n <= 300; ++n) {
      const std::uint32_t seed = rng();
      ASSERT_EQ(tk::detail::crc32c_extend_sse42(seed, data.data() + align, n),
                tk::detail::crc32c_extend_table(seed, data.data() + align, n))
          << "length " << n << ", offset " << align;
    }
}

TEST(Crc32c, Sse42EqualsTheTableOnBigBuffers) {
  if (!tk::detail::cpu_has_sse42()) GTEST_SKIP() << "this CPU has no SSE4.2";
  std::mt19937 rng(12);
  const std::vector<unsigned char> data = random_bytes((16u << 20) + 13, rng);
  for (std::size_t offset : {0u, 3u})
    EXPECT_EQ(tk::detail::crc32c_extend_sse42(0, data.data() + offset, data.size() - offset),
              tk::detail::crc32c_extend_table(0, data.data() + offset, data.size() - offset))
        << offset;
}

TEST(Crc32c, UsesTheInstructionWhereTheCpuHasIt) {
  EXPECT_EQ(tk::crc32c_engine_in_use() == tk::crc32c_engine::sse42, tk::detail::cpu_has_sse42());
}
#endif

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(tk::bf16::from_float(1.0f).to_float(), 1.0f);
  // 1 + 2^-8 is exactly half-way between bf16 1.0 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(tk::bf16::from_float(1.0f + 0x1p-8f).to_float(), 1.0f);
  // 1 + 3·2^-8 is half-way between 1+2^-7 (odd) and 1+2^-6 (even): goes up to 1+2^-6.
  EXPECT_EQ(tk::bf16::from_float(1.0f + 3 * 0x1p-8f).to_float(), 1.0f + 0x1p-6f);
  EXPECT_EQ(tk::bf16::from_float(-2.5f).to_float(), -2.5f);
  EXPECT_TRUE(std::isnan(tk::bf16::from_float(std::numeric_limits<float>::quiet_NaN()).to_float()));
  EXPECT_TRUE(std::isinf(tk::bf16::from_float(std::numeric_limits<float>::infinity()).to_float()));
}

TEST(Bf16, RelativeErrorBound) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.f, 10.f);
  for (int i = 0; i < 10000; ++i) {
    const float x = d(rng);
    const float y = tk::bf16::from_float(x).to_float();
    EXPECT_LE(std::abs(y - x), std::abs(x) * 0x1p-8f) << x;
  }
}

TEST(Dtype, NamesRoundTripAndSizes) {
  for (auto t : {tk::dtype::f32, tk::dtype::f64, tk::dtype::bf16, tk::dtype::i32, tk::dtype::u16,
                 tk::dtype::u8, tk::dtype::u64})
    EXPECT_EQ(tk::dtype_from_name(tk::dtype_name(t)), t);
  EXPECT_EQ(tk::dtype_size(tk::dtype::bf16), 2u);
  EXPECT_EQ(tk::dtype_size(tk::dtype::f64), 8u);
  EXPECT_THROW(tk::dtype_from_name("f16"), tk::format_error);
}

TEST(StateTensor, ShapeMustMatchSpan) {
  std::vector<float> v(6);
  auto t = tk::make_state_tensor("x", std::span<float>(v), {2, 3});
  EXPECT_EQ(t.bytes(), 24u);
  EXPECT_EQ(t.type, tk::dtype::f32);
  EXPECT_THROW(tk::make_state_tensor("x", std::span<float>(v), {4, 2}), tk::config_error);
}

TEST(DevicePeak, TableIsKeyedByDeviceName) {
  EXPECT_DOUBLE_EQ(*tk::peak_tflops("NVIDIA H200", tk::compute_dtype::bf16), 989.0);
  EXPECT_DOUBLE_EQ(*tk::peak_tflops("NVIDIA H100 80GB HBM3", tk::compute_dtype::bf16), 989.0);
  EXPECT_DOUBLE_EQ(*tk::peak_tflops("NVIDIA H100 PCIe", tk::compute_dtype::bf16), 756.0);
  EXPECT_DOUBLE_EQ(*tk::peak_tflops("NVIDIA A100-SXM4-80GB", tk::compute_dtype::bf16), 312.0);
  EXPECT_FALSE(tk::peak_tflops("Some Unknown Accelerator", tk::compute_dtype::bf16).has_value());
  // The seed run's artefact: an H200 measured against an A100 peak reads > 100 % MFU.
  const double h200_achieved = 0.5 * 989.0;
  EXPECT_GT(h200_achieved / *tk::peak_tflops("A100", tk::compute_dtype::bf16), 1.0);
  EXPECT_LT(h200_achieved / *tk::peak_tflops("H200", tk::compute_dtype::bf16), 1.0);
}

TEST(SourcePosition, RoundTripsThroughText) {
  tk::source_position p{3, 7, 123456789012ull, 42};
  EXPECT_EQ(tk::source_position::parse(p.to_string()), p);
  EXPECT_THROW(tk::source_position::parse("epoch=1 shard=x"), tk::format_error);
}

TEST(Stopwatch, LapsTileTheTimeline) {
  tk::stopwatch total, laps;
  double sum = 0;
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    sum += laps.lap_ms();
  }
  const double t = total.elapsed_ms();
  EXPECT_GE(sum, 6.0);
  EXPECT_LE(sum, t + 0.01);
}
