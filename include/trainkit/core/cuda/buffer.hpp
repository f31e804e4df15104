// trainkit/core/cuda/buffer.hpp — owning device and pinned-host buffers, and the copies between
// them.
//
// `device_buffer<T>` owns cudaMalloc memory, `pinned_buffer<T>` owns page-locked host memory from
// cudaHostAlloc (the only host memory an async copy can read or write without the driver staging
// it through a bounce buffer, so a copy overlaps compute). Both are movable, non-copyable, sized
// in elements, and free their memory in a destructor that never throws. The copy helpers check
// sizes before they enqueue, so a mismatch throws here instead of corrupting memory later.
// Host-compilable (cuda_runtime.h only).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/error.hpp"

namespace trainkit::cuda {

namespace detail {

template <class T>
std::size_t bytes_of(std::size_t n) {
  if (n > std::size_t(-1) / sizeof(T))
    throw config_error("cuda buffer of " + std::to_string(n) + " elements overflows size_t");
  return n * sizeof(T);
}

inline void check_copy_sizes(std::size_t dst, std::size_t src, const char* what) {
  if (dst != src)
    throw config_error(std::string(what) + ": destination holds " + std::to_string(dst) +
                       " elements, source " + std::to_string(src));
}

}  // namespace detail

/// `n` elements of T in device global memory (uninitialised). cudaMalloc aligns to 256 bytes.
template <class T>
class device_buffer {
  static_assert(std::is_trivially_copyable_v<T>, "device buffers hold trivially copyable types");

 public:
  device_buffer() = default;
  explicit device_buffer(std::size_t n) : size_(n) {
    if (n)
      TRAINKIT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), detail::bytes_of<T>(n)));
  }
  device_buffer(device_buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() { reset(); }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t bytes() const noexcept { return size_ * sizeof(T); }
  bool empty() const noexcept { return size_ == 0; }
  /// A span over device memory: dereferencing it on the host is an error.
  std::span<T> device_span() noexcept { return {data_, size_}; }

  /// Sets every byte to `byte` (0xff makes bf16 and float NaN: a poison for tests).
  void fill_bytes_async(int byte, cudaStream_t s) {
    if (size_) TRAINKIT_CUDA_CHECK(cudaMemsetAsync(data_, byte, bytes(), s));
  }

 private:
  void reset() noexcept {
    if (data_) (void)cudaFree(data_);
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

/// `n` elements of T in page-locked host memory (uninitialised).
template <class T>
class pinned_buffer {
  static_assert(std::is_trivially_copyable_v<T>, "pinned buffers hold trivially copyable types");

 public:
  pinned_buffer() = default;
  /// `flags` as cudaHostAlloc's, e.g. cudaHostAllocWriteCombined for buffers the host only writes.
  explicit pinned_buffer(std::size_t n, unsigned flags = cudaHostAllocDefault) : size_(n) {
    if (n)
      TRAINKIT_CUDA_CHECK(
          cudaHostAlloc(reinterpret_cast<void**>(&data_), detail::bytes_of<T>(n), flags));
  }
  pinned_buffer(pinned_buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  pinned_buffer& operator=(pinned_buffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;
  ~pinned_buffer() { reset(); }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t bytes() const noexcept { return size_ * sizeof(T); }
  bool empty() const noexcept { return size_ == 0; }
  std::span<T> span() noexcept { return {data_, size_}; }
  std::span<const T> span() const noexcept { return {data_, size_}; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }

 private:
  void reset() noexcept {
    if (data_) (void)cudaFreeHost(data_);
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

/// Enqueues host → device. `src` should be pinned for the copy to be truly asynchronous; pageable
/// memory works but the call returns only once the driver has staged it.
template <class T>
void copy_to_device_async(T* dst, std::span<const T> src, cudaStream_t s) {
  if (!src.empty())
    TRAINKIT_CUDA_CHECK(
        cudaMemcpyAsync(dst, src.data(), src.size_bytes(), cudaMemcpyHostToDevice, s));
}

template <class T>
void copy_to_device_async(device_buffer<T>& dst, std::span<const T> src, cudaStream_t s) {
  detail::check_copy_sizes(dst.size(), src.size(), "copy_to_device_async");
  copy_to_device_async(dst.data(), src, s);
}

/// Enqueues device → host; `dst` must stay alive until the stream reaches this point.
template <class T>
void copy_to_host_async(std::span<T> dst, const T* src, cudaStream_t s) {
  if (!dst.empty())
    TRAINKIT_CUDA_CHECK(
        cudaMemcpyAsync(dst.data(), src, dst.size_bytes(), cudaMemcpyDeviceToHost, s));
}

template <class T>
void copy_to_host_async(std::span<T> dst, const device_buffer<T>& src, cudaStream_t s) {
  detail::check_copy_sizes(dst.size(), src.size(), "copy_to_host_async");
  copy_to_host_async(dst, src.data(), s);
}

/// Enqueues device → device of `n` elements.
template <class T>
void copy_device_async(T* dst, const T* src, std::size_t n, cudaStream_t s) {
  if (n)
    TRAINKIT_CUDA_CHECK(
        cudaMemcpyAsync(dst, src, detail::bytes_of<T>(n), cudaMemcpyDeviceToDevice, s));
}

/// Blocking host → device copy of a whole span, ordered on stream `s`: enqueued there, then `s`
/// synchronised, so the host memory may be freed and every later launch on `s` sees the data.
/// For memory that work on a non-blocking stream consumes next: a plain cudaMemcpy from pageable
/// memory may return before its DMA lands, and a non-blocking stream is not ordered after it.
template <class T>
void copy_to_device(T* dst, std::span<const T> src, cudaStream_t s) {
  if (src.empty()) return;
  TRAINKIT_CUDA_CHECK(
      cudaMemcpyAsync(dst, src.data(), src.size_bytes(), cudaMemcpyHostToDevice, s));
  TRAINKIT_CUDA_CHECK(cudaStreamSynchronize(s));
}

/// Blocking device → host copy into a whole span, ordered on stream `s` (after its earlier work).
template <class T>
void copy_to_host(std::span<T> dst, const T* src, cudaStream_t s) {
  if (dst.empty()) return;
  TRAINKIT_CUDA_CHECK(
      cudaMemcpyAsync(dst.data(), src, dst.size_bytes(), cudaMemcpyDeviceToHost, s));
  TRAINKIT_CUDA_CHECK(cudaStreamSynchronize(s));
}

/// Blocking host → device copy of a whole span on the legacy default stream (set-up paths whose
/// consumer synchronises the device first); prefer the stream overload.
template <class T>
void copy_to_device(T* dst, std::span<const T> src) {
  if (!src.empty())
    TRAINKIT_CUDA_CHECK(cudaMemcpy(dst, src.data(), src.size_bytes(), cudaMemcpyHostToDevice));
}

/// Blocking device → host copy into a whole span (set-up paths, tests).
template <class T>
void copy_to_host(std::span<T> dst, const T* src) {
  if (!dst.empty())
    TRAINKIT_CUDA_CHECK(cudaMemcpy(dst.data(), src, dst.size_bytes(), cudaMemcpyDeviceToHost));
}

}  // namespace trainkit::cuda
