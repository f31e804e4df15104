// trainkit/core/batch.hpp — batches of token windows and the serialisable data position.
//
// A batch is B rows of T input tokens and the T targets that follow them (the same window shifted
// by one). Data sources fill an owning `host_batch`; prefetchers hand the model a non-owning
// `batch_view` in the memory space the model declares. `source_position` is everything a data
// source needs to continue exactly where it was, so a resumed run sees the batches an
// uninterrupted run would.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/core/memory_space.hpp"

namespace trainkit {

/// Owning batch in host memory.
struct host_batch {
  int batch_size = 0;               // B
  int seq_len = 0;                  // T
  std::vector<std::int32_t> inputs;   // (B, T)
  std::vector<std::int32_t> targets;  // (B, T)

  host_batch() = default;
  host_batch(int b, int t)
      : batch_size(b), seq_len(t), inputs(std::size_t(b) * t), targets(std::size_t(b) * t) {}
};

/// Non-owning view of a batch in memory space `Space`; valid until the producer's next `next()`.
template <class Space>
struct batch_view {
  using memory_space = Space;
  const std::int32_t* inputs = nullptr;   // (B, T)
  const std::int32_t* targets = nullptr;  // (B, T)
  int batch_size = 0;
  int seq_len = 0;

  std::size_t tokens() const noexcept { return std::size_t(batch_size) * seq_len; }
};

inline batch_view<host_memory> view_of(const host_batch& b) noexcept {
  return {b.inputs.data(), b.targets.data(), b.batch_size, b.seq_len};
}

/// Where a data source stands. Sequential sources use (shard, offset); random-order sources use
/// (epoch, offset) with `offset` counting windows into the epoch's permutation of `seed`.
struct source_position {
  std::uint64_t epoch = 0;
  std::uint64_t shard = 0;
  std::uint64_t offset = 0;
  std::uint64_t seed = 0;

  friend bool operator==(const source_position&, const source_position&) = default;

  /// "epoch=E shard=S offset=O seed=X": stored in checkpoint manifests.
  std::string to_string() const {
    return "epoch=" + std::to_string(epoch) + " shard=" + std::to_string(shard) +
           " offset=" + std::to_string(offset) + " seed=" + std::to_string(seed);
  }

  static source_position parse(const std::string& s) {
    source_position p;
    unsigned long long e = 0, sh = 0, o = 0, sd = 0;
    if (std::sscanf(s.c_str(), "epoch=%llu shard=%llu offset=%llu seed=%llu", &e, &sh, &o, &sd) !=
        4)
      throw format_error("malformed data position '" + s + "'");
    p.epoch = e;
    p.shard = sh;
    p.offset = o;
    p.seed = sd;
    return p;
  }
};

}  // namespace trainkit
