// trainkit/data/synthetic_source.hpp — a file-free, seeded data source with a learnable stream.
//
// Tests and benchmarks need batches without shard files, and model tests need data a model can
// actually learn. The stream is a fixed random first-order Markov chain over the first `alphabet`
// token ids: each token has `branching` distinct successors, chosen uniformly. A model that learns
// the chain reaches a loss of ln(branching) nats (`loss_floor()`), far below the ln(alphabet) of
// guessing, so "the loss went down" has a number to aim at.
//
// Every row is generated from its own counter-based seed (seed, batch index, row), so position()
// is just the batch index and seek() is O(1). `produce_delay` sleeps in next() to imitate a slow
// producer for prefetcher tests and benches.
//
// Rank slices (data parallelism): with world_size N, rank r yields global batches r, r+N, r+2N,
// ... of the one-process stream, and position() is the global batch index after the last round
// of N (so it is the same on every rank, and the same as one process's after as many batches).
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "trainkit/core/batch.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/data/concepts.hpp"

namespace trainkit::data {

struct synthetic_config {
  int batch_size = 4;  // B
  int seq_len = 64;    // T
  int vocab_size = 50257;
  int alphabet = 64;  // tokens used: ids [0, alphabet)
  int branching = 4;  // successors per token, each equally likely
  std::uint64_t seed = 0;
  std::chrono::microseconds produce_delay{0};  // slept at the start of every next()
  int rank = 0;        // this rank's slice of every round of world_size batches
  int world_size = 1;  // ranks sharing the stream

  friend bool operator==(const synthetic_config&, const synthetic_config&) = default;
};

inline std::string to_string(const synthetic_config& c) {
  return "batch_size=" + std::to_string(c.batch_size) + " seq_len=" + std::to_string(c.seq_len) +
         " vocab_size=" + std::to_string(c.vocab_size) + " alphabet=" + std::to_string(c.alphabet) +
         " branching=" + std::to_string(c.branching) + " seed=" + std::to_string(c.seed) +
         " produce_delay_us=" + std::to_string(c.produce_delay.count()) +
         " rank=" + std::to_string(c.rank) + " world_size=" + std::to_string(c.world_size);
}

namespace detail {

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fully specified, good enough to pick tokens, and
/// cheap to seed per row (mt19937_64 would fill 312 words for every row).
struct splitmix64 {
  std::uint64_t state;
  std::uint64_t operator()() noexcept {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // n <= 65536 here, so the modulo bias (< 2^-48) is far below anything a test could see.
  std::uint32_t below(std::uint32_t n) noexcept { return std::uint32_t((*this)() % n); }
};

}  // namespace detail

/// Deterministic Markov-chain token batches; satisfies data_source.
class synthetic_source {
 public:
  explicit synthetic_source(synthetic_config config = {}) : config_(config) {
    const auto& c = config_;
    if (c.batch_size < 1 || c.seq_len < 1)
      throw config_error("synthetic_config.batch_size " + std::to_string(c.batch_size) +
                         " and synthetic_config.seq_len " + std::to_string(c.seq_len) +
                         " must be >= 1");
    if (c.vocab_size < 1 || c.vocab_size > 65536)
      throw config_error("synthetic_config.vocab_size " + std::to_string(c.vocab_size) +
                         " must be in [1, 65536]");
    if (c.alphabet < 1 || c.alphabet > c.vocab_size)
      throw config_error("synthetic_config.alphabet " + std::to_string(c.alphabet) +
                         " must be in [1, vocab_size " + std::to_string(c.vocab_size) + "]");
    if (c.branching < 1 || c.branching > c.alphabet)
      throw config_error("synthetic_config.branching " + std::to_string(c.branching) +
                         " must be in [1, alphabet " + std::to_string(c.alphabet) + "]");
    if (c.produce_delay.count() < 0)
      throw config_error("synthetic_config.produce_delay is negative");
    if (c.world_size < 1 || c.rank < 0 || c.rank >= c.world_size)
      throw config_error("synthetic_config.rank " + std::to_string(c.rank) +
                         " is not in [0, synthetic_config.world_size " +
                         std::to_string(c.world_size) + ")");
    build_chain();
  }

  int batch_size() const noexcept { return config_.batch_size; }
  int seq_len() const noexcept { return config_.seq_len; }
  int vocab_size() const noexcept { return config_.vocab_size; }
  const synthetic_config& config() const noexcept { return config_; }

  /// The tokens that may follow `token` (each with probability 1/branching).
  std::span<const std::int32_t> successors(std::int32_t token) const {
    if (token < 0 || token >= config_.alphabet)
      throw config_error("synthetic source: token " + std::to_string(token) +
                         " is outside the alphabet");
    return {successors_.data() + std::size_t(token) * config_.branching,
            std::size_t(config_.branching)};
  }

  /// Cross-entropy (nats/token) of a model that knows the chain: the best achievable loss.
  double loss_floor() const noexcept { return std::log(double(config_.branching)); }

  void next(host_batch& batch) {
    if (config_.produce_delay.count() > 0) std::this_thread::sleep_for(config_.produce_delay);
    const int B = config_.batch_size, T = config_.seq_len;
    if (batch.batch_size != B || batch.seq_len != T || batch.inputs.size() != std::size_t(B) * T ||
        batch.targets.size() != std::size_t(B) * T)
      batch = host_batch(B, T);
    const auto K = std::uint32_t(config_.branching);
    const std::uint64_t global = batch_index_ + std::uint64_t(config_.rank);
    for (int b = 0; b < B; ++b) {
      detail::splitmix64 rng{row_seed(global, b)};
      std::int32_t tok = std::int32_t(rng.below(std::uint32_t(config_.alphabet)));
      std::int32_t* in = batch.inputs.data() + std::size_t(b) * T;   // (T)
      std::int32_t* tg = batch.targets.data() + std::size_t(b) * T;  // (T)
      for (int t = 0; t < T; ++t) {
        in[t] = tok;
        tok = successors_[std::size_t(tok) * K + rng.below(K)];
        tg[t] = tok;
      }
    }
    batch_index_ += std::uint64_t(config_.world_size);
  }

  /// (epoch 0, shard 0, offset = global batches of the rounds produced, seed).
  source_position position() const noexcept { return {0, 0, batch_index_, config_.seed}; }

  void seek(const source_position& p) {
    if (p.seed != config_.seed)
      throw config_error("synthetic source: position '" + p.to_string() +
                         "' comes from a source with another seed (this one has " +
                         std::to_string(config_.seed) + ")");
    batch_index_ = p.offset;
  }

 private:
  std::uint64_t row_seed(std::uint64_t batch, int row) const noexcept {
    detail::splitmix64 mix{config_.seed ^ 0x5eed0000da7aull};
    const std::uint64_t a = mix() ^ batch;
    detail::splitmix64 mix2{a * 0x9e3779b97f4a7c15ull + std::uint64_t(row)};
    return mix2();
  }

  // Each token's successors: `branching` distinct ids, by a partial Fisher–Yates over the alphabet.
  void build_chain() {
    const auto A = std::uint32_t(config_.alphabet), K = std::uint32_t(config_.branching);
    detail::splitmix64 rng{config_.seed * 0xd1b54a32d192ed03ull + 1};
    std::vector<std::int32_t> pool(A);
    successors_.resize(std::size_t(A) * K);
    for (std::uint32_t a = 0; a < A; ++a) {
      std::iota(pool.begin(), pool.end(), 0);
      for (std::uint32_t k = 0; k < K; ++k) {
        const std::uint32_t j = k + rng.below(A - k);
        std::swap(pool[k], pool[j]);
        successors_[std::size_t(a) * K + k] = pool[k];
      }
    }
  }

  synthetic_config config_;
  std::vector<std::int32_t> successors_;  // (alphabet, branching)
  std::uint64_t batch_index_ = 0;         // global index of this round's first batch
};

static_assert(data_source<synthetic_source>);

}  // namespace trainkit::data
