// trainkit/checkpoint/detail/dir_lock.hpp — an advisory lock on a directory, by which a process
// that writes or deletes under one of trainkit's temporary names says "still alive".
//
// Stale temporaries (the wrecks of crashed saves) are removed at start-up and before each save,
// but another process may be saving into the same directory right now, under the same kind of
// name. Each writer therefore holds flock(2) on its temporary directory for as long as it exists
// under that name, and the cleanup removes only the temporaries it can lock itself: the kernel
// drops a lock when its holder dies, however it dies (SIGKILL included), so a lock that cannot be
// taken means a live writer, and no pid or host has to be guessed. flock is per open file
// description, so it also separates two checkpointers in one process; on NFS Linux maps it to a
// byte-range lock the server sees from every client.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <optional>
#include <utility>

#include "trainkit/checkpoint/detail/posix_file.hpp"

namespace trainkit::checkpoint::detail {

class dir_lock {
 public:
  /// Locks `dir`, waiting for a holder (a cleanup deciding about it) to let go. io_error when it
  /// cannot be opened.
  static dir_lock lock(const std::filesystem::path& dir) {
    dir_lock l(open_dir(dir));
    if (l.fd_ < 0) throw_io("cannot open checkpoint directory", dir, errno);
    int rc;
    do {
      rc = ::flock(l.fd_, LOCK_EX);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) throw_io("cannot lock checkpoint directory", dir, errno);
    return l;
  }

  /// Locks `dir` if no one else holds it: nullopt when a live process does. A path that cannot
  /// be opened as a directory (gone, or a file) has no holder either: an unheld lock is returned.
  static std::optional<dir_lock> try_lock(const std::filesystem::path& dir) {
    dir_lock l(open_dir(dir));
    if (l.fd_ >= 0 && ::flock(l.fd_, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
      return std::nullopt;
    return l;
  }

  dir_lock(dir_lock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  dir_lock& operator=(dir_lock&& o) noexcept {
    if (this != &o) {
      release();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  dir_lock(const dir_lock&) = delete;
  dir_lock& operator=(const dir_lock&) = delete;
  ~dir_lock() { release(); }

  /// Whether the locked directory is still the one at `dir` (a cleanup may have removed it
  /// between the writer's mkdir and its lock).
  bool still_at(const std::filesystem::path& dir) const noexcept {
    struct stat held {
    }, named{};
    return fd_ >= 0 && ::fstat(fd_, &held) == 0 && held.st_nlink > 0 &&
           ::stat(dir.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
           held.st_ino == named.st_ino;
  }

 private:
  explicit dir_lock(int fd) noexcept : fd_(fd) {}
  static int open_dir(const std::filesystem::path& dir) noexcept {
    return ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  void release() noexcept {
    if (fd_ >= 0) ::close(fd_);  // closing the last descriptor drops the lock
    fd_ = -1;
  }

  int fd_ = -1;
};

}  // namespace trainkit::checkpoint::detail
