// trainkit/data/shard_writer.hpp — cuts an ordered token stream into llm.c shards: one
// validation shard, then training shards of a fixed size.
//
// File names follow llm.c's and modded-nanogpt's fineweb.py: <prefix>_val_000000.bin for the
// first `val_tokens` tokens (none when val_tokens is 0), then <prefix>_train_000001.bin, _000002,
// ... of `shard_tokens` each; the last training shard may be shorter (finish()). Documents may
// straddle two shards, as in llm.c. Each shard goes through write_shard (temporary name, fsync,
// rename), so a crash leaves at most a *.tmp file, never a short shard under a final name.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/data/shard_format.hpp"

namespace trainkit::data {

/// Appends tokens in order; writes each shard under `dir` as soon as it is full.
class shard_writer {
 public:
  /// config_error for shard_tokens < 1 or val_tokens < 0.
  shard_writer(std::filesystem::path dir, std::string prefix, std::int64_t val_tokens,
               std::int64_t shard_tokens)
      : dir_(std::move(dir)),
        prefix_(std::move(prefix)),
        val_tokens_(val_tokens),
        shard_tokens_(shard_tokens) {
    if (shard_tokens_ < 1)
      throw config_error("shard_writer: shard_tokens must be >= 1, got " +
                         std::to_string(shard_tokens_));
    if (val_tokens_ < 0)
      throw config_error("shard_writer: val_tokens must be >= 0, got " +
                         std::to_string(val_tokens_));
    in_val_ = val_tokens_ > 0;
  }

  /// Appends `tokens`; every shard that fills up is written (io_error if that fails).
  void append(std::span<const std::uint16_t> tokens) {
    std::size_t i = 0;
    while (i < tokens.size()) {
      const auto cap = static_cast<std::size_t>(in_val_ ? val_tokens_ : shard_tokens_);
      const std::size_t take = std::min(cap - buffer_.size(), tokens.size() - i);
      buffer_.insert(buffer_.end(), tokens.begin() + static_cast<std::ptrdiff_t>(i),
                     tokens.begin() + static_cast<std::ptrdiff_t>(i + take));
      i += take;
      if (buffer_.size() == cap) flush();
    }
  }

  /// Writes the last, partial shard (if any tokens are pending).
  void finish() {
    if (!buffer_.empty()) flush();
  }

  /// Tokens written to the validation shard / to training shards so far.
  std::uint64_t val_written() const noexcept { return val_written_; }
  std::uint64_t train_written() const noexcept { return train_written_; }
  /// File names (relative to dir) of the shards written, in order.
  const std::vector<std::string>& written() const noexcept { return written_; }

 private:
  void flush() {
    char index[16];
    std::snprintf(index, sizeof index, "%06d", in_val_ ? 0 : next_train_index_);
    const std::string name = prefix_ + (in_val_ ? "_val_" : "_train_") + index + ".bin";
    write_shard((dir_ / name).string(), buffer_);
    written_.push_back(name);
    (in_val_ ? val_written_ : train_written_) += buffer_.size();
    if (!in_val_) ++next_train_index_;
    in_val_ = false;
    buffer_.clear();
  }

  std::filesystem::path dir_;
  std::string prefix_;
  std::int64_t val_tokens_, shard_tokens_;
  bool in_val_;
  int next_train_index_ = 1;  // llm.c / modded-nanogpt: shard 0 is val, training starts at 1
  std::vector<std::uint16_t> buffer_;
  std::uint64_t val_written_ = 0, train_written_ = 0;
  std::vector<std::string> written_;
};

}  // namespace trainkit::data
