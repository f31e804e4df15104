// Tests for the host arithmetic both sharded Muons share (optim/muon_matrices.hpp): how ranks
// split the matrices (muon_share_layout over muon_shards), where each share lies in the packed
// buffer of every matrix, and the gather through that buffer (muon_pack, muon_unpack), on the
// real layouts of GPT-2 and the Llama family, 1 to 5 ranks. sharded_muon_cpu sends these pieces
// with MPI_Allgatherv, sharded_muon_cuda with one ncclBroadcast per rank; the device pack/unpack
// kernels compute these same indices (tests/optim/test_sharded_muon_cuda.cu holds them to it on
// a device). No Eigen, no MPI, no device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "trainkit/model/gpt2/config.hpp"
#include "trainkit/model/llama/config.hpp"
#include "trainkit/optim/muon_config.hpp"
#include "trainkit/optim/muon_matrices.hpp"

namespace tk = trainkit;
namespace to = trainkit::optim;

namespace {

struct named_layout {
  const char* name;
  std::vector<tk::tensor_info> layout;
  std::size_t n;
};

std::vector<named_layout> layouts() {
  const auto gpt2 = tk::model::gpt2_config::preset("d2");
  const auto llama = tk::model::llama_config::preset("d2");
  const auto g = tk::model::gpt2_parameter_layout(gpt2);
  const auto l = tk::model::llama_parameter_layout(llama);
  return {{"gpt2 d2", g, g.back().offset + g.back().numel()},
          {"llama d2", l, l.back().offset + l.back().numel()}};
}

std::vector<to::muon_matrix> matrices_of(const named_layout& m) {
  return to::muon_matrices(m.layout, to::muon_config{}.muon_roles, "test");
}

std::size_t packed_elements(const std::vector<to::muon_matrix>& ms) {
  std::size_t n = 0;
  for (const auto& m : ms) n += m.numel();
  return n;
}

}  // namespace

TEST(MuonShares, TileThePackedBufferInRankOrderAtTheShardsCuts) {
  for (const named_layout& m : layouts()) {
    const auto ms = matrices_of(m);
    ASSERT_FALSE(ms.empty()) << m.name;
    for (int world = 1; world <= 5; ++world) {
      const auto shares = to::muon_share_layout(ms, world, 5);
      const auto cuts = to::muon_shards(ms, world, 5);
      ASSERT_EQ(shares.size(), std::size_t(world));
      std::size_t next = 0;
      for (int r = 0; r < world; ++r) {
        const to::muon_share& s = shares[std::size_t(r)];
        EXPECT_EQ(s.matrices, cuts[std::size_t(r)]) << m.name << " rank " << r << "/" << world;
        EXPECT_EQ(s.packed.offset, next) << m.name << " rank " << r << "/" << world;
        // The piece holds exactly its matrices, back to back.
        std::size_t count = 0;
        for (std::size_t i = s.matrices.first; i < s.matrices.last; ++i) {
          EXPECT_EQ(ms[i].state_offset, s.packed.offset + count) << m.name << " matrix " << i;
          count += ms[i].numel();
        }
        EXPECT_EQ(s.packed.count, count) << m.name << " rank " << r << "/" << world;
        next = s.packed.offset + s.packed.count;
      }
      EXPECT_EQ(next, packed_elements(ms)) << m.name << " " << world;
    }
  }
}

TEST(MuonShares, MoreRanksThanMatricesLeavesEmptySharesAtTheEnd) {
  // More ranks than matrices: the last ones get empty shares at the buffer's end, still tiling.
  const auto ms = matrices_of(layouts()[0]);
  const auto shares = to::muon_share_layout(ms, int(ms.size()) + 3, 5);
  EXPECT_EQ(shares.back().packed.count, 0u);
  EXPECT_EQ(shares.back().packed.offset, packed_elements(ms));
  EXPECT_THROW(to::muon_share_layout(ms, 0, 5), tk::config_error);
}

TEST(MuonShares, PackBroadcastUnpackGivesEveryRankEveryOwnersMatrices) {
  // Each rank's flat buffer holds its own values in its share's matrices (what its update
  // computed) and stale values elsewhere; after each rank packs its share, the pieces are
  // "broadcast" from their owners (copied into every rank's packed buffer, as the grouped
  // ncclBroadcast / MPI_Allgatherv do) and unpacked, every rank holds every matrix as its owner
  // computed it and every other element as it was.
  for (const named_layout& m : layouts()) {
    const auto ms = matrices_of(m);
    const std::size_t total = packed_elements(ms);
    for (int world = 1; world <= 5; ++world) {
      const auto shares = to::muon_share_layout(ms, world, 5);
      std::vector<std::vector<float>> flat(static_cast<std::size_t>(world)),
          packed(static_cast<std::size_t>(world));
      std::vector<int> owner(m.n, -1);
      for (int r = 0; r < world; ++r) {
        const to::muon_share& s = shares[std::size_t(r)];
        for (std::size_t i = s.matrices.first; i < s.matrices.last; ++i)
          for (std::size_t e = 0; e < ms[i].numel(); ++e) owner[ms[i].offset + e] = r;
      }
      const auto value = [](int rank, std::size_t i) { return float(rank) * 1e6f + float(i); };
      for (int r = 0; r < world; ++r) {
        auto& f = flat[std::size_t(r)];
        f.resize(m.n);
        for (std::size_t i = 0; i < m.n; ++i)
          f[i] = owner[i] == r ? value(r, i) : owner[i] < 0 ? -float(i) : -1.0f;
        packed[std::size_t(r)].assign(total, -2.0f);
        to::muon_pack(std::span<const to::muon_matrix>(ms), shares[std::size_t(r)].matrices,
                      f.data(), packed[std::size_t(r)].data());
      }
      for (int from = 0; from < world; ++from) {
        const to::muon_state_range piece = shares[std::size_t(from)].packed;
        for (int to_rank = 0; to_rank < world; ++to_rank)
          std::copy_n(packed[std::size_t(from)].begin() + std::ptrdiff_t(piece.offset), piece.count,
                      packed[std::size_t(to_rank)].begin() + std::ptrdiff_t(piece.offset));
      }
      for (int r = 0; r < world; ++r) {
        to::muon_unpack(std::span<const to::muon_matrix>(ms), packed[std::size_t(r)].data(),
                        flat[std::size_t(r)].data());
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < m.n; ++i) {
          const float want = owner[i] >= 0 ? value(owner[i], i) : -float(i);
          wrong += flat[std::size_t(r)][i] != want;
        }
        EXPECT_EQ(wrong, 0u) << m.name << " rank " << r << " of " << world;
      }
    }
  }
}
