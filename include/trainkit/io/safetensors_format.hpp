// trainkit/io/safetensors_format.hpp — the pieces of the safetensors format that reading and
// writing share: element types and the description of one stored tensor.
//
// A safetensors file (docs/formats.md) is an 8-byte little-endian header length N, N bytes of
// JSON mapping each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets into
// the data that follows the header) plus an optional "__metadata__" object of strings, then the
// tensor bytes, row-major and little-endian. trainkit handles the float types a model holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/core/tensor.hpp"

namespace trainkit::io {

/// Element types trainkit reads and writes (safetensors names "F32", "BF16", "F16").
enum class safetensors_dtype { f32, bf16, f16 };

inline constexpr std::string_view safetensors_dtype_name(safetensors_dtype d) noexcept {
  switch (d) {
    case safetensors_dtype::f32:
      return "F32";
    case safetensors_dtype::bf16:
      return "BF16";
    case safetensors_dtype::f16:
      return "F16";
  }
  return "?";
}

inline constexpr std::size_t safetensors_dtype_bytes(safetensors_dtype d) noexcept {
  return d == safetensors_dtype::f32 ? 4 : 2;
}

/// The dtype named `name`; format_error (naming `where` and the types supported) otherwise.
inline safetensors_dtype parse_safetensors_dtype(std::string_view name, const std::string& where) {
  for (auto d : {safetensors_dtype::f32, safetensors_dtype::bf16, safetensors_dtype::f16})
    if (safetensors_dtype_name(d) == name) return d;
  throw format_error(where + ": dtype '" + std::string(name) +
                     "' is not one trainkit reads (F32, BF16, F16)");
}

/// One tensor as the header describes it; offsets are relative to the start of the data.
struct safetensors_tensor {
  std::string name;
  safetensors_dtype dtype = safetensors_dtype::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // first byte, from the end of the header
  std::uint64_t end = 0;    // one past the last byte

  std::size_t numel() const noexcept { return shape_numel(shape); }
};

/// Header lengths above this are refused before allocating (the Rust reference caps at 100 MB).
inline constexpr std::uint64_t safetensors_max_header_bytes = 100'000'000;

}  // namespace trainkit::io
