// trainkit/checkpoint/format.hpp — the on-disk checkpoint format: directory names, the manifest
// and its JSON encoding (docs/formats_checkpoint.md is the prose version).
//
// A checkpoint is a directory `step_00000012` holding `tensors.bin` (tensors back to back, each
// starting at a multiple of 64 bytes so it can be mapped and read with aligned vector loads) and
// `manifest.json`, which names every tensor with dtype, shape, byte offset, size and CRC-32C. The
// manifest is written last, so its presence marks a complete directory. Since version 2 the
// manifest ends with `"manifest_crc32c"`, the CRC-32C of every byte before that member, so a
// manifest damaged on disk (or edited by hand) is refused rather than trusted; version 1
// manifests (no checksum) still load, their tensors being checked by their own CRCs. The writer
// is hand-written for this one schema (one tensor per line, and the checksum must cover exact
// bytes); the reader parses with nlohmann_json and checks every field's JSON type and range
// itself: numbers must be JSON numbers (unsigned integers), names and meta values strings.
//
// Version 3 is a sharded checkpoint (ZeRO-1: each rank owns a slice of the optimizer state). Its
// manifest also lists `"shards"`: one per rank, each a subdirectory `shard_00001` with its own
// tensors.bin, the element range [offset, offset + count) of the full tensors it holds, and its
// tensors (named after the full tensors, shape {count}) with offsets and CRC-32Cs. The shards of
// a tensor tile it in rank order, so any number of ranks can reassemble or re-slice it. A state
// without shards is still written as version 2.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/checkpoint/detail/posix_file.hpp"
#include "trainkit/core/crc32c.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/tensor.hpp"

namespace trainkit::checkpoint {

inline constexpr std::string_view format_magic = "trainkit-checkpoint";
inline constexpr int format_version = 2;          // what this build writes (no shards)
inline constexpr int sharded_format_version = 3;  // what it writes for a sharded state
inline constexpr int oldest_format_version = 1;   // the oldest it reads (no manifest checksum)
inline constexpr int newest_format_version = sharded_format_version;  // the newest it reads
inline constexpr std::size_t tensor_alignment = 64;  // bytes; a cache line and an AVX-512 vector
inline constexpr std::string_view tensors_file_name = "tensors.bin";
inline constexpr std::string_view manifest_file_name = "manifest.json";
inline constexpr std::string_view temporary_prefix = ".tmp.";  // hidden; never a checkpoint

/// "step_00000012": zero-padded to 8 digits so names sort like steps up to 10^8 (more digits
/// beyond that; the listing parses the number rather than relying on name order).
inline std::string step_dir_name(std::uint64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08llu", static_cast<unsigned long long>(step));
  return buf;
}

/// The step of a directory named by `step_dir_name`, or nullopt for any other name.
inline std::optional<std::uint64_t> parse_step_dir_name(std::string_view name) {
  constexpr std::string_view prefix = "step_";
  if (name.size() < prefix.size() + 8 || name.substr(0, prefix.size()) != prefix) return {};
  const std::string_view digits = name.substr(prefix.size());
  std::uint64_t step = 0;
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (r.ec != std::errc{} || r.ptr != digits.data() + digits.size()) return {};
  if (step_dir_name(step) != name) return {};  // e.g. "step_+0000012" or extra leading zeros
  return step;
}

/// "shard_00001": the subdirectory holding rank 1's shard in a sharded checkpoint.
inline std::string shard_dir_name(std::uint64_t rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "shard_%05llu", static_cast<unsigned long long>(rank));
  return buf;
}

/// One tensor as the manifest records it.
struct manifest_entry {
  std::string name;
  dtype type = dtype::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0;  // bytes from the start of tensors.bin, a multiple of 64
  std::uint64_t bytes = 0;   // numel · dtype_size
  std::uint32_t crc32c = 0;  // of the `bytes` bytes at `offset`

  friend bool operator==(const manifest_entry&, const manifest_entry&) = default;
};

namespace detail {
/// The end of the last tensor of a tensors.bin (no trailing padding): the size it must have.
inline std::uint64_t data_end(const std::vector<manifest_entry>& tensors) noexcept {
  std::uint64_t end = 0;
  for (const auto& t : tensors) end = std::max(end, t.offset + t.bytes);
  return end;
}
inline const manifest_entry* find_entry(const std::vector<manifest_entry>& tensors,
                                        std::string_view name) noexcept {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}
}  // namespace detail

/// One rank's shard of a sharded checkpoint (version 3): elements [offset, offset + count) of
/// every sharded tensor, in `dir/tensors.bin`. Its tensors carry the full tensors' names and
/// shape {count}; their offsets and CRCs are those of the shard's own tensors.bin.
struct shard_entry {
  std::uint64_t rank = 0;
  std::string dir;  // shard_dir_name(rank), relative to the checkpoint directory
  std::uint64_t offset = 0;
  std::uint64_t count = 0;
  std::vector<manifest_entry> tensors;  // in file order

  friend bool operator==(const shard_entry&, const shard_entry&) = default;

  std::uint64_t data_size() const noexcept { return detail::data_end(tensors); }
  const manifest_entry* find(std::string_view name) const noexcept {
    return detail::find_entry(tensors, name);
  }
};

struct manifest {
  int version = format_version;  // as read; version 1 manifests carry no checksum of their own
  std::uint64_t step = 0;
  std::map<std::string, std::string> meta;
  std::vector<manifest_entry> tensors;  // in file order (a sharded checkpoint: rank 0's part)
  std::vector<shard_entry> shards;      // version 3 only; in rank order, tiling every tensor

  friend bool operator==(const manifest&, const manifest&) = default;

  /// The version `manifest_to_json` writes for this manifest.
  int written_version() const noexcept {
    return shards.empty() ? format_version : sharded_format_version;
  }

  /// Size tensors.bin must have: the end of the last tensor (no trailing padding).
  std::uint64_t data_size() const noexcept { return detail::data_end(tensors); }
  const manifest_entry* find(std::string_view name) const noexcept {
    return detail::find_entry(tensors, name);
  }
};

/// "[2, 3]" for error messages.
inline std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace detail {

// A JSON string literal: quotes, backslashes and control characters escaped; other bytes (UTF-8)
// pass through unchanged, which JSON allows.
inline void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// `[...]` of tensor entries, one per line indented by `indent` + 2 spaces.
inline void append_json_entries(std::string& out, const std::vector<manifest_entry>& entries,
                                std::string_view indent) {
  out += '[';
  bool first = true;
  for (const auto& t : entries) {
    out += first ? "\n" : ",\n";
    first = false;
    out += indent;
    out += "  {\"name\": ";
    append_json_string(out, t.name);
    out += ", \"dtype\": ";
    append_json_string(out, dtype_name(t.type));
    out += ", \"shape\": [";
    for (std::size_t i = 0; i < t.shape.size(); ++i)
      out += (i ? ", " : "") + std::to_string(t.shape[i]);
    out += "], \"offset\": " + std::to_string(t.offset);
    out += ", \"bytes\": " + std::to_string(t.bytes);
    out += ", \"crc32c\": " + std::to_string(t.crc32c) + "}";
  }
  if (!entries.empty()) {
    out += '\n';
    out += indent;
  }
  out += ']';
}

// What precedes the manifest's own checksum; the CRC covers the bytes before this marker.
inline constexpr std::string_view manifest_crc_marker = ",\n  \"manifest_crc32c\": ";

}  // namespace detail

/// The manifest as JSON, one tensor per line so `cat manifest.json` stays readable.
inline std::string manifest_to_json(const manifest& m) {
  using detail::append_json_string;
  std::string out = "{\n  \"format\": ";
  append_json_string(out, format_magic);
  out += ",\n  \"version\": " + std::to_string(m.written_version());
  out += ",\n  \"step\": " + std::to_string(m.step);
  out += ",\n  \"meta\": {";
  bool first = true;
  for (const auto& [key, value] : m.meta) {
    out += first ? "\n    " : ",\n    ";
    first = false;
    append_json_string(out, key);
    out += ": ";
    append_json_string(out, value);
  }
  out += m.meta.empty() ? "}" : "\n  }";
  out += ",\n  \"tensors\": ";
  detail::append_json_entries(out, m.tensors, "  ");
  if (!m.shards.empty()) {
    out += ",\n  \"shards\": [";
    first = true;
    for (const auto& sh : m.shards) {
      out += first ? "\n    {\"rank\": " : ",\n    {\"rank\": ";
      first = false;
      out += std::to_string(sh.rank) + ", \"dir\": ";
      append_json_string(out, sh.dir);
      out += ", \"offset\": " + std::to_string(sh.offset);
      out += ", \"count\": " + std::to_string(sh.count) + ", \"tensors\": ";
      detail::append_json_entries(out, sh.tensors, "      ");
      out += "}";
    }
    out += "\n  ]";
  }
  // The checksum covers every byte before its own member, so it is checked on the raw text.
  const std::uint32_t crc = crc32c(out.data(), out.size());
  out += std::string(detail::manifest_crc_marker) + std::to_string(crc) + "\n}\n";
  return out;
}

namespace detail {

using json = nlohmann::json;

class manifest_reader {
 public:
  explicit manifest_reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw format_error("malformed checkpoint manifest '" + source_ + "': " + what);
  }

  // `node` must be an object (checked by the caller).
  const json& child(const json& node, const std::string& key, const std::string& where) const {
    const auto it = node.find(key);
    if (it == node.end()) fail(where + ": missing \"" + key + "\"");
    return *it;
  }

  const json& object(const json& node, const std::string& where) const {
    if (!node.is_object()) fail(where + " must be an object, got " + text_of(node));
    return node;
  }

  const json& array(const json& node, const std::string& where) const {
    if (!node.is_array()) fail(where + " must be an array, got " + text_of(node));
    return node;
  }

  std::string string(const json& node, const std::string& where) const {
    if (!node.is_string()) fail(where + " must be a string, got " + text_of(node));
    return node.get<std::string>();
  }

  template <class T>
  T unsigned_number(const json& node, const std::string& where) const {
    if (!node.is_number_unsigned() ||
        node.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<T>::max()))
      fail(where + " must be an unsigned integer, got " + text_of(node));
    return T(node.get<std::uint64_t>());
  }

 private:
  // A value as it reads in the file, for messages: strings between quotes without escapes.
  static std::string text_of(const json& node) {
    std::string text = node.is_string() ? node.get<std::string>() : node.dump();
    if (text.size() > 60) text = text.substr(0, 57) + "...";
    return "'" + text + "'";
  }

  std::string source_;
};

}  // namespace detail

namespace detail {

// The tensor entries of a "tensors" array (`prefix` names it in messages): every field's type and
// range, bytes = numel · dtype size, 64-byte aligned offsets in increasing order, unique names.
inline std::vector<manifest_entry> parse_entries(const manifest_reader& r, const json& tensors,
                                                 const std::string& prefix) {
  std::vector<manifest_entry> out;
  std::set<std::string> names;
  std::uint64_t end_of_previous = 0;
  std::size_t index = 0;
  for (const json& node : r.array(tensors, "\"" + prefix + "\"")) {
    const std::string where = prefix + "[" + std::to_string(index++) + "]";
    r.object(node, where);
    manifest_entry e;
    e.name = r.string(r.child(node, "name", where), where + ".name");
    const std::string tensor = where + " '" + e.name + "'";
    if (e.name.empty()) r.fail(where + " has an empty name");
    if (!names.insert(e.name).second) r.fail(tensor + " appears twice");
    try {
      e.type = dtype_from_name(r.string(r.child(node, "dtype", tensor), tensor + ".dtype"));
    } catch (const format_error& err) {
      r.fail(tensor + ": " + err.what());
    }
    for (const json& dim : r.array(r.child(node, "shape", tensor), tensor + ".shape")) {
      const auto d = r.unsigned_number<std::uint64_t>(dim, tensor + ".shape");
      if (d > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
        r.fail(tensor + ".shape has a dimension out of range");
      e.shape.push_back(std::int64_t(d));
    }
    e.offset =
        r.unsigned_number<std::uint64_t>(r.child(node, "offset", tensor), tensor + ".offset");
    e.bytes = r.unsigned_number<std::uint64_t>(r.child(node, "bytes", tensor), tensor + ".bytes");
    e.crc32c =
        r.unsigned_number<std::uint32_t>(r.child(node, "crc32c", tensor), tensor + ".crc32c");
    if (e.bytes != shape_numel(e.shape) * dtype_size(e.type))
      r.fail(tensor + ": bytes " + std::to_string(e.bytes) + " do not match shape " +
             shape_text(e.shape) + " of " + std::string(dtype_name(e.type)));
    if (e.offset % tensor_alignment != 0)
      r.fail(tensor + ": offset " + std::to_string(e.offset) + " is not a multiple of " +
             std::to_string(tensor_alignment));
    if (e.offset < end_of_previous)
      r.fail(tensor + ": offset " + std::to_string(e.offset) + " overlaps the tensor before it");
    if (e.offset + e.bytes < e.offset) r.fail(tensor + ": offset + bytes overflows");
    end_of_previous = e.offset + e.bytes;
    out.push_back(std::move(e));
  }
  return out;
}

// The "shards" of a version 3 manifest: one per rank in rank order, each in the directory
// shard_dir_name(rank), the ranges tiling [0, total) from offset 0, every shard holding the same
// tensors (names, dtypes), each of shape {count}, none named like a tensor of rank 0's part.
inline std::vector<shard_entry> parse_shards(const manifest_reader& r, const json& shards,
                                             const std::vector<manifest_entry>& common) {
  std::vector<shard_entry> out;
  std::size_t index = 0;
  for (const json& node : r.array(shards, "\"shards\"")) {
    const std::string where = "shards[" + std::to_string(index) + "]";
    r.object(node, where);
    shard_entry sh;
    sh.rank = r.unsigned_number<std::uint64_t>(r.child(node, "rank", where), where + ".rank");
    if (sh.rank != index)
      r.fail(where + ": rank " + std::to_string(sh.rank) + " out of order (expected " +
             std::to_string(index) + ")");
    sh.dir = r.string(r.child(node, "dir", where), where + ".dir");
    if (sh.dir != shard_dir_name(sh.rank))  // never a path of the file's choosing
      r.fail(where + ": dir '" + sh.dir + "' is not '" + shard_dir_name(sh.rank) + "'");
    sh.offset = r.unsigned_number<std::uint64_t>(r.child(node, "offset", where), where + ".offset");
    sh.count = r.unsigned_number<std::uint64_t>(r.child(node, "count", where), where + ".count");
    const std::uint64_t expected = out.empty() ? 0 : out.back().offset + out.back().count;
    if (sh.offset != expected)
      r.fail(where + ": offset " + std::to_string(sh.offset) + " leaves a gap or overlap (the " +
             "shards before it end at " + std::to_string(expected) + ")");
    if (sh.offset + sh.count < sh.offset) r.fail(where + ": offset + count overflows");
    sh.tensors = parse_entries(r, r.child(node, "tensors", where), where + ".tensors");
    for (const manifest_entry& e : sh.tensors) {
      const std::string tensor = where + " tensor '" + e.name + "'";
      if (e.shape != std::vector<std::int64_t>{std::int64_t(sh.count)})
        r.fail(tensor + " has shape " + shape_text(e.shape) + ", not [" + std::to_string(sh.count) +
               "]");
      for (const manifest_entry& c : common)
        if (c.name == e.name) r.fail(tensor + " is also a tensor of rank 0's part");
      if (!out.empty()) {
        const manifest_entry* first = out.front().find(e.name);
        if (first == nullptr) r.fail(tensor + " is not in shards[0]");
        if (first->type != e.type) r.fail(tensor + " has another dtype than in shards[0]");
      }
    }
    if (!out.empty() && sh.tensors.size() != out.front().tensors.size())
      r.fail(where + " holds " + std::to_string(sh.tensors.size()) + " tensors, shards[0] " +
             std::to_string(out.front().tensors.size()));
    out.push_back(std::move(sh));
    ++index;
  }
  if (out.empty()) r.fail("\"shards\" is empty (a version 3 manifest has one per rank)");
  return out;
}

enum class manifest_checksum { verify, skip };

/// The parser behind parse_manifest; `skip` exists for fuzzing the fields behind the checksum.
inline manifest parse_manifest(const std::string& json_text, const std::string& source,
                               manifest_checksum checksum) {
  detail::manifest_reader r(source);
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number overflow
    r.fail(e.what());
  }
  if (!root.is_object()) r.fail("top level is not a JSON object: missing \"format\"");
  const std::string magic = r.string(r.child(root, "format", "top level"), "\"format\"");
  if (magic != format_magic)
    r.fail("\"format\" is '" + magic + "', expected '" + std::string(format_magic) + "'");
  const auto version =
      r.unsigned_number<std::uint64_t>(r.child(root, "version", "top level"), "\"version\"");
  if (version < std::uint64_t(oldest_format_version) ||
      version > std::uint64_t(newest_format_version))
    r.fail("unsupported version " + std::to_string(version) + " (this build reads versions " +
           std::to_string(oldest_format_version) + " to " + std::to_string(newest_format_version) +
           ")");
  if (version >= 2 && checksum == manifest_checksum::verify) {
    const std::size_t at = json_text.rfind(manifest_crc_marker);
    if (at == std::string::npos)
      r.fail("no \"manifest_crc32c\" (a version 2 manifest ends with it)");
    const std::string tail = json_text.substr(at + manifest_crc_marker.size());
    const std::size_t digits = tail.find_first_not_of("0123456789");
    if (digits == 0 || digits == std::string::npos || tail.substr(digits) != "\n}\n")
      r.fail("\"manifest_crc32c\" must be the last member, an unsigned integer");
    const auto stored = r.unsigned_number<std::uint32_t>(
        r.child(root, "manifest_crc32c", "top level"), "\"manifest_crc32c\"");
    if (stored != crc32c(json_text.data(), at))
      r.fail("manifest checksum mismatch (the file was damaged or edited)");
  }

  manifest m;
  m.version = int(version);
  m.step = r.unsigned_number<std::uint64_t>(r.child(root, "step", "top level"), "\"step\"");
  const json& meta = r.object(r.child(root, "meta", "top level"), "\"meta\"");
  for (const auto& [key, value] : meta.items())
    m.meta[key] = r.string(value, "meta \"" + key + "\"");

  m.tensors = parse_entries(r, r.child(root, "tensors", "top level"), "tensors");
  if (version >= std::uint64_t(sharded_format_version))
    m.shards = parse_shards(r, r.child(root, "shards", "version 3 manifest"), m.tensors);
  return m;
}

}  // namespace detail

/// Parses and checks a manifest's JSON; `source` (the file path) is named in every format_error.
/// Checks: magic and version; for version 2 the manifest's own CRC-32C; integer fields; known
/// dtypes; bytes = numel·dtype size; offsets 64-byte aligned, in increasing order and not
/// overlapping; unique tensor names.
inline manifest parse_manifest(const std::string& json, const std::string& source) {
  return detail::parse_manifest(json, source, detail::manifest_checksum::verify);
}

/// Reads and parses `path` (a manifest.json); io_error when unreadable, format_error when bad.
inline manifest read_manifest(const std::filesystem::path& path) {
  return parse_manifest(detail::read_text_file(path), path.string());
}

}  // namespace trainkit::checkpoint
