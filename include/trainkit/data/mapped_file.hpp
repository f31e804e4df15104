// trainkit/data/mapped_file.hpp — a read-only mmap(2) of a whole file, owned RAII-style.
//
// Token shards are read through the page cache instead of copied into the process: a 10 GB
// dataset then costs no resident memory beyond the pages in use, opening is instant, and a batch
// is a pointer into the mapping. The access hint (sequential read-ahead or none) is chosen by the
// data order. The descriptor is closed right after mapping; the mapping keeps the file alive.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <utility>

#include "trainkit/core/error.hpp"

namespace trainkit::data {

/// How the mapping will be read; passed to madvise(2).
enum class access_hint { normal, sequential, random };

/// Owns a read-only mapping of one file. Movable, not copyable; unmaps on destruction.
class mapped_file {
 public:
  mapped_file() = default;

  /// Maps `path` read-only. io_error names the file and the OS's reason; a directory or other
  /// non-regular file is a format_error. An empty file maps to an empty span (mmap rejects
  /// zero-length mappings).
  explicit mapped_file(const std::string& path, access_hint hint = access_hint::normal)
      : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw io_error(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      throw io_error(path + ": fstat failed: " + std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      throw format_error(path + ": not a regular file");
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        throw io_error(path + ": mmap of " + std::to_string(size_) +
                       " bytes failed: " + std::strerror(err));
      }
      data_ = p;
      advise(hint);
    }
    ::close(fd);
  }

  mapped_file(mapped_file&& o) noexcept
      : path_(std::move(o.path_)),
        data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)) {}
  mapped_file& operator=(mapped_file&& o) noexcept {
    if (this != &o) {
      unmap();
      path_ = std::move(o.path_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  ~mapped_file() { unmap(); }

  std::span<const std::byte> bytes() const noexcept {
    return {static_cast<const std::byte*>(data_), size_};
  }
  std::size_t size() const noexcept { return size_; }
  const std::string& path() const noexcept { return path_; }

  /// Changes the kernel's read-ahead policy; purely advisory, so failures are ignored.
  void advise(access_hint hint) const noexcept {
    if (data_ == nullptr) return;
    const int advice = hint == access_hint::sequential ? MADV_SEQUENTIAL
                       : hint == access_hint::random   ? MADV_RANDOM
                                                       : MADV_NORMAL;
    ::madvise(data_, size_, advice);
  }

 private:
  void unmap() noexcept {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
  }

  std::string path_;
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace trainkit::data
