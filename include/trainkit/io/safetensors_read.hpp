// trainkit/io/safetensors_read.hpp — reading safetensors files (Hugging Face's tensor format).
//
// safetensors_file parses and validates the header once — every entry's dtype, shape and byte
// range, the ranges covering the data exactly with no gap or overlap, as the reference
// implementation requires — then reads one tensor at a time into floats, so memory stays at
// one tensor (a 1.5B-parameter model need not fit twice). The JSON header goes through
// nlohmann_json (the trainkit::hf component). Hosts are assumed little-endian.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "trainkit/core/bf16.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/io/safetensors_format.hpp"

namespace trainkit::io {

namespace detail {

/// IEEE binary16 bits to float (subnormals, infinities and NaN included).
inline float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // rebias 15 -> 127
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {
    int e = -1;  // subnormal: normalise the mantissa
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    bits = sign | (std::uint32_t(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

}  // namespace detail

/// An open safetensors file with a validated header.
class safetensors_file {
 public:
  /// Opens and validates `path`. format_error names the file and what is wrong (short file,
  /// header length beyond the file, malformed JSON, bad entry, gap or overlap); io_error when it
  /// cannot be opened or read.
  explicit safetensors_file(std::filesystem::path path) : path_(std::move(path)) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path_, ec))
      throw format_error(name() + " does not exist or is not a file");
    file_bytes_ = std::filesystem::file_size(path_, ec);
    if (ec) throw io_error(name() + ": cannot read its size: " + ec.message());
    in_.open(path_, std::ios::binary);
    if (!in_) throw io_error(name() + " cannot be opened for reading");
    if (file_bytes_ < 8)
      throw format_error(name() + " is " + std::to_string(file_bytes_) +
                         " bytes, shorter than the 8-byte header length");
    std::array<unsigned char, 8> len{};
    in_.read(reinterpret_cast<char*>(len.data()), 8);
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len[std::size_t(i)];
    if (n > safetensors_max_header_bytes || n > file_bytes_ - 8)
      throw format_error(name() + ": header length " + std::to_string(n) + " exceeds " +
                         (n > safetensors_max_header_bytes ? "the 100 MB limit" : "the file"));
    std::string text(n, '\0');
    in_.read(text.data(), std::streamsize(n));
    if (!in_) throw io_error(name() + ": cannot read its " + std::to_string(n) + "-byte header");
    data_start_ = 8 + n;
    parse_header(text);
  }

  const std::filesystem::path& path() const noexcept { return path_; }
  /// Every tensor, ordered by position in the data.
  const std::vector<safetensors_tensor>& tensors() const noexcept { return tensors_; }
  /// The "__metadata__" strings (empty when absent).
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }

  /// The entry called `tensor_name`, or null.
  const safetensors_tensor* find(std::string_view tensor_name) const {
    for (const auto& t : tensors_)
      if (t.name == tensor_name) return &t;
    return nullptr;
  }

  /// Reads `t` (an entry of this file) converted to float into `out`, which must hold numel().
  void read(const safetensors_tensor& t, std::span<float> out) {
    if (out.size() != t.numel())
      throw config_error("safetensors_file::read: '" + t.name + "' has " +
                         std::to_string(t.numel()) + " elements, destination holds " +
                         std::to_string(out.size()));
    raw_.resize(t.end - t.begin);
    in_.clear();
    in_.seekg(std::streamoff(data_start_ + t.begin));
    in_.read(reinterpret_cast<char*>(raw_.data()), std::streamsize(raw_.size()));
    if (!in_) throw io_error(name() + ": cannot read tensor '" + t.name + "'");
    const unsigned char* p = raw_.data();
    for (std::size_t i = 0; i < out.size(); ++i) {
      switch (t.dtype) {
        case safetensors_dtype::f32:
          std::memcpy(&out[i], p + 4 * i, 4);
          break;
        case safetensors_dtype::bf16: {
          std::uint16_t b;
          std::memcpy(&b, p + 2 * i, 2);
          out[i] = bf16::from_bits(b).to_float();
          break;
        }
        case safetensors_dtype::f16: {
          std::uint16_t b;
          std::memcpy(&b, p + 2 * i, 2);
          out[i] = detail::half_to_float(b);
          break;
        }
      }
    }
  }

  /// The tensor `tensor_name` as floats; format_error naming it when the file lacks it.
  std::vector<float> read(std::string_view tensor_name) {
    const safetensors_tensor* t = find(tensor_name);
    if (t == nullptr)
      throw format_error(name() + " has no tensor '" + std::string(tensor_name) + "'");
    std::vector<float> out(t->numel());
    read(*t, out);
    return out;
  }

 private:
  std::string name() const { return "safetensors file '" + path_.string() + "'"; }

  void parse_header(const std::string& text) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range (number overflow)
      throw format_error(name() + ": header is not valid JSON (" + e.what() + ")");
    }
    if (!j.is_object()) throw format_error(name() + ": header is not a JSON object");
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string where = name() + ", tensor '" + it.key() + "'";
      if (it.key() == "__metadata__") {
        if (!it->is_object()) throw format_error(name() + ": __metadata__ is not an object");
        for (auto m = it->begin(); m != it->end(); ++m) {
          if (!m->is_string())
            throw format_error(name() + ": __metadata__." + m.key() + " is not a string");
          metadata_[m.key()] = m->get<std::string>();
        }
        continue;
      }
      const auto& e = *it;
      if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
          !e.contains("data_offsets") || !e["dtype"].is_string() || !e["shape"].is_array() ||
          !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
        throw format_error(where + ": needs \"dtype\", \"shape\" and two \"data_offsets\"");
      safetensors_tensor t;
      t.name = it.key();
      t.dtype = parse_safetensors_dtype(e["dtype"].get<std::string>(), where);
      // Every dim is bounded by the file size, and so is the running product (a crafted shape
      // could otherwise overflow numel() to a count that matches the byte range).
      std::uint64_t elems = 1;
      for (const auto& d : e["shape"]) {
        if (!d.is_number_unsigned()) throw format_error(where + ": shape holds a non-count");
        const std::uint64_t n = d.get<std::uint64_t>();
        if (n > file_bytes_ || (n != 0 && elems > file_bytes_ / n))
          throw format_error(where + ": shape holds more elements than the file has bytes");
        elems *= n;
        t.shape.push_back(std::int64_t(n));
      }
      for (const auto& o : e["data_offsets"])
        if (!o.is_number_unsigned()) throw format_error(where + ": data_offsets holds a non-count");
      t.begin = e["data_offsets"][0].get<std::uint64_t>();
      t.end = e["data_offsets"][1].get<std::uint64_t>();
      if (t.end < t.begin || t.end - t.begin != t.numel() * safetensors_dtype_bytes(t.dtype))
        throw format_error(where + ": data_offsets [" + std::to_string(t.begin) + ", " +
                           std::to_string(t.end) + ") do not hold " + std::to_string(t.numel()) +
                           " " + std::string(safetensors_dtype_name(t.dtype)) + " elements");
      tensors_.push_back(std::move(t));
    }
    std::sort(tensors_.begin(), tensors_.end(), [](const auto& a, const auto& b) {
      return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
    });
    std::uint64_t at = 0;  // the ranges must tile the data: no gap, no overlap
    for (const auto& t : tensors_) {
      if (t.begin != at)
        throw format_error(name() + ": tensor '" + t.name + "' starts at byte " +
                           std::to_string(t.begin) + " of the data, expected " +
                           std::to_string(at) + (t.begin < at ? " (overlap)" : " (gap)"));
      at = t.end;
    }
    if (data_start_ + at != file_bytes_)
      throw format_error(name() + " is " + std::to_string(file_bytes_) +
                         " bytes; its header describes " + std::to_string(data_start_ + at));
  }

  std::filesystem::path path_;
  std::ifstream in_;
  std::uint64_t file_bytes_ = 0;
  std::uint64_t data_start_ = 0;
  std::vector<safetensors_tensor> tensors_;
  std::map<std::string, std::string> metadata_;
  std::vector<unsigned char> raw_;
};

}  // namespace trainkit::io
