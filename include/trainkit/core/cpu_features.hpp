// trainkit/core/cpu_features.hpp — what the running x86 CPU can do, asked of the CPU itself
// (CPUID, and XGETBV for what the operating system lets programs use), at run time.
//
// The binaries are built for a portable baseline (x86-64-v3 by default) and may run on any
// machine, so the choice of a bf16 GEMM (linalg::gemm_precision) cannot rest on compile-time
// macros: a library like oneDNN picks its kernels at run time, and trainkit refuses bf16 where the
// CPU has no bf16 instructions, rather than let oneDNN emulate them at a fraction of fp32's speed.
// The model name (CPUID's brand string) goes into error messages and benchmark tables. The vendor,
// family and model numbers and a measured core clock feed the CPU's peak FLOP/s
// (device_info.hpp's cpu_peak): nothing a datasheet table could hold, since "cpu" is any CPU.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#if defined(__unix__)
#include <time.h>
#endif

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <cpuid.h>
#define TRAINKIT_X86 1
#endif

namespace trainkit {

struct cpu_features {
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false;
  bool avx512_bf16 = false;  // VDPBF16PS and friends (Cooper Lake, Sapphire Rapids, Zen 4+)
  bool amx_bf16 = false;     // AMX tiles with bf16 (Sapphire Rapids+), enabled by the OS
  std::string model;         // brand string, e.g. "AMD EPYC 9654 96-Core Processor"
  std::string vendor;        // "AuthenticAMD", "GenuineIntel", ...
  unsigned family = 0;       // CPUID family with the extended family (AMD Zen 4: 0x19, Zen 5: 0x1a)
  unsigned model_number = 0;  // CPUID model with the extended model

  /// bf16 products at (at least) twice fp32's rate: AVX512_BF16 or AMX-BF16.
  bool has_native_bf16() const noexcept { return avx512_bf16 || amx_bf16; }

  /// "avx2 fma avx512f avx512bw avx512vl avx512_bf16 amx_bf16", the ones present.
  std::string flags() const {
    std::string s;
    auto add = [&](bool on, const char* name) {
      if (!on) return;
      if (!s.empty()) s += ' ';
      s += name;
    };
    add(avx2, "avx2");
    add(fma, "fma");
    add(avx512f, "avx512f");
    add(avx512bw, "avx512bw");
    add(avx512vl, "avx512vl");
    add(avx512_bf16, "avx512_bf16");
    add(amx_bf16, "amx_bf16");
    return s.empty() ? "none of avx2/avx512/bf16" : s;
  }
};

namespace detail {

#if defined(TRAINKIT_X86)
inline std::uint64_t xgetbv0() noexcept {
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (std::uint64_t(hi) << 32) | lo;
}
#endif

inline cpu_features detect_cpu_features() {
  cpu_features f;
#if defined(TRAINKIT_X86)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  const unsigned base_family = (a >> 8) & 0xf;
  f.family = base_family == 0xf ? base_family + ((a >> 20) & 0xff) : base_family;
  f.model_number = (a >> 4) & 0xf;
  if (base_family == 0x6 || base_family == 0xf) f.model_number |= ((a >> 16) & 0xf) << 4;
  {
    unsigned leaf0[4] = {};
    __get_cpuid(0, &leaf0[0], &leaf0[1], &leaf0[2], &leaf0[3]);
    char v[13] = {};
    std::memcpy(v, &leaf0[1], 4);  // EBX, EDX, ECX spell it
    std::memcpy(v + 4, &leaf0[3], 4);
    std::memcpy(v + 8, &leaf0[2], 4);
    f.vendor = v;
  }
  f.fma = c & (1u << 12);
  // The OS must save the registers: XCR0 bits 1-2 (SSE, AVX), 5-7 (AVX-512), 17-18 (AMX tiles).
  const std::uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6;
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;
  if (!os_avx) f.fma = false;
  const unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    f.avx2 = os_avx && (b & (1u << 5));
    f.avx512f = os_avx512 && (b & (1u << 16));
    f.avx512bw = os_avx512 && (b & (1u << 30));
    f.avx512vl = os_avx512 && (b & (1u << 31));
    f.amx_bf16 = os_amx && (d & (1u << 22));
    const unsigned sub_leaves = a;
    if (sub_leaves >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      f.avx512_bf16 = os_avx512 && (a & (1u << 5));
    }
  }
  char brand[49] = {};
  if (__get_cpuid_max(0x80000000u, nullptr) >= 0x80000004u) {
    for (unsigned i = 0; i < 3; ++i) {
      unsigned r[4];
      __get_cpuid(0x80000002u + i, &r[0], &r[1], &r[2], &r[3]);
      std::memcpy(brand + 16 * i, r, 16);
    }
  }
  f.model = brand;
  const auto first = f.model.find_first_not_of(' ');
  f.model = first == std::string::npos ? "" : f.model.substr(first);
  while (!f.model.empty() && f.model.back() == ' ') f.model.pop_back();
#endif
  if (f.model.empty()) f.model = "unknown CPU";
  return f;
}

}  // namespace detail

/// The running CPU's features, detected once.
inline const cpu_features& this_cpu() {
  static const cpu_features f = detail::detect_cpu_features();
  return f;
}

namespace detail {
#if defined(__unix__)
inline double thread_cpu_seconds() noexcept {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}
#endif
}  // namespace detail

/// The core clock in GHz this thread runs at, measured: a chain of dependent register additions
/// (one cycle each on every x86 core since the Pentium 4; register operands, not immediates, which
/// some renamers fold) timed in the thread's CPU time, so time the thread spent descheduled does
/// not count; the fastest of `reps` runs of ~2 ms (~30 ms in all). Turbo included: the clock the
/// arithmetic really gets, which the operating system's figure (/proc/cpuinfo's "cpu MHz": the
/// TSC's nominal rate under a hypervisor, 2.6 GHz on the AMD EPYC of issue 37 whose cores run at
/// ~4.5) is not. 0 where it cannot be measured (not x86, or no thread clock).
inline double measure_core_ghz(int reps = 16) {
#if defined(TRAINKIT_X86) && defined(__unix__) && defined(__x86_64__)
  constexpr std::uint64_t iterations = 250000, adds_per_iteration = 32;
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    std::uint64_t x = 0, one = 1, n = iterations;
    const double t0 = detail::thread_cpu_seconds();
    __asm__ volatile(
        "1:\n\t"
        ".rept 32\n\t"
        "add %[one], %[x]\n\t"
        ".endr\n\t"
        "dec %[n]\n\t"
        "jnz 1b\n"
        : [x] "+r"(x), [n] "+r"(n)
        : [one] "r"(one)
        : "cc");
    const double dt = detail::thread_cpu_seconds() - t0;
    if (dt > 0) best = std::max(best, double(iterations * adds_per_iteration) / dt / 1e9);
  }
  return best;
#else
  (void)reps;
  return 0;
#endif
}

}  // namespace trainkit
