// trainkit/checkpoint/detail/staging_buffer.hpp — the host memory a checkpoint snapshot is copied
// into, allocated once and reused by every later save.
//
// The asynchronous checkpointer's stall is one memcpy of the training state, so the buffer it
// copies into must not add page faults to that copy: it is mmap'd with MAP_POPULATE (the kernel
// fills the pages in one pass instead of one fault per 4 KiB page inside the memcpy) and advised
// to use transparent huge pages, which also cuts TLB misses on a multi-gigabyte copy. It only
// grows: a state of the same size (every save of a run) reuses it as it is.
#pragma once

#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>

#include "trainkit/core/error.hpp"

namespace trainkit::checkpoint::detail {

class staging_buffer {
 public:
  staging_buffer() = default;
  staging_buffer(staging_buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        capacity_(std::exchange(other.capacity_, 0)),
        allocations_(std::exchange(other.allocations_, 0)) {}
  staging_buffer& operator=(staging_buffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      capacity_ = std::exchange(other.capacity_, 0);
      allocations_ = std::exchange(other.allocations_, 0);
    }
    return *this;
  }
  staging_buffer(const staging_buffer&) = delete;
  staging_buffer& operator=(const staging_buffer&) = delete;
  ~staging_buffer() { release(); }

  /// At least `bytes` bytes, page aligned. Contents are not preserved when it grows (the
  /// snapshot is rewritten whole on every save).
  std::byte* reserve(std::size_t bytes) {
    if (bytes <= capacity_) return data_;
    release();
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      throw io_error("cannot allocate a checkpoint staging buffer of " + std::to_string(bytes) +
                     " bytes: " + std::strerror(errno));
#ifdef MADV_HUGEPAGE
    ::madvise(p, bytes, MADV_HUGEPAGE);  // a hint: failure (no THP) only costs speed
#endif
    // Touch every page now (MADV_POPULATE_WRITE where available, else one write per page), after
    // the huge-page advice so the fault-in uses huge pages.
    prefault(static_cast<std::byte*>(p), bytes);
    data_ = static_cast<std::byte*>(p);
    capacity_ = bytes;
    ++allocations_;
    return data_;
  }

  std::byte* data() const noexcept {
    return data_;
  }
  std::size_t capacity() const noexcept {
    return capacity_;
  }
  /// How many times `reserve` has mapped (and faulted in) new memory.
  std::size_t allocations() const noexcept {
    return allocations_;
  }

 private:
  static void prefault(std::byte* p, std::size_t bytes) {
#ifdef MADV_POPULATE_WRITE
    if (::madvise(p, bytes, MADV_POPULATE_WRITE) == 0) return;
#endif
    constexpr std::size_t page = 4096;
    for (std::size_t i = 0; i < bytes; i += page) p[i] = std::byte{0};
  }

  void release() noexcept {
    if (data_ != nullptr) ::munmap(data_, capacity_);
    data_ = nullptr;
    capacity_ = 0;
  }

  std::byte* data_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t allocations_ = 0;
};

}  // namespace trainkit::checkpoint::detail
