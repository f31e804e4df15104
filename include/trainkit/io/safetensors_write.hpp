// trainkit/io/safetensors_write.hpp — writing safetensors files (Hugging Face's tensor format).
//
// Each tensor is described by name, stored dtype (F32, or BF16 rounded to nearest even), shape
// and a `fill` callback that produces its values in float a chunk at a time: the caller can
// transpose or slice on the fly (Hugging Face's GPT-2 layout needs both) without a second copy
// of the model in memory. Tensors are stored in the order given, packed without gaps; the JSON
// header is padded with spaces to a multiple of 8 bytes, as the reference writer does, so every
// tensor starts 8-byte aligned. The file is written as "<path>.tmp" and renamed into place.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "trainkit/core/bf16.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/io/safetensors_format.hpp"

namespace trainkit::io {

/// One tensor to write. `fill(first, out)` writes elements [first, first + out.size()) of the
/// tensor, row-major, into `out`.
struct safetensors_entry {
  std::string name;
  safetensors_dtype dtype = safetensors_dtype::f32;
  std::vector<std::int64_t> shape;
  std::function<void(std::size_t first, std::span<float> out)> fill;
};

/// An entry whose values are `values` as they lie (row-major, numel(shape) of them).
inline safetensors_entry safetensors_entry_of(std::string name, safetensors_dtype dtype,
                                              std::vector<std::int64_t> shape,
                                              std::span<const float> values) {
  return {std::move(name), dtype, std::move(shape),
          [values](std::size_t first, std::span<float> out) {
            std::memcpy(out.data(), values.data() + first, out.size() * sizeof(float));
          }};
}

/// The JSON header for `entries` (without the length prefix), padded to a multiple of 8 bytes.
inline std::string safetensors_header(const std::vector<safetensors_entry>& entries,
                                      const std::map<std::string, std::string>& metadata) {
  nlohmann::json j = nlohmann::json::object();
  if (!metadata.empty()) j["__metadata__"] = metadata;
  std::uint64_t at = 0;
  std::set<std::string> seen;
  for (const auto& e : entries) {
    if (e.name.empty() || e.name == "__metadata__" || !seen.insert(e.name).second)
      throw config_error("write_safetensors: tensor name '" + e.name +
                         "' is empty, reserved or repeated");
    if (e.dtype == safetensors_dtype::f16)
      throw config_error("write_safetensors: tensor '" + e.name +
                         "': trainkit writes F32 and BF16 only");
    for (auto d : e.shape)
      if (d < 0)
        throw config_error("write_safetensors: tensor '" + e.name + "' has a negative dim");
    const std::uint64_t bytes = shape_numel(e.shape) * safetensors_dtype_bytes(e.dtype);
    j[e.name] = {{"dtype", safetensors_dtype_name(e.dtype)},
                 {"shape", e.shape},
                 {"data_offsets", {at, at + bytes}}};
    at += bytes;
  }
  std::string text = j.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

/// Writes `entries` to `path` (via "<path>.tmp" and a rename). config_error for a bad entry,
/// io_error naming the file when it cannot be written.
inline void write_safetensors(const std::filesystem::path& path,
                              const std::vector<safetensors_entry>& entries,
                              const std::map<std::string, std::string>& metadata = {}) {
  const std::string header = safetensors_header(entries, metadata);
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  auto fail = [&](const std::string& why) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw io_error("safetensors file '" + tmp.string() + "': " + why);
  };
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("cannot be opened for writing");
    unsigned char len[8];
    std::uint64_t n = header.size();
    for (auto& b : len) {
      b = static_cast<unsigned char>(n & 0xff);
      n >>= 8;
    }
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(header.data(), std::streamsize(header.size()));
    constexpr std::size_t chunk = std::size_t(1) << 20;  // elements converted at once
    std::vector<float> values;
    std::vector<char> bytes;
    for (const auto& e : entries) {
      const std::size_t total = shape_numel(e.shape);
      const std::size_t elt = safetensors_dtype_bytes(e.dtype);
      for (std::size_t i0 = 0; i0 < total && out; i0 += chunk) {
        const std::size_t m = std::min(chunk, total - i0);
        values.resize(m);
        e.fill(i0, values);
        bytes.resize(m * elt);
        for (std::size_t k = 0; k < m; ++k) {
          if (e.dtype == safetensors_dtype::f32) {
            std::memcpy(bytes.data() + 4 * k, &values[k], 4);
          } else {  // BF16 (F16 was refused above)
            const std::uint16_t b = bf16::from_float(values[k]).bits;
            std::memcpy(bytes.data() + 2 * k, &b, 2);
          }
        }
        out.write(bytes.data(), std::streamsize(bytes.size()));
      }
    }
    out.flush();
    if (!out) fail("write failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail("cannot be renamed to '" + path.string() + "': " + ec.message());
}

}  // namespace trainkit::io
