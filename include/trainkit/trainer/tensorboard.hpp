// trainkit/trainer/tensorboard.hpp — TensorBoard event files without TensorFlow or protobuf.
//
// An event file is a TFRecord stream: each record is
//   uint64 length | uint32 masked_crc32c(length bytes) | data | uint32 masked_crc32c(data)
// (all little-endian), and each record's data is a serialized tensorflow.Event protobuf. We only
// need four fields of Event — wall_time (double, 1), step (int64, 2), file_version (string, 3)
// and summary (Summary, 5) whose repeated value (1) carries tag (string, 1) and simple_value
// (float, 2) — so the protobuf wire format is written by hand (varint tags and lengths, fixed64/
// fixed32 little-endian scalars). The first record must be file_version "brain.Event:2" or
// TensorBoard's reader ignores the file. Each step's record is flushed as it is written, like the
// JSONL metrics, so a crashed run's scalars are all there.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainkit/core/crc32c.hpp"
#include "trainkit/core/error.hpp"

namespace trainkit {

namespace detail {

/// TFRecord's CRC mask: rotating and offsetting keeps a CRC of data that itself contains CRCs
/// from being trivially zero (tensorflow/core/lib/hash/crc32c.h).
inline std::uint32_t masked_crc32c(const void* data, std::size_t n) noexcept {
  const std::uint32_t crc = crc32c(data, n);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

inline void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += char((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += char(v);
}

inline void put_fixed(std::string& out, const void* p, std::size_t n) {
  out.append(static_cast<const char*>(p), n);  // little-endian hosts only, as crc32c.hpp
}

// Protobuf wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.
inline void put_tag(std::string& out, unsigned field, unsigned wire_type) {
  put_varint(out, (std::uint64_t(field) << 3) | wire_type);
}

inline void put_bytes_field(std::string& out, unsigned field, std::string_view bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}

}  // namespace detail

/// One scalar of a summary.
struct tensorboard_scalar {
  std::string tag;
  float value = 0;
};

/// Serialized tensorflow.Event with wall_time, step and either file_version or a summary.
inline std::string encode_tensorboard_event(double wall_time, std::int64_t step,
                                            std::string_view file_version,
                                            const std::vector<tensorboard_scalar>& scalars) {
  std::string ev;
  detail::put_tag(ev, 1, 1);  // wall_time: double
  detail::put_fixed(ev, &wall_time, 8);
  if (step != 0) {  // proto3 default: omitted when zero, as TensorFlow writes it
    detail::put_tag(ev, 2, 0);
    detail::put_varint(ev, std::uint64_t(step));
  }
  if (!file_version.empty()) detail::put_bytes_field(ev, 3, file_version);
  if (!scalars.empty()) {
    std::string summary;
    for (const auto& s : scalars) {
      std::string value;
      detail::put_bytes_field(value, 1, s.tag);
      detail::put_tag(value, 2, 5);  // simple_value: float
      detail::put_fixed(value, &s.value, 4);
      detail::put_bytes_field(summary, 1, value);
    }
    detail::put_bytes_field(ev, 5, summary);
  }
  return ev;
}

/// TFRecord framing of one record.
inline std::string frame_tfrecord(std::string_view data) {
  std::string out;
  const std::uint64_t len = data.size();
  detail::put_fixed(out, &len, 8);
  const std::uint32_t len_crc = detail::masked_crc32c(&len, 8);
  detail::put_fixed(out, &len_crc, 4);
  out.append(data);
  const std::uint32_t data_crc = detail::masked_crc32c(data.data(), data.size());
  detail::put_fixed(out, &data_crc, 4);
  return out;
}

/// Writes `events.out.tfevents.<unix time>.<host>` in a directory, one record per call.
class tensorboard_writer {
 public:
  tensorboard_writer() = default;

  /// Creates `dir` if needed and a new event file in it, starting with the file_version record.
  explicit tensorboard_writer(const std::filesystem::path& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
      throw io_error("cannot create the TensorBoard directory " + dir.string() + ": " +
                     ec.message());
    char host[256] = "localhost";
    if (::gethostname(host, sizeof host) != 0) std::strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';
    const auto now = wall_time_s();
    // Two writers started in the same second (a quick resume) must not share a file name.
    std::string stem = "events.out.tfevents." + std::to_string(std::int64_t(now)) + "." + host;
    path_ = dir / stem;
    for (int i = 1; std::filesystem::exists(path_); ++i)
      path_ = dir / (stem + "." + std::to_string(i));
    file_.open(path_, std::ios::binary | std::ios::trunc);
    if (!file_)
      throw io_error("cannot create the TensorBoard event file " + path_.string() + ": " +
                     std::strerror(errno));
    write_record(encode_tensorboard_event(now, 0, "brain.Event:2", {}));
  }

  bool is_open() const noexcept { return file_.is_open(); }
  const std::filesystem::path& path() const noexcept { return path_; }

  /// Appends one Event holding `scalars` at `step` and flushes it.
  void write_scalars(std::int64_t step, const std::vector<tensorboard_scalar>& scalars) {
    if (!file_.is_open() || scalars.empty()) return;
    write_record(encode_tensorboard_event(wall_time_s(), step, {}, scalars));
  }

 private:
  static double wall_time_s() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  void write_record(std::string_view data) {
    const std::string rec = frame_tfrecord(data);
    file_.write(rec.data(), std::streamsize(rec.size()));
    file_.flush();
    if (!file_) throw io_error("cannot write TensorBoard event file " + path_.string());
  }

  std::filesystem::path path_;
  std::ofstream file_;
};

}  // namespace trainkit
