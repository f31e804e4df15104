// trainkit/core/linalg/gemm_cpu.hpp — the CPU matrix product every host-side GEMM goes through:
// row-major operands in flat buffers, one slab of the output per OpenMP thread, an epilogue per
// slab; fp32 by Eigen or oneDNN, or bf16 operands by oneDNN (gemm_settings).
//
// Shared by whatever runs GEMMs on the host (the CPU models' layers; an optimizer that needs
// matrix products, e.g. an orthogonalising one, can call it without depending on a model). Results
// are bit-identical run to run for a fixed thread count and settings: slabs are fixed by the
// shapes and the thread count, never by scheduling.
//
// Which library: Eigen's kernels are chosen by the compiler flags (x86-64-v3, trainkit's default
// for portable binaries, gives AVX2: half the fp32 rate of a CPU with 512-bit FMA units), oneDNN's
// at run time. Measured on an AMD EPYC (Zen 5, family 26), one thread, 512×768·768×3072:
// Eigen at x86-64-v3 129 GFLOP/s, Eigen at x86-64-v4 227, oneDNN (either build) 215 (bench/
// RESULTS.md, issue 37). So fp32 float products go through oneDNN when trainkit is built with it
// (CMake finds libdnnl-dev) and Eigen otherwise; double products (the finite-difference models)
// always through Eigen, the reference. gemm_precision::bf16 rounds both operands of gemm() to
// bf16 and multiplies them with fp32 sums (the recipe of mixed-precision training: the callers
// keep fp32 master weights, activations and gradients), at up to twice fp32's rate on CPUs with
// AVX512_BF16 and more with AMX; it is refused (config_error) on CPUs with neither, where oneDNN
// would emulate bf16 slower than fp32, and in builds without oneDNN. gemm_block (the
// single-threaded product attention and Newton–Schulz call per head or matrix) stays fp32.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "trainkit/core/cpu_features.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/linalg/detail/onednn_gemm.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace trainkit::linalg {

using index = std::ptrdiff_t;

template <class S>
using row_matrix = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// A row-major matrix in a flat buffer, `stride` elements from one row to the next, read as its
/// transpose when `transposed`. Products take these rather than Eigen expressions, so each TU
/// instantiates Eigen's product machinery for four operand shapes (A or Aᵀ times B or Bᵀ) instead
/// of one per call site's expression type: that was most of the compile time of every program
/// that trains gpt2_cpu.
template <class S>
struct operand {
  const S* data = nullptr;
  index stride = 0;  // elements between rows of the *stored* matrix
  bool transposed = false;
  // The caller's promise that the matrix stays unchanged until the next new_weights_epoch() (a
  // layer's weights during one forward and backward): gemm_precision::bf16 then rounds it once per
  // epoch and reuses the bf16 copy (the "bf16 weights" of mixed precision) instead of rounding it
  // at every product.
  bool stable = false;
};

/// The arithmetic of gemm(): operands rounded to bf16 or kept in fp32.
enum class gemm_precision : std::uint8_t { fp32, bf16 };
/// The library that multiplies float matrices (double ones: always Eigen).
enum class gemm_library : std::uint8_t { eigen, onednn };

namespace detail {
/// What TRAINKIT_CPU_GEMM says: "eigen" or "onednn"; empty when it is unset or empty.
inline std::string_view library_in_environment() noexcept {
  const char* v = std::getenv("TRAINKIT_CPU_GEMM");
  return v == nullptr ? std::string_view() : std::string_view(v);
}

/// The library float products use unless told otherwise: TRAINKIT_CPU_GEMM when it names one
/// this build has, else oneDNN where trainkit was built with it and the CPU has AVX2 (its fp32
/// kernels run from AVX2 up, ~2× Eigen's at x86-64-v3 on AVX-512 CPUs), else Eigen. Never throws
/// (it initialises the process-wide settings); set_gemm_settings() refuses a TRAINKIT_CPU_GEMM it
/// cannot honour (gemm_settings_problem).
inline gemm_library default_library() noexcept {
  static const gemm_library chosen = [] {
    const std::string_view v = library_in_environment();
    if (v == "eigen") return gemm_library::eigen;
    if (v == "onednn" && has_onednn) return gemm_library::onednn;  // refused without AVX2
    return has_onednn && this_cpu().avx2 ? gemm_library::onednn : gemm_library::eigen;
  }();
  return chosen;
}
}  // namespace detail

struct gemm_settings {
  gemm_precision precision = gemm_precision::fp32;
  // oneDNN where the build has it and the CPU has AVX2, else Eigen; TRAINKIT_CPU_GEMM=eigen|onednn
  // overrides (detail::default_library). bf16 always multiplies through oneDNN. (oneDNN fp32 was
  // briefly not the default: signals handled during its pre-3.11.2 kernels corrupted the heap;
  // detail/onednn_gemm.hpp now blocks them for each product.)
  gemm_library library = detail::default_library();
  friend bool operator==(const gemm_settings&, const gemm_settings&) = default;
};

/// Why `s` cannot run in this build on this CPU; empty when it can.
inline std::string gemm_settings_problem(const gemm_settings& s) {
  if (const std::string_view env = detail::library_in_environment();
      !env.empty() && env != "eigen" && env != "onednn")
    return "TRAINKIT_CPU_GEMM=" + std::string(env) + ": expected eigen or onednn";
  else if (env == "onednn" && !detail::has_onednn)
    return "TRAINKIT_CPU_GEMM=onednn: this build has no oneDNN (Debian: libdnnl-dev; CMake option "
           "TRAINKIT_ONEDNN)";
  const bool wants_onednn =
      s.library == gemm_library::onednn || s.precision == gemm_precision::bf16;
  if (wants_onednn && !detail::has_onednn)
    return std::string(s.precision == gemm_precision::bf16 ? "bf16 GEMMs need" : "oneDNN needs") +
           " trainkit built with oneDNN (Debian: libdnnl-dev; CMake option TRAINKIT_ONEDNN), and "
           "this build has none";
  if (s.precision == gemm_precision::bf16 && !this_cpu().has_native_bf16())
    return "bf16 GEMMs need a CPU with AVX512_BF16 or AMX-BF16; this one (" + this_cpu().model +
           ", " + this_cpu().flags() +
           ") has neither, and emulated bf16 would run slower than fp32";
  if (s.library == gemm_library::onednn && s.precision == gemm_precision::fp32 && !this_cpu().avx2)
    return "oneDNN's fp32 kernels are used from AVX2 up; this CPU (" + this_cpu().model +
           ") has no AVX2";
  return {};
}

namespace detail {
inline std::atomic<gemm_settings>& gemm_settings_slot() {
  static std::atomic<gemm_settings> slot{gemm_settings{}};
  return slot;
}
}  // namespace detail

/// The process-wide settings every gemm() and gemm_block() call reads.
inline gemm_settings current_gemm_settings() noexcept {
  return detail::gemm_settings_slot().load(std::memory_order_relaxed);
}

/// Sets the process-wide GEMM settings (call it between steps, not while products run). Throws
/// config_error, naming the CPU and what it lacks, when `s` cannot run here.
inline void set_gemm_settings(const gemm_settings& s) {
  if (const std::string why = gemm_settings_problem(s); !why.empty())
    throw config_error("linalg::set_gemm_settings: " + why);
  detail::gemm_settings_slot().store(s, std::memory_order_relaxed);
}

/// Starts a new weights epoch: stable operands (operand::stable) may have changed since the last
/// one, so bf16 copies made before are not used again. The CPU models call it at the start of every
/// forward; whoever changes weights between a forward and its backward must call it too.
inline void new_weights_epoch();

/// Sets the settings for a scope (a test, a benchmark case) and restores the previous ones.
class scoped_gemm_settings {
 public:
  explicit scoped_gemm_settings(const gemm_settings& s) : saved_(current_gemm_settings()) {
    set_gemm_settings(s);
  }
  ~scoped_gemm_settings() { detail::gemm_settings_slot().store(saved_); }
  scoped_gemm_settings(const scoped_gemm_settings&) = delete;
  scoped_gemm_settings& operator=(const scoped_gemm_settings&) = delete;

 private:
  gemm_settings saved_;
};

/// C (M, N), rows `ldc` apart, = (or += when `add`) op(A) (M, K) · op(B) (K, N) in S, on the
/// calling thread when called inside a parallel region. float through oneDNN when the settings
/// say so (the default in builds with oneDNN), otherwise, and for double, Eigen.
template <class S>
void gemm_block(S* c, index ldc, operand<S> a, operand<S> b, index M, index N, index K, bool add) {
#if defined(TRAINKIT_HAS_ONEDNN)
  if constexpr (std::same_as<S, float>) {
    if (current_gemm_settings().library == gemm_library::onednn) {
      if (M > 0 && N > 0) {
        if (K == 0) {  // oneDNN wants K >= 1; an empty sum is zero
          if (!add)
            for (index r = 0; r < M; ++r) std::fill(c + r * ldc, c + r * ldc + N, 0.0f);
          return;
        }
        detail::onednn_sgemm(c, ldc, a.data, a.stride, a.transposed, b.data, b.stride, b.transposed,
                             M, N, K, add);
      }
      return;
    }
  }
#endif
  using in_map = Eigen::Map<const row_matrix<S>, Eigen::Unaligned, Eigen::OuterStride<>>;
  using out_map = Eigen::Map<row_matrix<S>, Eigen::Unaligned, Eigen::OuterStride<>>;
  out_map out(c, M, N, Eigen::OuterStride<>(ldc));
  auto run = [&](const auto& lhs, const auto& rhs) {
    if (add)
      out.noalias() += lhs * rhs;
    else
      out.noalias() = lhs * rhs;
  };
  const Eigen::OuterStride<> sa(a.stride), sb(b.stride);
  if (!a.transposed && !b.transposed)
    run(in_map(a.data, M, K, sa), in_map(b.data, K, N, sb));
  else if (!a.transposed)
    run(in_map(a.data, M, K, sa), in_map(b.data, N, K, sb).transpose());
  else if (!b.transposed)
    run(in_map(a.data, K, M, sa).transpose(), in_map(b.data, K, N, sb));
  else
    run(in_map(a.data, K, M, sa).transpose(), in_map(b.data, N, K, sb).transpose());
}

/// How gemm() cuts C between threads: along the longer side, or by rows when the epilogue needs
/// whole rows (a bias gradient summed per output row of dW).
enum class split { longer_side, rows };

namespace detail {

/// The team gemm() uses for an (M, N, K) product: below ~4 MFLOP a slab is too small to pay for
/// starting one, and inside a parallel region the caller has already split the work.
inline int gemm_threads(index M, index N, index K) {
#if defined(_OPENMP)
  if (double(M) * double(N) * double(K) >= 2e6 && !omp_in_parallel()) return omp_get_max_threads();
#else
  (void)M, (void)N, (void)K;
#endif
  return 1;
}

/// Cuts C (M, N) into one slab per thread (fixed by the shapes and `threads`) and calls
/// slab(begin, count, by_columns) on each, in an OpenMP team of `threads`.
template <class Slab>
void for_each_slab(index M, index N, split how, int threads, Slab&& slab) {
  const bool split_cols = how == split::longer_side && N >= M;
  const index extent = split_cols ? N : M;
  constexpr index granule = 16;  // slab edges on whole AVX-512 packets
  const index per = ((extent + threads - 1) / threads + granule - 1) / granule * granule;
#if defined(_OPENMP)
#pragma omp parallel num_threads(threads)
#endif
  {
#if defined(_OPENMP)
    const index begin = index(omp_get_thread_num()) * per;
#else
    const index begin = 0;
#endif
    const index n = std::min(per, extent - begin);
    if (n > 0) slab(begin, n, split_cols);
  }
}

/// Rounds the stored matrix of `x` (rows × cols, `x.stride` apart) into `out`, dense, by
/// `threads` threads.
inline void round_operand(std::vector<std::uint16_t>& out, operand<float> x, index rows, index cols,
                          int threads) {
  out.resize(std::size_t(rows) * std::size_t(cols));
  std::uint16_t* dst = out.data();
  const float* src = x.data;
  const index stride = x.stride;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
#else
  (void)threads;
#endif
  for (index r = 0; r < rows; ++r) round_rows_to_bf16(dst + r * cols, src + r * stride, 1, cols, 0);
}

/// The bf16 copies of stable operands (operand::stable), keyed by the stored matrix (address,
/// shape, stride), each valid for the weights epoch it was made in. A copy unused for a whole
/// epoch is dropped when the next begins, so the cache holds the copies of the weights a step
/// uses (2 bytes per parameter) and forgets freed models.
class bf16_weight_cache {
 public:
  static bf16_weight_cache& instance() {
    static bf16_weight_cache cache;
    return cache;
  }

  void new_epoch() {
    const std::lock_guard lock(mutex_);
    ++epoch_;
    std::erase_if(entries_, [&](const auto& kv) { return kv.second.epoch + 1 < epoch_; });
  }

  /// The bf16 copy of `x`'s stored matrix for this epoch, rounding it when there is none.
  operand<std::uint16_t> get(operand<float> x, index rows, index cols, int threads) {
    const std::lock_guard lock(mutex_);
    entry& e = entries_[key{x.data, rows, cols, x.stride}];
    if (e.epoch != epoch_ || e.bits.empty()) {
      round_operand(e.bits, x, rows, cols, threads);
      e.epoch = epoch_;
    }
    return {e.bits.data(), cols, x.transposed};
  }

 private:
  struct key {
    const float* data;
    index rows, cols, stride;
    bool operator<(const key& o) const noexcept {
      return std::tie(data, rows, cols, stride) < std::tie(o.data, o.rows, o.cols, o.stride);
    }
  };
  struct entry {
    std::uint64_t epoch = 0;
    std::vector<std::uint16_t> bits;
  };
  std::mutex mutex_;
  std::uint64_t epoch_ = 1;
  std::map<key, entry> entries_;
};

/// op(x) in bf16: the cached copy of a stable operand (outside parallel regions: the cache is
/// filled by one caller at a time), else a fresh rounding into `scratch`.
inline operand<std::uint16_t> bf16_operand_of(operand<float> x, index rows, index cols, int threads,
                                              std::vector<std::uint16_t>& scratch) {
#if defined(_OPENMP)
  const bool in_parallel = omp_in_parallel();
#else
  const bool in_parallel = false;
#endif
  if (x.stable && !in_parallel) return bf16_weight_cache::instance().get(x, rows, cols, threads);
  round_operand(scratch, x, rows, cols, threads);
  return {scratch.data(), cols, x.transposed};
}

}  // namespace detail

inline void new_weights_epoch() {
  detail::bf16_weight_cache::instance().new_epoch();
}

/// C (M, N), dense row-major, = (or += when `add`) op(A) · op(B), then epilogue(r0, nr, c0, nc) on
/// each block of C once its product is done.
///
/// Each OpenMP thread computes one contiguous slab of C with a single-threaded GEMM and runs the
/// epilogue (bias, residual, bias gradient) on it while the slab is still in cache, so threads
/// meet once per layer product. Eigen's own parallel GEMM shares packed panels between threads and
/// spin-waits on them many times per product, which is ruinous when another process holds one of
/// the cores (measured on the shared 2-core build machine: 1–6 GFLOP/s instead of ~25). Slabs are
/// fixed by the shapes and the thread count, so results do not depend on scheduling. With
/// gemm_precision::bf16 (float only) op(A) and op(B) are first rounded to bf16 (in parallel, into
/// per-thread buffers), then each slab is a oneDNN bf16 × bf16 → fp32 product.
template <class S, class Epilogue>
void gemm(S* c, operand<S> a, operand<S> b, index M, index N, index K, bool add, split how,
          Epilogue&& epilogue) {
  const int threads = detail::gemm_threads(M, N, K);
#if defined(TRAINKIT_HAS_ONEDNN)
  if constexpr (std::same_as<S, float>) {
    if (current_gemm_settings().precision == gemm_precision::bf16 && M > 0 && N > 0 && K > 0) {
      const index a_rows = a.transposed ? K : M, a_cols = a.transposed ? M : K;
      const index b_rows = b.transposed ? N : K, b_cols = b.transposed ? K : N;
      if (threads <= 1) {
        thread_local std::vector<std::uint16_t> a16, b16;
        const operand<std::uint16_t> a2 = detail::bf16_operand_of(a, a_rows, a_cols, 1, a16);
        const operand<std::uint16_t> b2 = detail::bf16_operand_of(b, b_rows, b_cols, 1, b16);
        detail::onednn_gemm_bf16(c, N, a2.data, a2.stride, a2.transposed, b2.data, b2.stride,
                                 b2.transposed, M, N, K, add);
        epilogue(index(0), M, index(0), N);
        return;
      }
      // Stable operands (weights) come from the cache, rounded once per epoch by the team. The
      // others are rounded inside the slab region: each thread rounds its own slice of the operand
      // the split cuts and all of the one every slab reads (twice the rounding of that operand,
      // but no barrier of its own: where another process holds a core, each barrier waits for a
      // descheduled thread, measured here at tens of ms).
      auto& cache = detail::bf16_weight_cache::instance();
      const operand<std::uint16_t> a_cached =
          a.stable ? cache.get(a, a_rows, a_cols, threads) : operand<std::uint16_t>{};
      const operand<std::uint16_t> b_cached =
          b.stable ? cache.get(b, b_rows, b_cols, threads) : operand<std::uint16_t>{};
      detail::for_each_slab(M, N, how, threads, [&](index begin, index n, bool by_columns) {
        thread_local std::vector<std::uint16_t> a16, b16;
        // A slice of x's stored matrix (rows × cols from `offset`), rounded into `buffer`.
        auto rounded = [](operand<float> x, index offset, index rows, index cols,
                          std::vector<std::uint16_t>& buffer) {
          x.data += offset;
          detail::round_operand(buffer, x, rows, cols, 1);
          return operand<std::uint16_t>{buffer.data(), cols, x.transposed};
        };
        if (by_columns) {  // columns [begin, begin+n) of C and of op(B); all of op(A)
          const operand<std::uint16_t> a2 =
              a.stable ? a_cached : rounded(a, 0, a_rows, a_cols, a16);
          operand<std::uint16_t> b2;
          if (b.stable) {
            b2 = b_cached;
            b2.data += b.transposed ? begin * b2.stride : begin;
          } else {
            b2 = rounded(b, b.transposed ? begin * b.stride : begin, b.transposed ? n : K,
                         b.transposed ? K : n, b16);
          }
          detail::onednn_gemm_bf16(c + begin, N, a2.data, a2.stride, a2.transposed, b2.data,
                                   b2.stride, b2.transposed, M, n, K, add);
          epilogue(index(0), M, begin, n);
        } else {  // rows [begin, begin+n) of C and of op(A); all of op(B)
          operand<std::uint16_t> a2;
          if (a.stable) {
            a2 = a_cached;
            a2.data += a.transposed ? begin : begin * a2.stride;
          } else {
            a2 = rounded(a, a.transposed ? begin : begin * a.stride, a.transposed ? K : n,
                         a.transposed ? n : K, a16);
          }
          const operand<std::uint16_t> b2 =
              b.stable ? b_cached : rounded(b, 0, b_rows, b_cols, b16);
          detail::onednn_gemm_bf16(c + begin * N, N, a2.data, a2.stride, a2.transposed, b2.data,
                                   b2.stride, b2.transposed, n, N, K, add);
          epilogue(begin, n, index(0), N);
        }
      });
      return;
    }
  }
#endif
  if (threads <= 1) {  // small (or no OpenMP): one call, the library's own heuristics decide
    (void)how;
    gemm_block(c, N, a, b, M, N, K, add);
    epilogue(index(0), M, index(0), N);
    return;
  }
  detail::for_each_slab(M, N, how, threads, [&](index begin, index n, bool by_columns) {
    if (by_columns) {  // columns [begin, begin+n) of C and of op(B)
      operand<S> part = b;
      part.data += b.transposed ? begin * b.stride : begin;
      gemm_block(c + begin, N, a, part, M, n, K, add);
      epilogue(index(0), M, begin, n);
    } else {  // rows [begin, begin+n) of C and of op(A)
      operand<S> part = a;
      part.data += a.transposed ? begin : begin * a.stride;
      gemm_block(c + begin * N, N, part, b, n, N, K, add);
      epilogue(begin, n, index(0), N);
    }
  });
}

}  // namespace trainkit::linalg
