// trainkit/core/cuda/launch_checks.hpp — what a kernel's can_implement() needs: grid sizes and
// requirements that throw config_error naming the kernel and what failed.
//
// They sit on every launch, so a message is built only when its check fails: a fixed text is a
// `const char*`, a formatted one a callable returning it. Host code only; no CUDA headers needed.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "trainkit/core/error.hpp"

namespace trainkit::cuda {

/// Blocks of `b` threads that cover `a` elements.
inline unsigned ceil_div(std::size_t a, std::size_t b) {
  return unsigned((a + b - 1) / b);
}

[[noreturn]] inline void cannot_run(const char* kernel, std::string_view what) {
  throw config_error(std::string(kernel) + ": cannot run: " + std::string(what));
}
inline void require(bool ok, const char* kernel, const char* what) {
  if (!ok) [[unlikely]]
    cannot_run(kernel, what);
}
template <std::invocable Describe>
inline void require(bool ok, const char* kernel, Describe&& describe) {
  if (!ok) [[unlikely]]
    cannot_run(kernel, std::forward<Describe>(describe)());
}
inline bool aligned_to(const void* p, std::size_t bytes) noexcept {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

}  // namespace trainkit::cuda
