// trainkit/core/tensor.hpp — element types and the named-tensor descriptions shared by models,
// optimizers and checkpointers.
//
// Models keep their parameters in one flat buffer (as llm.c does) and describe it with a list of
// `tensor_info` (name, shape, offset, role). Optimizers walk the same list (e.g. to decide from
// the roles which tensors get weight decay) and checkpointers serialise `state_tensor`s, raw byte
// views with a dtype and a shape, so none of them needs to know the model's type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/core/bf16.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/tensor_role.hpp"

namespace trainkit {

/// Element types that cross policy boundaries (checkpoints, model files).
enum class dtype : std::uint8_t { f32, f64, bf16, i32, u16, u8, u64 };

constexpr std::size_t dtype_size(dtype t) noexcept {
  switch (t) {
    case dtype::f32:
      return 4;
    case dtype::f64:
      return 8;
    case dtype::bf16:
      return 2;
    case dtype::i32:
      return 4;
    case dtype::u16:
      return 2;
    case dtype::u8:
      return 1;
    case dtype::u64:
      return 8;
  }
  return 0;
}

constexpr std::string_view dtype_name(dtype t) noexcept {
  switch (t) {
    case dtype::f32:
      return "f32";
    case dtype::f64:
      return "f64";
    case dtype::bf16:
      return "bf16";
    case dtype::i32:
      return "i32";
    case dtype::u16:
      return "u16";
    case dtype::u8:
      return "u8";
    case dtype::u64:
      return "u64";
  }
  return "?";
}

/// Parses a name written by `dtype_name`; throws `format_error` naming the bad string.
inline dtype dtype_from_name(std::string_view s) {
  for (dtype t :
       {dtype::f32, dtype::f64, dtype::bf16, dtype::i32, dtype::u16, dtype::u8, dtype::u64}) {
    if (dtype_name(t) == s) return t;
  }
  throw format_error("unknown dtype '" + std::string(s) + "'");
}

template <class T>
constexpr dtype dtype_of() noexcept;
template <>
constexpr dtype dtype_of<float>() noexcept {
  return dtype::f32;
}
template <>
constexpr dtype dtype_of<double>() noexcept {
  return dtype::f64;
}
template <>
constexpr dtype dtype_of<bf16>() noexcept {
  return dtype::bf16;
}
template <>
constexpr dtype dtype_of<std::int32_t>() noexcept {
  return dtype::i32;
}
template <>
constexpr dtype dtype_of<std::uint16_t>() noexcept {
  return dtype::u16;
}
template <>
constexpr dtype dtype_of<std::uint8_t>() noexcept {
  return dtype::u8;
}
template <>
constexpr dtype dtype_of<std::uint64_t>() noexcept {
  return dtype::u64;
}

inline std::size_t shape_numel(std::span<const std::int64_t> shape) noexcept {
  return std::accumulate(shape.begin(), shape.end(), std::size_t{1},
                         [](std::size_t a, std::int64_t b) { return a * std::size_t(b); });
}

/// One parameter tensor inside a model's flat parameter buffer.
struct tensor_info {
  std::string name;                 // the model's own names: llm.c's "wte", "wpe", "ln1w", ...
  std::vector<std::int64_t> shape;  // row-major
  std::size_t offset = 0;           // in elements from the start of the flat buffer
  tensor_role role = tensor_role::matrix;  // what the tensor is (optimizers decide from it)
  // For a matrix role: the row counts of the matrices fused in each 2-D slice (the last two
  // dimensions), top to bottom, summing to the slice's rows; empty = the slice is one matrix.
  // GPT-2's qkvw slice [3C, C] is {C, C, C} (q, k, v); a GQA model's fused qkv would be
  // {H·hs, KV·hs, KV·hs}. Leading dimensions (layers) always stack separate matrices. Optimizers
  // that treat matrices as wholes (Muon) take each part on its own.
  std::vector<std::int64_t> row_parts{};

  std::size_t numel() const noexcept { return shape_numel(shape); }
  /// Rows and columns of one 2-D slice (the last two dimensions); {1, n} for a 1-D tensor.
  std::int64_t rows() const noexcept { return shape.size() >= 2 ? shape[shape.size() - 2] : 1; }
  std::int64_t cols() const noexcept { return shape.empty() ? 1 : shape.back(); }
  /// How many 2-D slices the leading dimensions stack (layers).
  std::size_t slices() const noexcept {
    std::size_t n = 1;
    for (std::size_t i = 0; i + 2 < shape.size(); ++i) n *= std::size_t(shape[i]);
    return n;
  }
  friend bool operator==(const tensor_info&, const tensor_info&) = default;
};

/// A contiguous, typed byte range to save or restore, with the name and shape it is stored under.
/// For saving, `data` is read; for loading, it is written (its size must match the stored one).
struct state_tensor {
  std::string name;
  dtype type = dtype::f32;
  std::vector<std::int64_t> shape;
  std::byte* data = nullptr;
  bool on_device = false;  // true: `data` is CUDA device memory (checkpointers stage it to host)

  std::size_t numel() const noexcept { return shape_numel(shape); }
  std::size_t bytes() const noexcept { return numel() * dtype_size(type); }
};

/// Builds a state_tensor over a typed span (shape given; its product must equal span size).
template <class T>
state_tensor make_state_tensor(std::string name, std::span<T> values,
                               std::vector<std::int64_t> shape) {
  if (shape_numel(shape) != values.size())
    throw config_error("state tensor '" + name + "': shape does not match its " +
                       std::to_string(values.size()) + " elements");
  return {std::move(name), dtype_of<std::remove_const_t<T>>(), std::move(shape),
          reinterpret_cast<std::byte*>(const_cast<std::remove_const_t<T>*>(values.data()))};
}

}  // namespace trainkit
