// trainkit/optim/zero1_shards.hpp — the ZeRO-1 cut of the flat buffer, under the names the
// optimizers use.
//
// The arithmetic lives in comm/zero1_shards.hpp, the layer the ZeRO-1 reducers (reduce/) and
// optimizers (optim/) both stand on, so that the two halves of the pair compute the same cut
// without one folder including the other. This header only brings those names into
// trainkit::optim for the optimizers and their tests.
#pragma once

#include "trainkit/comm/zero1_shards.hpp"

namespace trainkit::optim {

using comm::zero1_clip_layout;
using comm::zero1_norm_chunks;
using comm::zero1_overlap;
using comm::zero1_piece;
using comm::zero1_pieces;
using comm::zero1_shard;
using comm::zero1_shards;

}  // namespace trainkit::optim
