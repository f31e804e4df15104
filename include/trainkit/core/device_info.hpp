// trainkit/core/device_info.hpp — the dense peak FLOP/s table behind honest MFU.
//
// MFU is achieved FLOP/s over the peak of the device that ran, for the dtype the matmuls use.
// A constant for all devices is how an H200 run printed "MFU 150%" (an A100's 312 TFLOP/s used as
// the peak for a 989 TFLOP/s part). Figures are NVIDIA's dense (no 2:4 sparsity) tensor-core
// peaks from the product datasheets; the CPU figure is a nominal placeholder that
// `mfu_settings.peak_tflops` (trainer/config.hpp) or calibration should replace.
#pragma once

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <string>
#include <string_view>

namespace trainkit {

enum class compute_dtype { f32, bf16 };

struct device_peak {
  std::string_view match;   // case-insensitive substring of the device name
  double bf16_tflops;       // dense tensor-core bf16
  double f32_tflops;        // dense fp32 (non tensor-core)
};

// Order matters: more specific names first ("H100 PCIe" before "H100").
inline constexpr std::array<device_peak, 9> device_peak_table{{
    {"H200", 989.0, 67.0},
    {"H100 PCIe", 756.0, 51.0},
    {"H100", 989.0, 67.0},  // SXM
    {"A100", 312.0, 19.5},
    {"L40S", 362.0, 91.6},
    {"RTX 4090", 165.2, 82.6},
    {"A10G", 70.0, 31.2},
    {"V100", 125.0, 15.7},  // fp16 tensor cores; V100 has no bf16
    {"cpu", 0.2, 0.2},      // ~200 GFLOP/s sgemm on a 2-core AVX2 machine (see bench/)
}};

/// The dense peak in TFLOP/s for a device name, or nullopt when the name is not in the table.
inline std::optional<double> peak_tflops(std::string_view device_name, compute_dtype dt) {
  auto lower = [](std::string_view s) {
    std::string r(s);
    std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return std::tolower(c); });
    return r;
  };
  const std::string name = lower(device_name);
  for (const auto& e : device_peak_table) {
    if (name.find(lower(e.match)) != std::string::npos)
      return dt == compute_dtype::bf16 ? e.bf16_tflops : e.f32_tflops;
  }
  return std::nullopt;
}

}  // namespace trainkit
