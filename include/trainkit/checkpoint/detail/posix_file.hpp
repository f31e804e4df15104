// trainkit/checkpoint/detail/posix_file.hpp — the POSIX file calls a crash-safe checkpoint needs.
//
// std::ofstream cannot fsync and reports failures without errno, so checkpoints use file
// descriptors directly: full writes and reads that survive EINTR and short transfers, fsync of
// files and of directories (a rename is only durable once its directory is synced), and io_error
// messages carrying the path and strerror text. Linux/POSIX only, like the rest of the I/O code.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "trainkit/core/error.hpp"

namespace trainkit::checkpoint::detail {

[[noreturn]] inline void throw_io(const std::string& what, const std::filesystem::path& path,
                                  int err) {
  throw io_error(what + " '" + path.string() + "': " + std::strerror(err));
}

[[noreturn]] inline void throw_io(const std::string& what, const std::filesystem::path& path,
                                  const std::error_code& ec) {
  throw io_error(what + " '" + path.string() + "': " + ec.message());
}

/// Test seam: when >= 0, how many more bytes checkpoint writes may put on disk before write
/// fails with ENOSPC, as on a full disk (where a test cannot mount a small tmpfs). -1, the
/// default, disables it; real runs never set it.
inline std::atomic<std::int64_t> simulated_disk_space{-1};

/// An open file descriptor that closes itself; every failure throws io_error naming the path.
class posix_file {
 public:
  /// Creates (or truncates) `path` for writing.
  static posix_file create(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw_io("cannot create", path, errno);
    return posix_file(fd, path);
  }

  static posix_file open_read(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw_io("cannot open", path, errno);
    return posix_file(fd, path);
  }

  /// Opens a directory so it can be fsynced.
  static posix_file open_directory(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) throw_io("cannot open directory", path, errno);
    return posix_file(fd, path);
  }

  posix_file(posix_file&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}
  posix_file& operator=(posix_file&&) = delete;
  posix_file(const posix_file&) = delete;
  posix_file& operator=(const posix_file&) = delete;
  ~posix_file() {
    if (fd_ >= 0) ::close(fd_);  // error paths only; `close()` reports errors on success paths
  }

  void write_all(const void* data, std::size_t n) {
    const auto* p = static_cast<const std::byte*>(data);
    while (n > 0) {
      std::size_t chunk = n;
      if (const std::int64_t space = simulated_disk_space.load(); space >= 0) {
        if (space == 0) throw_io("cannot write", path_, ENOSPC);
        chunk = std::min(n, std::size_t(space));
        simulated_disk_space -= std::int64_t(chunk);
      }
      const ssize_t w = ::write(fd_, p, chunk);
      if (w < 0) {
        if (errno == EINTR) continue;
        throw_io("cannot write", path_, errno);
      }
      p += w;
      n -= std::size_t(w);
    }
  }

  /// Reads exactly n bytes at `offset`; a file that ends early is a format_error (truncated).
  void read_all_at(void* data, std::size_t n, std::uint64_t offset) {
    auto* p = static_cast<std::byte*>(data);
    while (n > 0) {
      const ssize_t r = ::pread(fd_, p, n, off_t(offset));
      if (r < 0) {
        if (errno == EINTR) continue;
        throw_io("cannot read", path_, errno);
      }
      if (r == 0)
        throw format_error("'" + path_.string() + "' ends early at byte " + std::to_string(offset));
      p += r;
      n -= std::size_t(r);
      offset += std::uint64_t(r);
    }
  }

  std::uint64_t size() const {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw_io("cannot stat", path_, errno);
    return std::uint64_t(st.st_size);
  }

  void sync() {
    if (::fsync(fd_) != 0) throw_io("cannot fsync", path_, errno);
  }

  /// Closes and reports the error a deferred write-back may surface only here (NFS, quotas).
  void close() {
    const int fd = std::exchange(fd_, -1);
    if (fd >= 0 && ::close(fd) != 0) throw_io("cannot close", path_, errno);
  }

 private:
  posix_file(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}

  int fd_ = -1;
  std::filesystem::path path_;
};

/// Makes a completed rename or file creation inside `dir` durable.
inline void fsync_directory(const std::filesystem::path& dir) {
  posix_file d = posix_file::open_directory(dir);
  d.sync();
  d.close();
}

/// Reads a whole (small) file, e.g. a manifest.
inline std::string read_text_file(const std::filesystem::path& path) {
  posix_file f = posix_file::open_read(path);
  std::string text(f.size(), '\0');
  f.read_all_at(text.data(), text.size(), 0);
  f.close();
  return text;
}

}  // namespace trainkit::checkpoint::detail
