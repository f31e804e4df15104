// Tests for the CPU GEMM funnel (core/linalg/gemm_cpu.hpp), which gpt2_cpu's layers use: every
// transposition of A and B, assignment and accumulation, row and column slabs over several
// OpenMP thread counts, against a double-precision triple loop. The model tests run with one
// thread, so this is where the per-thread slab arithmetic is checked.
#include "trainkit/core/linalg/gemm_cpu.hpp"  // first: the header compiles on its own

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <string>
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

// op(X)[i][j] for X stored row-major with `stride`, read transposed when `t`.
double at(const std::vector<float>& x, std::ptrdiff_t stride, bool t, std::ptrdiff_t i,
          std::ptrdiff_t j) {
  return t ? x[std::size_t(j * stride + i)] : x[std::size_t(i * stride + j)];
}

struct shape {
  std::ptrdiff_t M, N, K;
};

class GemmSlabs : public ::testing::TestWithParam<int> {  // the OpenMP thread count
 protected:
  void SetUp() override {
#if defined(_OPENMP)
    saved_ = omp_get_max_threads();
    omp_set_num_threads(GetParam());
#else
    if (GetParam() > 1) GTEST_SKIP() << "built without OpenMP";
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
          k::gemm(c.data(), k::operand<float>{a.data(), lda, ta},
                  k::operand<float>{b.data(), ldb, tb}, s.M, s.N, s.K, add, how,
                  [&](k::index r0, k::index nr, k::index q0, k::index nq) {
                    for (k::index r = r0; r < r0 + nr; ++r)
                      for (k::index q = q0; q < q0 + nq; ++q) ++epilogue_hits[r * s.N + q];
                  });
          const std::string what = "M=" + std::to_string(s.M) + " N=" + std::to_string(s.N) +
                                   " K=" + std::to_string(s.K) + " ta=" + std::to_string(ta) +
                                   " tb=" + std::to_string(tb) + " add=" + std::to_string(add) +
                                   " rows=" + std::to_string(how == k::split::rows);
          double worst = 0;
          int wrong_hits = 0;
          for (std::ptrdiff_t i = 0; i < s.M; ++i) {
            for (std::ptrdiff_t j = 0; j < s.N; ++j) {
              double want = add ? double(c0[std::size_t(i * s.N + j)]) : 0.0;
              for (std::ptrdiff_t p = 0; p < s.K; ++p)
                want += at(a, lda, ta, i, p) * at(b, ldb, tb, p, j);
              worst = std::max(worst, std::abs(want - double(c[std::size_t(i * s.N + j)])));
              wrong_hits += epilogue_hits[std::size_t(i * s.N + j)] != 1;
            }
          }
          EXPECT_LT(worst, 1e-4) << what;
          EXPECT_EQ(wrong_hits, 0) << what << ": the epilogue must see each element once";
          if (how == k::split::rows) {
            // Row slabs hand the epilogue whole rows (a bias gradient sums over them).
            std::vector<float> again = c0;
            bool whole_rows = true;
            k::gemm(again.data(), k::operand<float>{a.data(), lda, ta},
                    k::operand<float>{b.data(), ldb, tb}, s.M, s.N, s.K, add, how,
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

INSTANTIATE_TEST_SUITE_P(Threads, GemmSlabs, ::testing::Values(1, 2, 3),
                         [](const auto& info) { return std::to_string(info.param) + "threads"; });

}  // namespace
