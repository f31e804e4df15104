// trainkit/data/shard_format.hpp — the token shard file format: parse, validate and write.
//
// The llm.c / modded-nanogpt shard is a header of 256 little-endian int32 ([0] = 20240520 magic,
// [1] = 1 version, [2] = token count) followed by that many little-endian uint16 tokens. nanoGPT's
// prepare.py writes the same tokens with no header at all. The layout is chosen by the caller,
// never guessed from the bytes: with `shard_layout::llmc` (the default) a file without the magic
// is a `shard_magic_error` naming the file and the int32 found, so a truncated or foreign file
// cannot become training data; `shard_layout::headerless_uint16` reads the whole file as tokens
// and rejects one that starts with a shard magic (it has a header the caller asked to ignore).
// Other llm.c magics (model, state, tokenizer files) and a byte-swapped shard magic are recognised
// in both layouts and rejected with a message that says what the file is.
//
// Parsing works on bytes already in memory (an mmap'd file) so the source validates without a
// second read; `read_shard_header` / `read_shard` are conveniences for tools and tests.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "trainkit/core/error.hpp"

namespace trainkit::data {

static_assert(std::endian::native == std::endian::little,
              "token shards are little-endian and are read in place; add byte swapping first");

inline constexpr std::int32_t shard_magic = 20240520;
inline constexpr std::int32_t shard_version = 1;
inline constexpr std::size_t shard_header_ints = 256;
inline constexpr std::size_t shard_header_bytes = shard_header_ints * sizeof(std::int32_t);

/// How a token file is laid out: the caller says which; the bytes are checked against it.
enum class shard_layout {
  llmc,               // 1 KiB llm.c header (magic 20240520), then uint16 tokens
  headerless_uint16,  // nothing but uint16 tokens (nanoGPT prepare.py)
};

inline constexpr const char* to_string(shard_layout l) noexcept {
  return l == shard_layout::llmc ? "llmc" : "headerless_uint16";
}

/// "llmc" or "headerless_uint16"; config_error naming the value otherwise.
inline shard_layout parse_shard_layout(const std::string& text) {
  if (text == "llmc") return shard_layout::llmc;
  if (text == "headerless_uint16") return shard_layout::headerless_uint16;
  throw config_error("shard layout must be llmc or headerless_uint16, not '" + text + "'");
}

/// A file read as an llm.c shard does not start with the shard magic. A distinct type so a
/// program can add the option that reads headerless files in its own words (a flag).
class shard_magic_error : public format_error {
 public:
  using format_error::format_error;
};

/// What the first bytes of a token file say about it.
struct shard_header {
  bool has_header = false;        // false: headerless nanoGPT uint16 file
  std::int32_t version = 0;       // 1 when has_header, else 0
  std::uint64_t token_count = 0;  // tokens in the file
  std::size_t data_offset = 0;    // byte offset of the first token (1024 or 0)

  friend bool operator==(const shard_header&, const shard_header&) = default;
};

namespace detail {

inline std::string errno_text(int err) {
  return std::strerror(err);
}

/// Names the llm.c file kinds whose magic a user may hand us by mistake.
inline const char* other_llmc_magic_name(std::int32_t magic) noexcept {
  switch (magic) {
    case 20240326:
      return "an llm.c model file";
    case 20240327:
      return "an llm.c debug state file";
    case 20240328:
      return "an llm.c tokenizer file";
    default:
      return nullptr;
  }
}

/// The int32 a little-endian reader sees where a big-endian writer stored `v` (C++20 has no
/// std::byteswap).
constexpr std::int32_t byte_swapped(std::int32_t v) noexcept {
  const auto u = static_cast<std::uint32_t>(v);
  return static_cast<std::int32_t>((u >> 24) | ((u >> 8) & 0xff00u) | ((u << 8) & 0xff0000u) |
                                   (u << 24));
}

inline std::int32_t load_i32(const unsigned char* p) noexcept {
  std::int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// RAII file descriptor: closes on every exit path of the helpers below.
class fd_guard {
 public:
  explicit fd_guard(int fd) noexcept : fd_(fd) {}
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  ~fd_guard() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const noexcept { return fd_; }
  /// Closes now and reports the error close(2) saw (deferred write errors surface here).
  int close_checked() noexcept {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

}  // namespace detail

/// Parses the header of a token file whose whole contents are `bytes` (`path` is for messages),
/// laid out as `layout` says. Throws format_error naming the file and the reason when the bytes
/// cannot be a token file of that layout (shard_magic_error when an llmc file lacks the magic).
inline shard_header parse_shard_header(std::span<const std::byte> bytes, const std::string& path,
                                       shard_layout layout = shard_layout::llmc) {
  const std::size_t size = bytes.size();
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::int32_t first = size >= 4 ? detail::load_i32(p) : 0;

  if (size >= 4) {
    if (const char* kind = detail::other_llmc_magic_name(first))
      throw format_error(path + ": magic " + std::to_string(first) + " is " + kind +
                         ", expected a token shard (magic " + std::to_string(shard_magic) + ")");
    if (first == detail::byte_swapped(shard_magic))
      throw format_error(path + ": byte-swapped shard magic (a big-endian file), expected " +
                         std::to_string(shard_magic) + " little-endian");
  }

  if (layout == shard_layout::headerless_uint16) {
    if (size >= 4 && first == shard_magic)
      throw format_error(path + ": starts with the llm.c shard magic " +
                         std::to_string(shard_magic) +
                         " but was opened as headerless uint16 tokens (open it as llmc)");
    if (size < sizeof(std::uint16_t))
      throw format_error(path + ": " + std::to_string(size) +
                         " bytes is too small for a headerless token file (no tokens)");
    if (size % sizeof(std::uint16_t) != 0)
      throw format_error(path + ": headerless token file has odd size " + std::to_string(size) +
                         " (uint16 tokens need an even byte count)");
    return {false, 0, size / sizeof(std::uint16_t), 0};
  }

  if (size < 4)
    throw shard_magic_error(path + ": " + std::to_string(size) +
                            " bytes, too small for an llm.c token shard (its header is " +
                            std::to_string(shard_header_bytes) + " bytes)");
  if (first != shard_magic)
    throw shard_magic_error(path + ": not an llm.c token shard: first int32 is " +
                            std::to_string(first) + ", expected the magic " +
                            std::to_string(shard_magic) +
                            " (headerless uint16 files are read only when the layout "
                            "headerless_uint16 is asked for)");
  if (size < shard_header_bytes)
    throw format_error(path + ": truncated shard header (" + std::to_string(size) +
                       " bytes, the header alone is " + std::to_string(shard_header_bytes) + ")");
  const std::int32_t version = detail::load_i32(p + 4);
  if (version != shard_version)
    throw format_error(path + ": unsupported token shard version " + std::to_string(version) +
                       ", expected " + std::to_string(shard_version));
  const std::int32_t count = detail::load_i32(p + 8);
  if (count < 0)
    throw format_error(path + ": negative token count " + std::to_string(count) + " in header");
  const std::uint64_t payload = size - shard_header_bytes;
  const std::uint64_t want = std::uint64_t(count) * sizeof(std::uint16_t);
  if (want > payload)
    throw format_error(path + ": header declares " + std::to_string(count) +
                       " tokens but the file holds only " + std::to_string(payload / 2) +
                       " (truncated?)");
  if (want < payload)
    throw format_error(path + ": " + std::to_string(payload - want) + " trailing bytes after the " +
                       std::to_string(count) + " tokens the header declares");
  return {true, version, std::uint64_t(count), shard_header_bytes};
}

/// The tokens of a file whose contents are `bytes`, as described by `h`.
inline std::span<const std::uint16_t> shard_tokens(std::span<const std::byte> bytes,
                                                   const shard_header& h) noexcept {
  // mmap'd and vector storage are at least 4-byte aligned and the header is 1024 bytes long, so
  // the tokens are 2-byte aligned and may be read in place.
  return {reinterpret_cast<const std::uint16_t*>(bytes.data() + h.data_offset),
          static_cast<std::size_t>(h.token_count)};
}

/// Throws format_error naming the file, the first offending token index and its value when a
/// token is >= vocab_size. A max-reduction per block keeps the common (valid) case vectorised.
inline void check_token_range(std::span<const std::uint16_t> tokens, int vocab_size,
                              const std::string& path) {
  if (vocab_size >= 65536) return;  // every uint16 is in range
  const auto bound = static_cast<std::uint16_t>(std::max(vocab_size, 0));
  constexpr std::size_t block = 1 << 16;
  for (std::size_t start = 0; start < tokens.size(); start += block) {
    const std::size_t n = std::min(block, tokens.size() - start);
    const std::uint16_t* t = tokens.data() + start;
    std::uint16_t hi = 0;
    for (std::size_t i = 0; i < n; ++i) hi = std::max(hi, t[i]);
    if (hi < bound && vocab_size > 0) continue;
    for (std::size_t i = 0; i < n; ++i)
      if (t[i] >= bound)
        throw format_error(path + ": token " + std::to_string(t[i]) + " at index " +
                           std::to_string(start + i) + " is out of range for vocabulary size " +
                           std::to_string(vocab_size));
  }
}

/// Reads a whole file into memory; io_error names the file and the OS's reason.
inline std::vector<std::byte> read_file_bytes(const std::string& path) {
  detail::fd_guard fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw io_error(path + ": cannot open token file: " + detail::errno_text(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    throw io_error(path + ": fstat failed: " + detail::errno_text(errno));
  if (!S_ISREG(st.st_mode)) throw format_error(path + ": not a regular file");
  std::vector<std::byte> bytes(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw io_error(path + ": read failed: " + detail::errno_text(errno));
    if (n == 0) throw io_error(path + ": file shrank while being read");
    done += std::size_t(n);
  }
  return bytes;
}

/// Header of the token file at `path` (reads the file; for tools, not for the training loop).
inline shard_header read_shard_header(const std::string& path,
                                      shard_layout layout = shard_layout::llmc) {
  const std::vector<std::byte> bytes = read_file_bytes(path);
  return parse_shard_header(bytes, path, layout);
}

/// All tokens of the token file at `path`, range-checked against `vocab_size`.
inline std::vector<std::uint16_t> read_shard(const std::string& path, int vocab_size = 65536,
                                             shard_layout layout = shard_layout::llmc) {
  const std::vector<std::byte> bytes = read_file_bytes(path);
  const shard_header h = parse_shard_header(bytes, path, layout);
  const auto tokens = shard_tokens(bytes, h);
  check_token_range(tokens, vocab_size, path);
  return {tokens.begin(), tokens.end()};
}

/// Writes `tokens` as a headered shard (version 1). The data goes to `path + ".tmp"`, is fsync'd
/// and renamed over `path`, and the directory is fsync'd, so a crash leaves either the old file or
/// the complete new one, never a torn shard that a later run would read as data.
inline void write_shard(const std::string& path, std::span<const std::uint16_t> tokens) {
  if (tokens.size() > std::size_t(std::numeric_limits<std::int32_t>::max()))
    throw config_error(path + ": " + std::to_string(tokens.size()) +
                       " tokens do not fit one shard (the header count is an int32)");
  const std::string tmp = path + ".tmp";
  std::int32_t header[shard_header_ints] = {};
  header[0] = shard_magic;
  header[1] = shard_version;
  header[2] = static_cast<std::int32_t>(tokens.size());

  {
    detail::fd_guard fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) throw io_error(tmp + ": cannot create: " + detail::errno_text(errno));
    auto write_all = [&](const void* data, std::size_t n) {
      const auto* c = static_cast<const char*>(data);
      while (n > 0) {
        const ssize_t w = ::write(fd.get(), c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
          const int err = errno;
          ::unlink(tmp.c_str());
          throw io_error(tmp + ": write failed: " + detail::errno_text(err));
        }
        c += w;
        n -= std::size_t(w);
      }
    };
    write_all(header, sizeof header);
    write_all(tokens.data(), tokens.size_bytes());
    if (::fsync(fd.get()) != 0 || fd.close_checked() != 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      throw io_error(tmp + ": fsync/close failed: " + detail::errno_text(err));
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw io_error(tmp + ": rename to " + path + " failed: " + detail::errno_text(err));
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  detail::fd_guard dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() >= 0) ::fsync(dfd.get());  // best effort: some filesystems refuse directory fsync
}

}  // namespace trainkit::data
