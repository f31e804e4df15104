// trainkit/data/mmap_token_source.hpp — batches of token windows read from mmap'd shard files.
//
// The training data source: every file matching a glob (sorted bytewise, so the order does not
// depend on the locale) is mapped read-only, parsed (data/shard_format.hpp) and range-checked
// once at open. A batch is then a copy of B·T+1 (sequential) or B·(T+1) (random) uint16 tokens
// from the page cache into int32 inputs/targets; nothing is read with read(2) in the loop.
//
// Sequential order is llm.c's DataLoader (llmc/dataloader.h) exactly: batch i, row b starts at
// token (i·B + b)·T of the current shard, targets are the inputs shifted by one, and when the
// next batch would need tokens past the end (pos + B·T + 1 > ntok) the loader moves to the next
// shard at offset 0, wrapping to shard 0 and epoch+1 after the last. Random order cuts every
// shard into non-overlapping windows of T+1 tokens starting at k·T (k < (ntok-1)/T) and visits all
// windows of all shards once per epoch in the permutation `epoch_permutation(seed, epoch)`;
// batch rows take consecutive permutation entries, continuing into the next epoch when one ends
// mid-batch, so every window is seen exactly once per epoch whatever B is.
//
// position() is (epoch, shard, token offset, seed) for sequential order and (epoch, 0, window
// index into the epoch's permutation, seed) for random order; seek() restores it exactly.
//
// Rank slices (data parallelism): with world_size N, rank r yields batches r, r+N, r+2N, ... of
// the one-process stream above (it steps over the other ranks' batches without copying them),
// and position() is where that stream stands after the last round of N batches: the same on
// every rank and the same as one process's after as many batches, so a checkpoint's position
// means the same whatever the number of ranks.
#pragma once

#include <glob.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "trainkit/core/batch.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/data/concepts.hpp"
#include "trainkit/data/mapped_file.hpp"
#include "trainkit/data/order.hpp"
#include "trainkit/data/shard_format.hpp"

namespace trainkit::data {

/// Configuration of an mmap_token_source. Errors name its fields ("mmap_source_config.seq_len").
struct mmap_source_config {
  std::string pattern;  // glob, e.g. "dir/fineweb_train_*.bin"
  int batch_size = 4;   // B
  int seq_len = 1024;   // T
  int vocab_size = 50257;
  order_kind order = order_kind::sequential;
  std::uint64_t seed = 0;                    // random order only
  shard_layout layout = shard_layout::llmc;  // headerless uint16 files only when asked for
  int rank = 0;                              // this rank's slice of every round of batches
  int world_size = 1;                        // ranks sharing the stream

  friend bool operator==(const mmap_source_config&, const mmap_source_config&) = default;
};

inline std::string to_string(const mmap_source_config& c) {
  return "pattern='" + c.pattern + "' batch_size=" + std::to_string(c.batch_size) +
         " seq_len=" + std::to_string(c.seq_len) + " vocab_size=" + std::to_string(c.vocab_size) +
         " order=" + std::string(to_string(c.order)) + " seed=" + std::to_string(c.seed) +
         " layout=" + to_string(c.layout) + " rank=" + std::to_string(c.rank) +
         " world_size=" + std::to_string(c.world_size);
}

/// Files matching a glob(3) pattern, sorted bytewise. config_error when nothing matches.
inline std::vector<std::string> glob_files(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
  if (rc == GLOB_NOMATCH) {
    ::globfree(&g);
    throw config_error("no file matches the data pattern '" + pattern + "'");
  }
  if (rc != 0) {
    ::globfree(&g);
    throw io_error("glob of data pattern '" + pattern + "' failed (" +
                   (rc == GLOB_NOSPACE ? "out of memory" : "read error") + ")");
  }
  std::vector<std::string> paths(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  ::globfree(&g);
  std::sort(paths.begin(), paths.end());  // glob sorts by the locale's collation; we want bytes
  return paths;
}

/// Token windows from the shards matching a glob, in llm.c's order or a seeded random order.
class mmap_token_source {
 public:
  explicit mmap_token_source(mmap_source_config config) : config_(std::move(config)) {
    validate_config();
    const std::vector<std::string> paths = glob_files(config_.pattern);
    const access_hint hint =
        config_.order == order_kind::sequential ? access_hint::sequential : access_hint::random;
    const std::uint64_t window = row_stride() * std::uint64_t(config_.batch_size) + 1;  // B*T+1
    shards_.reserve(paths.size());
    window_start_.push_back(0);
    for (const std::string& path : paths) {
      mapped_file file(path, hint);
      const shard_header h = parse_shard_header(file.bytes(), path, config_.layout);
      const std::span<const std::uint16_t> tokens = data::shard_tokens(file.bytes(), h);
      if (tokens.size() < window)
        throw config_error(path + ": " + std::to_string(tokens.size()) +
                           " tokens, fewer than one batch needs (batch_size " +
                           std::to_string(config_.batch_size) + " x seq_len " +
                           std::to_string(config_.seq_len) + " + 1 = " + std::to_string(window) +
                           ")");
      check_token_range(tokens, config_.vocab_size, path);
      total_tokens_ += tokens.size();
      window_start_.push_back(window_start_.back() + (tokens.size() - 1) / row_stride());
      shards_.push_back({std::move(file), tokens});
    }
    if (config_.order == order_kind::random &&
        window_start_.back() > std::numeric_limits<std::uint32_t>::max())
      throw config_error("data pattern '" + config_.pattern + "' has " +
                         std::to_string(window_start_.back()) +
                         " windows, more than random order supports (2^32 - 1)");
    reset();
  }

  int batch_size() const noexcept { return config_.batch_size; }
  int seq_len() const noexcept { return config_.seq_len; }
  int vocab_size() const noexcept { return config_.vocab_size; }
  const mmap_source_config& config() const noexcept { return config_; }
  std::size_t num_shards() const noexcept { return shards_.size(); }
  std::size_t total_tokens() const noexcept { return total_tokens_; }
  const std::string& shard_path(std::size_t i) const { return shards_.at(i).file.path(); }
  std::size_t shard_token_count(std::size_t i) const { return shards_.at(i).tokens.size(); }
  /// Random order: the windows one epoch visits (sum over shards of (ntok-1)/T).
  std::uint64_t windows_per_epoch() const noexcept { return window_start_.back(); }

  /// Fills `batch` (resized to B×T) with the next batch and advances.
  void next(host_batch& batch) {
    const int B = config_.batch_size, T = config_.seq_len;
    if (batch.batch_size != B || batch.seq_len != T || batch.inputs.size() != std::size_t(B) * T ||
        batch.targets.size() != std::size_t(B) * T)
      batch = host_batch(B, T);
    const int r = config_.rank, N = config_.world_size;
    for (int i = 0; i < N; ++i) {  // one round: the other ranks' batches are stepped over
      host_batch* out = i == r ? &batch : nullptr;
      if (config_.order == order_kind::sequential)
        next_sequential(out);
      else
        next_random(out);
    }
  }

  source_position position() const noexcept {
    if (config_.order == order_kind::sequential) return {epoch_, shard_, offset_, seed_};
    return {epoch_, 0, offset_, seed_};
  }

  /// Continues from `p`, a position this source (or one over the same files and config)
  /// reported. Random order adopts p.seed, so a resumed run keeps its permutation even if the
  /// configured seed changed. config_error when p does not fit these shards; the source is then
  /// unchanged.
  void seek(const source_position& p) {
    if (config_.order == order_kind::sequential) {
      if (p.shard >= shards_.size() || p.offset > shards_[p.shard].tokens.size())
        throw config_error("data position '" + p.to_string() + "' does not fit the " +
                           std::to_string(shards_.size()) + " shard(s) of '" + config_.pattern +
                           "'");
      epoch_ = p.epoch;
      shard_ = p.shard;
      offset_ = p.offset;
      seed_ = p.seed;
    } else {
      if (p.offset > windows_per_epoch())
        throw config_error("data position '" + p.to_string() + "' is past the " +
                           std::to_string(windows_per_epoch()) + " windows of '" + config_.pattern +
                           "'");
      epoch_ = p.epoch;
      shard_ = 0;
      offset_ = p.offset;
      if (seed_ != p.seed) perm_.clear();
      seed_ = p.seed;
    }
  }

  /// Back to the first batch of epoch 0 (a validation source restarts for every evaluation).
  void reset() { seek({0, 0, 0, config_.seed}); }

 private:
  struct shard {
    mapped_file file;
    std::span<const std::uint16_t> tokens;  // into file's mapping, which moves with it
  };

  std::uint64_t row_stride() const noexcept { return std::uint64_t(config_.seq_len); }

  void validate_config() const {
    if (config_.pattern.empty())
      throw config_error("mmap_source_config.pattern is empty (a glob of token shard files)");
    if (config_.batch_size < 1)
      throw config_error("mmap_source_config.batch_size must be >= 1: " +
                         std::to_string(config_.batch_size));
    if (config_.seq_len < 1)
      throw config_error("mmap_source_config.seq_len must be >= 1: " +
                         std::to_string(config_.seq_len));
    if (config_.vocab_size < 1 || config_.vocab_size > 65536)
      throw config_error(
          "mmap_source_config.vocab_size must be in [1, 65536] for uint16 token "
          "shards: " +
          std::to_string(config_.vocab_size));
    if (config_.world_size < 1 || config_.rank < 0 || config_.rank >= config_.world_size)
      throw config_error("mmap_source_config.rank " + std::to_string(config_.rank) +
                         " is not in [0, mmap_source_config.world_size " +
                         std::to_string(config_.world_size) + ")");
  }

  // llm.c: advance to the next shard when this one cannot supply B*T+1 more tokens.
  void skip_exhausted_shard() noexcept {
    const std::uint64_t need = std::uint64_t(config_.batch_size) * config_.seq_len + 1;
    if (offset_ + need <= shards_[shard_].tokens.size()) return;
    offset_ = 0;
    if (++shard_ == shards_.size()) {
      shard_ = 0;
      ++epoch_;
    }
  }

  // The stream's next batch, into `batch`, or only stepped over when it is null.
  void next_sequential(host_batch* batch) {
    skip_exhausted_shard();  // a seek may land on an exhausted offset
    const std::size_t n = std::size_t(config_.batch_size) * config_.seq_len;
    if (batch) {
      const std::uint16_t* src = shards_[shard_].tokens.data() + offset_;  // B*T+1 tokens
      std::int32_t* in = batch->inputs.data();                             // (B, T)
      std::int32_t* tg = batch->targets.data();                            // (B, T)
      for (std::size_t i = 0; i < n; ++i) in[i] = src[i];
      for (std::size_t i = 0; i < n; ++i) tg[i] = src[i + 1];
    }
    offset_ += n;
    skip_exhausted_shard();  // so position() names the shard/epoch the next batch comes from
  }

  // The stream's next batch, into `batch`, or only stepped over (no permutation needed) when it
  // is null.
  void next_random(host_batch* batch) {
    const std::size_t T = std::size_t(config_.seq_len);
    for (int b = 0; b < config_.batch_size; ++b) {
      if (offset_ >= windows_per_epoch()) {
        offset_ = 0;
        ++epoch_;
      }
      if (!batch) {
        ++offset_;
        continue;
      }
      if (perm_.empty() || perm_epoch_ != epoch_) {
        perm_ = epoch_permutation(std::uint32_t(windows_per_epoch()), seed_, epoch_);
        perm_epoch_ = epoch_;
      }
      const std::uint64_t w = perm_[offset_++];
      const auto it = std::upper_bound(window_start_.begin(), window_start_.end(), w);
      const std::size_t s = std::size_t(it - window_start_.begin()) - 1;
      const std::uint16_t* src = shards_[s].tokens.data() + (w - window_start_[s]) * T;  // T+1
      std::int32_t* in = batch->inputs.data() + std::size_t(b) * T;                      // (T)
      std::int32_t* tg = batch->targets.data() + std::size_t(b) * T;                     // (T)
      for (std::size_t t = 0; t < T; ++t) in[t] = src[t];
      for (std::size_t t = 0; t < T; ++t) tg[t] = src[t + 1];
    }
    if (offset_ >= windows_per_epoch()) {  // name the epoch the next window comes from
      offset_ = 0;
      ++epoch_;
    }
  }

  mmap_source_config config_;
  std::vector<shard> shards_;
  std::vector<std::uint64_t> window_start_;  // (num_shards + 1): first global window id per shard
  std::size_t total_tokens_ = 0;

  std::uint64_t epoch_ = 0;
  std::uint64_t shard_ = 0;   // sequential only
  std::uint64_t offset_ = 0;  // sequential: token offset in shard_; random: index into perm_
  std::uint64_t seed_ = 0;
  std::vector<std::uint32_t> perm_;  // random order: window ids of epoch perm_epoch_
  std::uint64_t perm_epoch_ = 0;
};

static_assert(data_source<mmap_token_source>);

}  // namespace trainkit::data
