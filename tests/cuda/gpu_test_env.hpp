// tests/cuda/gpu_test_env.hpp — how every GPU test reacts to a machine without a CUDA device,
// shared by the .cu tests (through gpu_test_support.cuh) and the g++-compiled ones.
//
// Without a device a GPU test skips (GTEST_SKIP): CI and laptops have none. On the device machine
// a skip would hide a broken set-up (no driver, CUDA_VISIBLE_DEVICES empty, a runtime that cannot
// see the card) as a green run, so bench/gpu_check.sh sets TRAINKIT_REQUIRE_GPU=1, which turns
// the same check into a failure.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "trainkit/core/cuda/device.hpp"

namespace trainkit::test_gpu {

/// TRAINKIT_REQUIRE_GPU is set to anything but "" or "0".
inline bool gpu_required() noexcept {
  const char* v = std::getenv("TRAINKIT_REQUIRE_GPU");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

}  // namespace trainkit::test_gpu

/// First statement of a test that needs a device: skips without one, or fails when
/// TRAINKIT_REQUIRE_GPU=1.
#define TRAINKIT_SKIP_WITHOUT_DEVICE()                                                  \
  do {                                                                                  \
    if (!trainkit::cuda::device_present()) {                                            \
      if (trainkit::test_gpu::gpu_required())                                           \
        GTEST_FAIL() << "no CUDA device present and TRAINKIT_REQUIRE_GPU is set";       \
      else                                                                              \
        GTEST_SKIP() << "no CUDA device present (cudaGetDeviceCount failed or gave 0)"; \
    }                                                                                   \
  } while (0)
