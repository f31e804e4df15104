// Tests for the CPU GEMM funnel (core/linalg/gemm_cpu.hpp), which the CPU models' layers use: every
// transposition of A and B, assignment and accumulation, row and column slabs over several
// OpenMP thread counts, for each library and precision this build and CPU offer (Eigen fp32,
// oneDNN fp32, oneDNN bf16), against a double-precision triple loop. The model tests run with one
// thread, so this is where the per-thread slab arithmetic is checked. bf16 is checked against the
// triple loop over the bf16-rounded operands (so a product that skipped the rounding, or rounded
// the wrong operand or stride, fails) and must differ from the unrounded one (so a silent fp32
// product fails too).
#include "trainkit/core/linalg/gemm_cpu.hpp"  // first: the header compiles on its own

#include <gtest/gtest.h>

#include "trainkit/core/bf16.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace k = trainkit::linalg;

namespace {

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// op(X)[i][j] for X stored row-major with `stride`, read transposed when `t`, rounded to bf16
// first when `bf16`.
double at(const std::vector<float>& x, std::ptrdiff_t stride, bool t, std::ptrdiff_t i,
          std::ptrdiff_t j, bool bf16 = false) {
  const float v = t ? x[std::size_t(j * stride + i)] : x[std::size_t(i * stride + j)];
  return bf16 ? double(trainkit::bf16::from_float(v).to_float()) : double(v);
}

enum class mode { eigen, onednn, bf16 };

const char* name_of(mode m) {
  return m == mode::eigen ? "eigen" : m == mode::onednn ? "onednn" : "bf16";
}

k::gemm_settings settings_of(mode m) {
  k::gemm_settings s;
  s.library = m == mode::eigen ? k::gemm_library::eigen : k::gemm_library::onednn;
  if (m == mode::bf16) s.precision = k::gemm_precision::bf16;
  return s;
}

struct shape {
  std::ptrdiff_t M, N, K;
};

// (OpenMP thread count, library and precision)
class GemmSlabs : public ::testing::TestWithParam<std::tuple<int, mode>> {
 protected:
  void SetUp() override {
    const std::string why = k::gemm_settings_problem(settings_of(std::get<1>(GetParam())));
    if (!why.empty()) GTEST_SKIP() << why;
#if defined(_OPENMP)
    saved_ = omp_get_max_threads();
    omp_set_num_threads(std::get<0>(GetParam()));
#else
    if (std::get<0>(GetParam()) > 1) GTEST_SKIP() << "built without OpenMP";
#endif
  }
  void TearDown() override {
#if defined(_OPENMP)
    omp_set_num_threads(saved_);
#endif
  }
  int saved_ = 1;
};

// Big enough (M·N·K >= 2e6) that gemm() splits C between threads, with edges that are not
// multiples of the 16-element slab granule; both orientations so both split directions run.
TEST_P(GemmSlabs, EveryTranspositionMatchesAReferenceProduct) {
  const bool bf16 = std::get<1>(GetParam()) == mode::bf16;
  const k::scoped_gemm_settings settings(settings_of(std::get<1>(GetParam())));
  for (const shape s : {shape{67, 301, 129}, shape{301, 67, 129}, shape{5, 7, 3}}) {
    for (int variant = 0; variant < 4; ++variant) {
      for (const bool add : {false, true}) {
        for (const k::split how : {k::split::longer_side, k::split::rows}) {
          const bool ta = variant & 1, tb = variant & 2;
          // Stored shapes with padded strides, so a wrong stride reads the padding.
          const std::ptrdiff_t a_rows = ta ? s.K : s.M, a_cols = ta ? s.M : s.K;
          const std::ptrdiff_t b_rows = tb ? s.N : s.K, b_cols = tb ? s.K : s.N;
          const std::ptrdiff_t lda = a_cols + 3, ldb = b_cols + 5;
          const auto a = random_values(std::size_t(a_rows * lda), 1);
          const auto b = random_values(std::size_t(b_rows * ldb), 2);
          const auto c0 = random_values(std::size_t(s.M * s.N), 3);
          std::vector<float> c = c0;
          std::vector<int> epilogue_hits(std::size_t(s.M * s.N), 0);
          // Accumulating products pass both operands as stable (the weights' path: bf16 copies
          // from the cache, sliced per slab); a new epoch first, as these buffers are new.
          const bool stable = add;
          k::new_weights_epoch();
          k::gemm(c.data(), k::operand<float>{a.data(), lda, ta, stable},
                  k::operand<float>{b.data(), ldb, tb, stable}, s.M, s.N, s.K, add, how,
                  [&](k::index r0, k::index nr, k::index q0, k::index nq) {
                    for (k::index r = r0; r < r0 + nr; ++r)
                      for (k::index q = q0; q < q0 + nq; ++q) ++epilogue_hits[r * s.N + q];
                  });
          const std::string what = "M=" + std::to_string(s.M) + " N=" + std::to_string(s.N) +
                                   " K=" + std::to_string(s.K) + " ta=" + std::to_string(ta) +
                                   " tb=" + std::to_string(tb) + " add=" + std::to_string(add) +
                                   " stable=" + std::to_string(stable) +
                                   " rows=" + std::to_string(how == k::split::rows);
          double worst = 0, worst_unrounded = 0;
          int wrong_hits = 0;
          for (std::ptrdiff_t i = 0; i < s.M; ++i) {
            for (std::ptrdiff_t j = 0; j < s.N; ++j) {
              double want = add ? double(c0[std::size_t(i * s.N + j)]) : 0.0;
              double unrounded = want;
              for (std::ptrdiff_t p = 0; p < s.K; ++p) {
                want += at(a, lda, ta, i, p, bf16) * at(b, ldb, tb, p, j, bf16);
                unrounded += at(a, lda, ta, i, p) * at(b, ldb, tb, p, j);
              }
              const double got = double(c[std::size_t(i * s.N + j)]);
              worst = std::max(worst, std::abs(want - got));
              worst_unrounded = std::max(worst_unrounded, std::abs(unrounded - got));
              wrong_hits += epilogue_hits[std::size_t(i * s.N + j)] != 1;
            }
          }
          EXPECT_LT(worst, 1e-4) << what;
          // bf16 keeps 8 significant bits: products of K = 129 terms in [-1, 1] move by ~1e-2.
          if (bf16 && s.K > 100) {
            EXPECT_GT(worst_unrounded, 1e-3) << what << ": not rounded?";
          }
          EXPECT_EQ(wrong_hits, 0) << what << ": the epilogue must see each element once";
          if (how == k::split::rows) {
            // Row slabs hand the epilogue whole rows (a bias gradient sums over them).
            std::vector<float> again = c0;
            bool whole_rows = true;
            k::gemm(again.data(), k::operand<float>{a.data(), lda, ta, stable},
                    k::operand<float>{b.data(), ldb, tb, stable}, s.M, s.N, s.K, add, how,
                    [&](k::index, k::index, k::index q0, k::index nq) {
                      whole_rows = whole_rows && q0 == 0 && nq == s.N;
                    });
            EXPECT_TRUE(whole_rows) << what;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ThreadsAndModes, GemmSlabs,
                         ::testing::Combine(::testing::Values(1, 2, 3),
                                            ::testing::Values(mode::eigen, mode::onednn,
                                                              mode::bf16)),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "threads_" +
                                  name_of(std::get<1>(info.param));
                         });

// The operand rounding equals core/bf16.hpp's (round to nearest even, NaN kept a NaN) on every
// float class: ties both ways, the largest finite values (which round to infinity), infinities,
// NaNs with low payloads (a plain +0x7fff would carry them into infinity), subnormals.
TEST(GemmBf16, OperandRoundingMatchesTheHostBf16Type) {
  std::vector<std::uint32_t> bits = {0x00000000u, 0x80000000u, 0x3f808000u, 0x3f818000u,
                                     0x3f807fffu, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u,
                                     0xff800000u, 0x7f800001u, 0xff800001u, 0x7fc00000u,
                                     0x00000001u, 0x00008000u, 0x00018000u, 0x7f7f8000u};
  std::mt19937 rng(7);
  for (int i = 0; i < 100000; ++i) bits.push_back(rng());
  int mismatches = 0;
  for (const std::uint32_t u : bits) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    mismatches += k::detail::round_to_bf16(f) != trainkit::bf16::from_float(f).bits;
  }
  EXPECT_EQ(mismatches, 0);
}

// Settings are checked before they are taken: bf16 without oneDNN or on a CPU without bf16
// instructions is refused with the reason, and the previous settings stay.
TEST(GemmBf16, UnavailableSettingsAreRefusedAndLeaveTheCurrentOnes) {
  const k::gemm_settings before = k::current_gemm_settings();
  k::gemm_settings bf16;
  bf16.precision = k::gemm_precision::bf16;
  const std::string why = k::gemm_settings_problem(bf16);
  if (why.empty()) {
    const k::scoped_gemm_settings on(bf16);
    EXPECT_EQ(k::current_gemm_settings().precision, k::gemm_precision::bf16);
  } else {
    EXPECT_THROW(k::set_gemm_settings(bf16), trainkit::config_error);
    EXPECT_NE(why.find("bf16"), std::string::npos) << why;
  }
  EXPECT_EQ(k::current_gemm_settings(), before);
}

// The fp32 library by default: oneDNN where the build has it and the CPU has AVX2 (its kernels
// ~2× Eigen's at x86-64-v3), else Eigen. (Skipped when TRAINKIT_CPU_GEMM chose for this process.)
TEST(GemmSettings, Fp32GoesThroughOnednnWhereItIsPresent) {
  if (std::getenv("TRAINKIT_CPU_GEMM") != nullptr) GTEST_SKIP() << "TRAINKIT_CPU_GEMM is set";
  const bool onednn = k::detail::has_onednn && trainkit::this_cpu().avx2;
  EXPECT_EQ(k::gemm_settings{}.library, onednn ? k::gemm_library::onednn : k::gemm_library::eigen);
  EXPECT_EQ(k::current_gemm_settings().library, k::gemm_settings{}.library);
}

// A TRAINKIT_CPU_GEMM the build cannot honour is refused by set_gemm_settings, naming the
// variable (gpt_fineweb then exits 2 with that line), and the settings stay.
TEST(GemmSettings, ABadTrainkitCpuGemmIsRefused) {
  const char* saved = std::getenv("TRAINKIT_CPU_GEMM");
  const std::string saved_value = saved ? saved : "";
  const k::gemm_settings before = k::current_gemm_settings();
  setenv("TRAINKIT_CPU_GEMM", "mkl", 1);
  std::string why = k::gemm_settings_problem(k::gemm_settings{});
  EXPECT_NE(why.find("TRAINKIT_CPU_GEMM=mkl"), std::string::npos) << why;
  EXPECT_THROW(k::set_gemm_settings(k::gemm_settings{}), trainkit::config_error);
  EXPECT_EQ(k::current_gemm_settings(), before);
  setenv("TRAINKIT_CPU_GEMM", "onednn", 1);
  why = k::gemm_settings_problem(k::gemm_settings{});
  EXPECT_EQ(why.empty(), k::detail::has_onednn) << why;
  setenv("TRAINKIT_CPU_GEMM", "eigen", 1);
  EXPECT_EQ(k::gemm_settings_problem(k::gemm_settings{}), "");
  if (saved)
    setenv("TRAINKIT_CPU_GEMM", saved_value.c_str(), 1);
  else
    unsetenv("TRAINKIT_CPU_GEMM");
}

}  // namespace
