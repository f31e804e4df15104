// Tests of newton_schulz_cuda's normalisation and transpose plan (optim/detail/ns_tiling.hpp) on
// the CPU: the kernels' index maps walked over whole grids, every thread of every block emulated
// (shared tile included), since no GPU runs here. The tiled copy writes every destination element
// exactly once, with its source's value scaled (and transposed for a tall matrix), reads nothing
// out of range, and each warp's 32 lanes read and write 32 consecutive elements (coalesced); the
// sum of squares covers every element once and is spread over many blocks, not one per matrix.
#include "trainkit/optim/detail/ns_tiling.hpp"  // first: compiles on its own

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace d = trainkit::optim::detail;

namespace {

struct shape {
  int rows, cols;
};
constexpr shape shapes[] = {{37, 100}, {100, 37}, {64, 64}, {1, 33}, {33, 1}, {96, 320}, {320, 96}};

/// Emulates ns_tile_copy_kernel over its whole grid: dst[m] = src[m]·scale[m], transposed when
/// asked. Counts the writes of each destination element and checks each warp's accesses.
void emulate_copy(const std::vector<float>& src, std::vector<float>& dst, std::vector<int>& writes,
                  const std::vector<float>& scale, int rows, int cols, int count, bool transpose) {
  const d::ns_tile_grid g = d::ns_tiles(rows, cols);
  const std::int64_t n = std::int64_t(rows) * cols;
  const int out_rows = transpose ? cols : rows, out_cols = transpose ? rows : cols;
  for (std::int64_t block = 0; block < g.per_matrix * count; ++block) {
    const d::ns_tile_at t = d::ns_tile_of(block, g);
    ASSERT_LT(t.matrix, count);
    float tile[d::ns_tile][d::ns_tile + 1];
    bool loaded[d::ns_tile][d::ns_tile] = {};
    for (int k = 0; k < d::ns_tile_steps; ++k)
      for (int ty = 0; ty < d::ns_tile_rows; ++ty) {  // a warp: lanes tx of one ty
        std::int64_t previous = -1;
        for (int tx = 0; tx < d::ns_tile; ++tx) {
          const d::ns_cell c = d::ns_load_cell(t, tx, ty, k);
          if (c.r >= rows || c.c >= cols) continue;
          const std::int64_t addr = t.matrix * n + std::int64_t(c.r) * cols + c.c;
          if (previous >= 0) {
            EXPECT_EQ(addr, previous + 1) << "a warp's reads are not contiguous";
          }
          previous = addr;
          const int sr = ty + k * d::ns_tile_rows;
          tile[sr][tx] = src[std::size_t(addr)] * scale[std::size_t(t.matrix)];
          loaded[sr][tx] = true;
        }
      }
    for (int k = 0; k < d::ns_tile_steps; ++k)
      for (int ty = 0; ty < d::ns_tile_rows; ++ty) {
        std::int64_t previous = -1;
        for (int tx = 0; tx < d::ns_tile; ++tx) {
          const d::ns_store st = d::ns_store_cell(t, tx, ty, k, transpose);
          if (st.i >= out_rows || st.j >= out_cols) continue;
          ASSERT_TRUE(loaded[st.slot_row][st.slot_col])
              << "a store reads a shared slot no load wrote, block " << block;
          const std::int64_t addr = t.matrix * n + std::int64_t(st.i) * out_cols + st.j;
          if (previous >= 0) {
            EXPECT_EQ(addr, previous + 1) << "a warp's writes are not contiguous";
          }
          previous = addr;
          dst[std::size_t(addr)] = tile[st.slot_row][st.slot_col];
          ++writes[std::size_t(addr)];
        }
      }
  }
}

TEST(NsTiling, TiledCopyTransposesAndScalesEveryElementOnce) {
  constexpr int count = 3;
  for (const shape sh : shapes)
    for (const bool transpose : {false, true}) {
      const std::int64_t n = std::int64_t(sh.rows) * sh.cols;
      std::vector<float> src(std::size_t(n * count)), dst(src.size(), -1.0f);
      for (std::size_t i = 0; i < src.size(); ++i) src[i] = float(i % 9973) + 0.5f;
      std::vector<int> writes(src.size(), 0);
      const std::vector<float> scale{1.0f, 0.5f, 0.25f};
      emulate_copy(src, dst, writes, scale, sh.rows, sh.cols, count, transpose);
      for (int m = 0; m < count; ++m)
        for (int r = 0; r < sh.rows; ++r)
          for (int c = 0; c < sh.cols; ++c) {
            const std::size_t from = std::size_t(m * n + std::int64_t(r) * sh.cols + c);
            const std::size_t to =
                transpose ? std::size_t(m * n + std::int64_t(c) * sh.rows + r) : from;
            ASSERT_EQ(writes[to], 1) << sh.rows << "x" << sh.cols << " transpose=" << transpose
                                     << " matrix " << m << " (" << r << ", " << c << ")";
            ASSERT_EQ(dst[to], src[from] * scale[std::size_t(m)])
                << sh.rows << "x" << sh.cols << " transpose=" << transpose;
          }
    }
}

// The transpose back of a tall result is the same copy over the (cols, rows) matrix: composed
// with the normalisation's transpose it gives the source back.
TEST(NsTiling, TransposeBackUndoesTheNormalisationsTranspose) {
  for (const shape sh : shapes) {
    if (sh.rows <= sh.cols) continue;  // tall only
    const std::size_t n = std::size_t(sh.rows) * std::size_t(sh.cols);
    std::vector<float> src(n), x(n), back(n);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = float(i);
    std::vector<int> w1(src.size()), w2(src.size());
    emulate_copy(src, x, w1, {1.0f}, sh.rows, sh.cols, 1, true);
    emulate_copy(x, back, w2, {1.0f}, sh.cols, sh.rows, 1, true);  // ns_transpose_back's grid
    EXPECT_EQ(back, src) << sh.rows << "x" << sh.cols;
  }
}

TEST(NsTiling, SumOfSquaresCoversEveryElementOnceOverManyBlocks) {
  constexpr int count = 2;
  for (const std::int64_t n : {std::int64_t(1), std::int64_t(37), d::ns_norm_slice,
                               d::ns_norm_slice + 1, std::int64_t(768) * 2304}) {
    const std::int64_t slices = d::ns_norm_slices(n);
    std::vector<int> seen(std::size_t(n * count), 0);
    std::vector<double> sums(count, 0.0);
    for (std::int64_t block = 0; block < slices * count; ++block) {
      const d::ns_slice s = d::ns_slice_of(block, n);
      ASSERT_LT(s.matrix, count);
      ASSERT_LE(s.end, n);
      for (std::int64_t i = s.begin; i < s.end; ++i) ++seen[std::size_t(s.matrix * n + i)];
    }
    for (const int v : seen) ASSERT_EQ(v, 1) << "n=" << n;
  }
  // A d12 q|k|v slice (768 x 2304) was one 512-thread block; now 108 blocks of 256 threads.
  EXPECT_EQ(d::ns_norm_slices(std::int64_t(768) * 2304), 108);
}

}  // namespace
