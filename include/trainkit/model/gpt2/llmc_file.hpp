// trainkit/model/gpt2/llmc_file.hpp — read and write llm.c GPT-2 model files.
//
// So a model trained by llm.c (or exported by its train_gpt2.py from Hugging Face weights) can
// start a trainkit run, and a trainkit model can go back to llm.c. The format (docs/formats.md):
// 256 little-endian int32 — [0] = 20240326, [1] = 3 (fp32) or 5 (bf16), [2] max_seq_len,
// [3] vocab_size, [4] num_layers, [5] num_heads, [6] channels, [7] padded_vocab_size, the rest 0 —
// then every parameter in gpt2_parameter_layout() order, nothing after. Versions 1 and 2 (before
// llm.c padded the vocabulary) are rejected. Hosts are assumed little-endian (x86-64, aarch64).
//
// The span functions serve any model that can show its parameters on the host; the
// basic_gpt2_cpu overloads wrap them. Writes go to "<path>.tmp" and are renamed into place, so a
// crash never leaves a truncated file under the real name.
//
// No Eigen: this header only declares basic_gpt2_cpu, so nvcc units (gpt_fineweb's CUDA driver)
// read and write llm.c files through the span functions. A caller of the basic_gpt2_cpu overloads
// includes model/gpt2/cpu.hpp, as it must to have such a model.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "trainkit/core/bf16.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/model/gpt2/config.hpp"
#include "trainkit/model/zero_parameters.hpp"

namespace trainkit::model {

template <class Scalar>
class basic_gpt2_cpu;  // model/gpt2/cpu.hpp

inline constexpr std::int32_t llmc_model_magic = 20240326;
inline constexpr std::int32_t llmc_version_fp32 = 3;
inline constexpr std::int32_t llmc_version_bf16 = 5;
inline constexpr std::size_t llmc_header_ints = 256;

/// What an llm.c model file's header says.
struct llmc_header {
  int version = llmc_version_fp32;
  gpt2_config config;

  std::size_t element_bytes() const { return version == llmc_version_bf16 ? 2 : 4; }
  /// Bytes the whole file must have: header plus every parameter.
  std::size_t file_bytes() const {
    return llmc_header_ints * 4 + config.num_parameters() * element_bytes();
  }
};

namespace detail {

inline std::string llmc_name(const std::filesystem::path& p) {
  return "llm.c model file '" + p.string() + "'";
}

inline std::ifstream open_llmc(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw format_error(llmc_name(path) + " does not exist");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw io_error(llmc_name(path) + " cannot be opened for reading");
  return in;
}

inline llmc_header parse_llmc_header(const std::filesystem::path& path, std::ifstream& in) {
  std::array<std::int32_t, llmc_header_ints> h{};
  in.read(reinterpret_cast<char*>(h.data()), std::streamsize(h.size() * 4));
  if (in.gcount() != std::streamsize(h.size() * 4))
    throw format_error(llmc_name(path) + " is shorter than its 1024-byte header (" +
                       std::to_string(in.gcount()) + " bytes)");
  if (h[0] != llmc_model_magic)
    throw format_error(llmc_name(path) + " has magic " + std::to_string(h[0]) + ", expected " +
                       std::to_string(llmc_model_magic) +
                       (h[0] == 20240520 ? " (this is a token shard, not a model)" : ""));
  if (h[1] == 1 || h[1] == 2)
    throw format_error(llmc_name(path) + " has version " + std::to_string(h[1]) +
                       ", an llm.c format from before the padded vocabulary; re-export it with "
                       "llm.c's current train_gpt2.py (version 3 fp32 or 5 bf16)");
  if (h[1] != llmc_version_fp32 && h[1] != llmc_version_bf16)
    throw format_error(llmc_name(path) + " has unsupported version " + std::to_string(h[1]) +
                       " (supported: 3 fp32, 5 bf16)");
  llmc_header out;
  out.version = h[1];
  out.config.max_seq_len = h[2];
  out.config.vocab_size = h[3];
  out.config.num_layers = h[4];
  out.config.num_heads = h[5];
  out.config.channels = h[6];
  out.config.padded_vocab_size = h[7];
  try {
    out.config.validate();
  } catch (const config_error& e) {
    throw format_error(llmc_name(path) + " has an impossible model shape: " + e.what());
  }
  return out;
}

}  // namespace detail

/// The header of an llm.c model file. Throws format_error (missing file, short header, wrong
/// magic, unsupported version, impossible shape) or io_error (unreadable), naming the file.
inline llmc_header read_llmc_file_header(const std::filesystem::path& path) {
  std::ifstream in = detail::open_llmc(path);
  return detail::parse_llmc_header(path, in);
}

/// The model shape an llm.c model file holds (see read_llmc_file_header for errors).
inline gpt2_config read_llmc_header(const std::filesystem::path& path) {
  return read_llmc_file_header(path).config;
}

/// Reads the parameters of an llm.c model file into `params`, converting fp32 or bf16 to Scalar.
/// The file's shape must equal `expected` and its size must match its header: format_error
/// naming the file and what differs otherwise.
template <std::floating_point Scalar>
void read_llmc_parameters(const std::filesystem::path& path, const gpt2_config& expected,
                          std::span<Scalar> params) {
  std::ifstream in = detail::open_llmc(path);
  const llmc_header h = detail::parse_llmc_header(path, in);
  if (!(h.config == expected))
    throw format_error(detail::llmc_name(path) + " holds a model of shape " + h.config.to_string() +
                       ", not the expected " + expected.to_string());
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw io_error(detail::llmc_name(path) + ": cannot read its size: " + ec.message());
  if (size != h.file_bytes())
    throw format_error(detail::llmc_name(path) + " is " + std::to_string(size) +
                       " bytes, but its header (" + h.config.to_string() + ", version " +
                       std::to_string(h.version) + ") needs " + std::to_string(h.file_bytes()));
  const std::size_t n = h.config.num_parameters();
  if (params.size() != n)
    throw config_error("read_llmc_parameters: destination holds " + std::to_string(params.size()) +
                       " parameters, " + detail::llmc_name(path) + " has " + std::to_string(n));
  constexpr std::size_t chunk = std::size_t(1) << 20;  // elements per read
  std::vector<char> buf(chunk * h.element_bytes());
  for (std::size_t i0 = 0; i0 < n; i0 += chunk) {
    const std::size_t m = std::min(chunk, n - i0);
    in.read(buf.data(), std::streamsize(m * h.element_bytes()));
    if (in.gcount() != std::streamsize(m * h.element_bytes()))
      throw io_error(detail::llmc_name(path) + ": read failed at parameter " + std::to_string(i0));
    for (std::size_t j = 0; j < m; ++j) {
      if (h.version == llmc_version_bf16) {
        std::uint16_t bits;
        std::memcpy(&bits, buf.data() + 2 * j, 2);
        params[i0 + j] = Scalar(bf16::from_bits(bits).to_float());
      } else {
        float f;
        std::memcpy(&f, buf.data() + 4 * j, 4);
        params[i0 + j] = Scalar(f);
      }
    }
  }
}

/// Writes `params` (in gpt2_parameter_layout(cfg) order) as an llm.c model file, version 3 (fp32)
/// or 5 (bf16, rounded to nearest even), via "<path>.tmp" and a rename. Throws config_error for a
/// bad version or parameter count, io_error when the file cannot be written.
template <std::floating_point Scalar>
void write_llmc_parameters(const std::filesystem::path& path, const gpt2_config& cfg,
                           std::span<const Scalar> params, int version = llmc_version_fp32) {
  if (version != llmc_version_fp32 && version != llmc_version_bf16)
    throw config_error("save_llmc_model: version " + std::to_string(version) +
                       " is not 3 (fp32) or 5 (bf16)");
  cfg.validate();
  if (params.size() != cfg.num_parameters())
    throw config_error("save_llmc_model: " + std::to_string(params.size()) +
                       " parameters given, shape " + cfg.to_string() + " has " +
                       std::to_string(cfg.num_parameters()));
  std::array<std::int32_t, llmc_header_ints> h{};
  h[0] = llmc_model_magic;
  h[1] = version;
  h[2] = cfg.max_seq_len;
  h[3] = cfg.vocab_size;
  h[4] = cfg.num_layers;
  h[5] = cfg.num_heads;
  h[6] = cfg.channels;
  h[7] = cfg.padded_vocab_size;

  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw io_error(detail::llmc_name(tmp) + " cannot be opened for writing");
    out.write(reinterpret_cast<const char*>(h.data()), std::streamsize(h.size() * 4));
    constexpr std::size_t chunk = std::size_t(1) << 20;
    const std::size_t elt = version == llmc_version_bf16 ? 2 : 4;
    std::vector<char> buf(chunk * elt);
    for (std::size_t i0 = 0; i0 < params.size() && out; i0 += chunk) {
      const std::size_t m = std::min(chunk, params.size() - i0);
      for (std::size_t j = 0; j < m; ++j) {
        const float f = float(params[i0 + j]);
        if (version == llmc_version_bf16) {
          const std::uint16_t bits = bf16::from_float(f).bits;
          std::memcpy(buf.data() + 2 * j, &bits, 2);
        } else {
          std::memcpy(buf.data() + 4 * j, &f, 4);
        }
      }
      out.write(buf.data(), std::streamsize(m * elt));
    }
    out.flush();
    if (!out) {
      out.close();
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw io_error(detail::llmc_name(tmp) + ": write failed (disk full?)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw io_error(detail::llmc_name(path) + ": cannot rename '" + tmp.string() +
                   "' into place: " + ec.message());
  }
}

/// Loads an llm.c model file into `model`, whose shape must be the file's (format_error if not).
template <class Scalar>
void load_llmc_model(const std::filesystem::path& path, basic_gpt2_cpu<Scalar>& model) {
  read_llmc_parameters(path, model.config(), model.parameters());
}

/// A CPU model with the shape and parameters of an llm.c model file.
template <class Scalar = float>
basic_gpt2_cpu<Scalar> load_llmc_gpt2_cpu(const std::filesystem::path& path) {
  basic_gpt2_cpu<Scalar> model(read_llmc_header(path), zero_parameters);
  load_llmc_model(path, model);
  return model;
}

/// Saves `model` as an llm.c model file, version 3 (fp32) or 5 (bf16).
template <class Scalar>
void save_llmc_model(const std::filesystem::path& path, const basic_gpt2_cpu<Scalar>& model,
                     int version = llmc_version_fp32) {
  write_llmc_parameters(path, model.config(), model.parameters(), version);
}

}  // namespace trainkit::model
