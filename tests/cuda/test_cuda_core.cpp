// Tests for trainkit/core/cuda: the cuda_error message format and device detection (these run on
// any machine), and buffers, streams and events (these skip without a CUDA device). Compiled by
// g++: the utilities are host-compilable by design.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/device.hpp"
#include "trainkit/core/cuda/stream.hpp"

namespace {

#define SKIP_WITHOUT_DEVICE()                                                         \
  do {                                                                                \
    if (!trainkit::cuda::device_present())                                            \
      GTEST_SKIP() << "no CUDA device present (cudaGetDeviceCount failed or gave 0)"; \
  } while (0)

TEST(CudaError, MessageNamesFileLineCallAndError) {
  const std::string m = trainkit::cuda::detail::format_failure(
      "/a/b/gpt2_cuda.hpp", 212, "cudaMalloc(&p, n)", "cudaErrorMemoryAllocation", "out of memory");
  EXPECT_EQ(m,
            "gpt2_cuda.hpp:212: cudaMalloc(&p, n) failed: cudaErrorMemoryAllocation (out of "
            "memory)");
}

TEST(CudaError, CheckMacroThrowsCudaErrorDerivedFromTrainkitError) {
  // cudaErrorInvalidValue needs no device: the macro must turn it into an exception.
  try {
    TRAINKIT_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "no exception";
  } catch (const trainkit::error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("test_cuda_core.cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaErrorInvalidValue"), std::string::npos) << what;
    EXPECT_NE(what.find("failed"), std::string::npos) << what;
    const auto* ce = dynamic_cast<const trainkit::cuda_error*>(&e);
    ASSERT_NE(ce, nullptr);
    EXPECT_EQ(ce->code(), int(cudaErrorInvalidValue));
  }
  EXPECT_NO_THROW(TRAINKIT_CUDA_CHECK(cudaSuccess));
}

TEST(CudaError, CublasCheckNamesTheStatus) {
  try {
    TRAINKIT_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED);
    FAIL() << "no exception";
  } catch (const trainkit::cuda_error& e) {
    EXPECT_NE(std::string(e.what()).find("CUBLAS_STATUS_NOT_SUPPORTED"), std::string::npos)
        << e.what();
    EXPECT_EQ(e.code(), int(CUBLAS_STATUS_NOT_SUPPORTED));
  }
}

TEST(CudaDevice, CountNeverThrows) {
  int n = -1;
  EXPECT_NO_THROW(n = trainkit::cuda::device_count());
  EXPECT_GE(n, 0);
  EXPECT_EQ(trainkit::cuda::device_present(), n > 0);
}

TEST(CudaDevice, PropertiesAndPeak) {
  SKIP_WITHOUT_DEVICE();
  const auto p = trainkit::cuda::query_device();
  EXPECT_FALSE(p.name.empty());
  EXPECT_GT(p.sm_count, 0);
  EXPECT_GT(p.total_memory, std::size_t(1) << 30);
  EXPECT_GE(p.major, 9) << "trainkit::cuda builds for sm_90a; running on " << p.name;
  if (p.name.find("H200") != std::string::npos || p.name.find("H100") != std::string::npos) {
    EXPECT_TRUE(trainkit::cuda::device_peak_tflops(p).has_value());
  }
  const auto m = trainkit::cuda::device_memory_info();
  EXPECT_GT(m.free, 0u);
  EXPECT_LE(m.free, m.total);
}

TEST(CudaBuffer, RoundTripThroughPinnedAndDevice) {
  SKIP_WITHOUT_DEVICE();
  trainkit::cuda::stream s;
  constexpr std::size_t n = 12345;  // odd: no accidental alignment to a vector width
  trainkit::cuda::pinned_buffer<std::int32_t> host(n), back(n);
  std::iota(host.data(), host.data() + n, 7);
  std::fill(back.data(), back.data() + n, -1);
  trainkit::cuda::device_buffer<std::int32_t> dev(n);
  dev.fill_bytes_async(0xff, s);
  trainkit::cuda::copy_to_device_async(dev, std::span<const std::int32_t>(host.span()), s);
  trainkit::cuda::copy_to_host_async(back.span(), dev, s);
  s.synchronize();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], std::int32_t(7 + i)) << i;

  trainkit::cuda::device_buffer<std::int32_t> moved = std::move(dev);
  EXPECT_EQ(dev.data(), nullptr);
  EXPECT_EQ(moved.size(), n);
  std::vector<std::int32_t> small(n - 1);
  EXPECT_THROW(trainkit::cuda::copy_to_host_async(std::span<std::int32_t>(small), moved, s),
               trainkit::config_error);
}

TEST(CudaStream, EventsMeasureElapsedTime) {
  SKIP_WITHOUT_DEVICE();
  trainkit::cuda::stream s;
  trainkit::cuda::event a, b;
  trainkit::cuda::device_buffer<float> big(std::size_t(1) << 26);  // 256 MiB: measurable
  a.record(s);
  big.fill_bytes_async(0, s);
  b.record(s);
  const float ms = trainkit::cuda::elapsed_ms(a, b);
  EXPECT_GT(ms, 0.0f);
  EXPECT_TRUE(b.ready());
}

}  // namespace
