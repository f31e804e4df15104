// trainkit/trainer/nvtx.hpp — NVTX ranges around the trainer's phases, or nothing.
//
// With ranges named like the report's phases (data_wait, compute, optimizer, ckpt_stall, ...),
// an Nsight Systems timeline lines up with the metrics: a long "ckpt_stall" bar in the timeline
// is the same stall the report blames. NVTX v3 is header-only and ships with the CUDA toolkit;
// without a profiler attached each push/pop is a check of a null function pointer.
//
// TRAINKIT_NVTX selects the implementation: 1 = real ranges (nvtx3 must be reachable), 0 = empty
// inline no-ops. Left undefined it is 1 only when compiling with nvcc and nvtx3 is found: some
// machines expose the CUDA headers to the host compiler too, and a CPU-only build must not start
// calling into NVTX because of that (a host TU that wants ranges defines TRAINKIT_NVTX=1). One
// program may mix both settings (gpt_fineweb: main.cpp by g++, train/cuda.cu by nvcc), so each
// implementation lives in its own inline namespace: two definitions of one inline class would
// violate the one-definition rule and let the linker keep either.
#pragma once

#include <cstdint>

#include "trainkit/trainer/step_metrics.hpp"

#if !defined(TRAINKIT_NVTX)
#if defined(__CUDACC__) && defined(__has_include)
#if __has_include(<nvtx3/nvToolsExt.h>)
#define TRAINKIT_NVTX 1
#endif
#endif
#endif
#if !defined(TRAINKIT_NVTX)
#define TRAINKIT_NVTX 0
#endif

#if TRAINKIT_NVTX
#if defined(__has_include)
#if !__has_include(<nvtx3/nvToolsExt.h>)
#error "TRAINKIT_NVTX=1 but <nvtx3/nvToolsExt.h> is not on the include path (CUDA toolkit)"
#endif
#endif
#include <nvtx3/nvToolsExt.h>
#endif

namespace trainkit {
#if TRAINKIT_NVTX
inline namespace nvtx_ranges {
#else
inline namespace nvtx_noop {
#endif

/// True when ranges reach NVTX (and so Nsight Systems).
inline constexpr bool nvtx_enabled = TRAINKIT_NVTX != 0;

/// ARGB colour of the range around a whole step; each phase's range takes its colour from the
/// phase table (trainer/step_metrics.hpp), which the report's chart draws with too.
namespace nvtx_colors {
inline constexpr std::uint32_t step = step_range_argb;
}  // namespace nvtx_colors

/// A push/pop range on the calling thread: opened by the constructor, closed by `end()` or the
/// destructor, whichever comes first (end() lets a range close before a variable it produced
/// goes out of scope). Names must outlive the range (string literals).
class nvtx_range {
 public:
  explicit nvtx_range([[maybe_unused]] const char* name,
                      [[maybe_unused]] std::uint32_t argb = 0) noexcept {
#if TRAINKIT_NVTX
    if (argb == 0) {
      nvtxRangePushA(name);
    } else {
      nvtxEventAttributes_t a{};
      a.version = NVTX_VERSION;
      a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
      a.colorType = NVTX_COLOR_ARGB;
      a.color = argb;
      a.messageType = NVTX_MESSAGE_TYPE_ASCII;
      a.message.ascii = name;
      nvtxRangePushEx(&a);
    }
    open_ = true;
#endif
  }
  ~nvtx_range() {
    end();
  }
  nvtx_range(const nvtx_range&) = delete;
  nvtx_range& operator=(const nvtx_range&) = delete;

  void end() noexcept {
#if TRAINKIT_NVTX
    if (open_) nvtxRangePop();
#endif
    open_ = false;
  }

  bool open() const noexcept {
    return open_;
  }

 private:
  bool open_ = false;
};

}  // namespace nvtx_ranges / nvtx_noop
}  // namespace trainkit
