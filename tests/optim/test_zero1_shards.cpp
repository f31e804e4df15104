// Tests for include/trainkit/optim/zero1_shards.hpp, the host arithmetic both ZeRO-1 pairs (MPI
// on the CPU, NCCL on GPUs) share: the shards tile the buffer on the norm-chunk grid, a gradient
// range is cut into per-owner pieces that tile it, a shard's norm chunks are whole chunks of the
// grid over the buffer, and the layout clipped to a shard gives its elements exactly the weight
// decay they have in the whole buffer (what lets zero1_adamw_cpu and zero1_adamw_cuda run the
// whole-buffer update kernels over a shard). No MPI, no GPU.
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "trainkit/core/step_protocol.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/model/gpt2/config.hpp"
#include "trainkit/optim/adamw_config.hpp"
#include "trainkit/optim/decay_segments.hpp"
#include "trainkit/optim/grad_clip.hpp"
#include "trainkit/optim/zero1_shards.hpp"

namespace tk = trainkit;
namespace to = trainkit::optim;
using tk::model::gradient_range;

namespace {

constexpr std::size_t chunk = to::norm_chunk_elements;

// Per element of [0, n): whether the segments decay it.
std::vector<char> decay_flags(const std::vector<to::decay_segment>& segs, std::size_t n) {
  std::vector<char> out(n, 2);  // 2 = no segment covers it
  for (const auto& s : segs)
    for (std::size_t i = s.begin; i < s.end && i < n; ++i) out[i] = s.decay ? 1 : 0;
  return out;
}

}  // namespace

TEST(Zero1Shards, ShardsTileTheBufferOnTheChunkGrid) {
  for (std::size_t n : {std::size_t{0}, std::size_t{5}, chunk, 3 * chunk + 7, 100 * chunk + 1}) {
    for (int ranks = 1; ranks <= 5; ++ranks) {
      const auto shards = to::zero1_shards(n, ranks);
      ASSERT_EQ(shards.size(), std::size_t(ranks));
      std::size_t next = 0;
      for (const gradient_range& s : shards) {
        EXPECT_EQ(s.offset, next) << "n " << n << " ranks " << ranks;
        EXPECT_TRUE(s.offset % chunk == 0 || s.offset == n);
        next = s.offset + s.count;
      }
      EXPECT_EQ(next, n);
    }
  }
  EXPECT_THROW(to::zero1_shard(10, 2, 2), tk::config_error);
}

TEST(Zero1Shards, PiecesOfARangeTileItOneOwnerEach) {
  const std::size_t n = 10 * chunk + 123;
  const auto shards = to::zero1_shards(n, 3);  // 3, 4 and 4 chunks (the last one short)
  // A range from inside rank 0's shard across rank 1's into rank 2's.
  const gradient_range r{2 * chunk + 5, 6 * chunk};
  const auto pieces = to::zero1_pieces(r, shards);
  ASSERT_EQ(pieces.size(), 3u);
  std::size_t next = r.offset;
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    EXPECT_EQ(pieces[k].owner, int(k));
    EXPECT_EQ(pieces[k].offset, next);
    const gradient_range& s = shards[std::size_t(pieces[k].owner)];
    EXPECT_GE(pieces[k].offset, s.offset);
    EXPECT_LE(pieces[k].offset + pieces[k].count, s.offset + s.count);
    next += pieces[k].count;
  }
  EXPECT_EQ(next, r.offset + r.count);
  // Inside one shard: one piece; empty: none.
  EXPECT_EQ(to::zero1_pieces({chunk, 10}, shards), (std::vector<to::zero1_piece>{{chunk, 10, 0}}));
  EXPECT_TRUE(to::zero1_pieces({chunk, 0}, shards).empty());
  EXPECT_EQ(to::zero1_overlap({0, 10}, {10, 5}).count, 0u);
  EXPECT_EQ(to::zero1_overlap({0, 12}, {10, 5}), (gradient_range{10, 2}));
}

TEST(Zero1Shards, NormChunksOfTheShardsAreTheBuffersChunksInRankOrder) {
  const std::size_t n = 10 * chunk + 123;  // 11 chunks, the last short
  for (int ranks = 1; ranks <= 12; ++ranks) {
    std::size_t next = 0;
    for (const gradient_range& s : to::zero1_shards(n, ranks)) {
      const gradient_range c = to::zero1_norm_chunks(s);
      EXPECT_EQ(c.offset, next) << ranks << " ranks";
      next += c.count;
    }
    EXPECT_EQ(next, to::zero1_norm_chunks({0, n}).count);
    EXPECT_EQ(next, 11u);
  }
}

// What the shard optimizers rely on: decay_segments of the clipped layout, over the shard, decay
// exactly the elements the whole buffer's segments decay. GPT-2 d2's layout (its embedding rows
// are not chunk-aligned, so shard edges fall inside tensors) for 1 to 5 ranks.
TEST(Zero1Shards, ClippedLayoutDecaysTheElementsTheWholeBufferDecays) {
  const auto cfg = tk::model::gpt2_config::preset("d2");
  const auto layout = tk::model::gpt2_parameter_layout(cfg);
  const std::size_t n = cfg.num_parameters();
  const tk::tensor_role_set roles = to::adamw_config{}.decay_roles;
  const std::vector<char> whole = decay_flags(to::decay_segments(layout, n, roles, "test"), n);
  for (int ranks = 1; ranks <= 5; ++ranks) {
    for (const gradient_range& s : to::zero1_shards(n, ranks)) {
      const auto clipped = to::zero1_clip_layout(layout, s);
      const std::vector<char> mine =
          decay_flags(to::decay_segments(clipped, s.count, roles, "test"), s.count);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < s.count; ++i) differ += mine[i] != whole[s.offset + i];
      EXPECT_EQ(differ, 0u) << "rank at offset " << s.offset << " of " << ranks;
      for (const tk::tensor_info& t : clipped) EXPECT_LE(t.offset + t.numel(), s.count);
    }
  }
}
