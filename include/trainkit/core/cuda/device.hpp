// trainkit/core/cuda/device.hpp — which CUDA devices exist and what they are.
//
// `device_present()` is how GPU tests decide to skip and how programs refuse a CUDA run on a
// machine without one: it never throws (no driver, no device and a driver too old all mean "no").
// `device_properties` gathers what kernels and reports need (name for the peak table, SM count for
// grid sizes, memory for arena checks, compute capability for the sm_90a build); the dense peak
// comes from core/device_info.hpp's table, never a constant. Host-compilable (cuda_runtime.h only).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <optional>
#include <string>

#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/device_info.hpp"

namespace trainkit::cuda {

/// Number of visible CUDA devices; 0 when the runtime cannot find a driver or a device.
inline int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the (non-sticky) error so later calls start clean
    return 0;
  }
  return n;
}

/// True when at least one CUDA device can be used.
inline bool device_present() noexcept {
  return device_count() > 0;
}

struct device_properties {
  int ordinal = 0;
  std::string name;              // e.g. "NVIDIA H200"
  int sm_count = 0;              // streaming multiprocessors
  int major = 0, minor = 0;      // compute capability
  std::size_t total_memory = 0;  // bytes of global memory
  std::size_t l2_bytes = 0;
  std::size_t shared_per_block_optin = 0;  // after cudaFuncSetAttribute raises the limit

  std::string compute_capability() const {
    return std::to_string(major) + "." + std::to_string(minor);
  }
};

/// The device the calling thread uses now.
inline int current_device() {
  int d = 0;
  TRAINKIT_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

/// Properties of device `ordinal` (the current one by default). Throws cuda_error.
inline device_properties query_device(std::optional<int> ordinal = std::nullopt) {
  const int d = ordinal ? *ordinal : current_device();
  cudaDeviceProp p{};
  TRAINKIT_CUDA_CHECK(cudaGetDeviceProperties(&p, d));
  device_properties out;
  out.ordinal = d;
  out.name = p.name;
  out.sm_count = p.multiProcessorCount;
  out.major = p.major;
  out.minor = p.minor;
  out.total_memory = p.totalGlobalMem;
  out.l2_bytes = std::size_t(p.l2CacheSize);
  out.shared_per_block_optin = p.sharedMemPerBlockOptin;
  return out;
}

/// Free and total bytes of the current device's memory right now.
struct memory_info {
  std::size_t free = 0;
  std::size_t total = 0;
};
inline memory_info device_memory_info() {
  memory_info m;
  TRAINKIT_CUDA_CHECK(cudaMemGetInfo(&m.free, &m.total));
  return m;
}

/// Dense tensor-core peak of a device for `dt`, from the table in core/device_info.hpp.
inline std::optional<double> device_peak_tflops(const device_properties& p,
                                                compute_dtype dt = compute_dtype::bf16) {
  return peak_tflops(p.name, dt);
}

}  // namespace trainkit::cuda
