// trainkit/model/detail/aligned_vector.hpp — std::vector storage on 64-byte boundaries.
//
// Eigen's vectorised sums peel scalars until the data reaches a packet boundary, so the order in
// which a row is summed depends on its address modulo the packet size. Two models with the same
// weights would then round differently. Aligning every buffer to 64 bytes (the widest packet,
// AVX-512) makes each row's alignment a function of the shapes alone, so results are
// bit-identical across instances, copies and runs.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace trainkit::model::detail {

inline constexpr std::size_t buffer_alignment = 64;

template <class T>
struct aligned_allocator {
  using value_type = T;

  aligned_allocator() noexcept = default;
  template <class U>
  aligned_allocator(const aligned_allocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{buffer_alignment}));
  }
  void deallocate(T* p, std::size_t) noexcept {
    ::operator delete (p, std::align_val_t{buffer_alignment});
  }

  template <class U>
  friend bool operator==(const aligned_allocator&, const aligned_allocator<U>&) noexcept {
    return true;
  }
};

template <class T>
using aligned_vector = std::vector<T, aligned_allocator<T>>;

}  // namespace trainkit::model::detail
