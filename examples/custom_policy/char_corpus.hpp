// examples/custom_policy/char_corpus.hpp — a user-written DataSource: characters of a text.
//
// This file is deliberately *outside* include/: it shows that a data source is just a type with
// the members trainkit::data::data_source lists, written against the public headers only. Tokens
// are bytes (vocabulary 128: ASCII; other bytes become '?'), and windows are read the way llm.c's
// loader reads a shard — batch i, row b starts at character (i·B + b)·T — wrapping around the text,
// so the position is one number (windows consumed) and seek() is exact and O(1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <trainkit/core/batch.hpp>
#include <trainkit/core/error.hpp>
#include <trainkit/data/concepts.hpp>

namespace custom_policy {

/// A few paragraphs to train on when no file is given, so the example runs offline.
inline constexpr std::string_view default_text =
    "A trainer is assembled from five parts. The data source reads text and cuts it into "
    "windows. The prefetcher runs ahead of the model on its own thread, so that the model never "
    "waits for the next batch. The model reads a window of characters and guesses the next one; "
    "it adds up how wrong it was and works out which way each weight should move. The optimizer "
    "moves every weight a little in that direction, and remembers how the weights moved before. "
    "The checkpointer writes all of it to disk now and then, so that a run that stops can start "
    "again where it left off and see the same batches it would have seen.\n"
    "None of the five parts knows the others by name. Each one is a type that keeps a small "
    "promise, and the compiler checks the promise before the program runs. A model that forgets "
    "to say how much work a token costs does not compile, and the message says what it forgot. "
    "A data source that cannot say where it is does not compile either, because a run that "
    "cannot say where it is cannot be resumed.\n"
    "The small model in this example looks at the last eight characters, turns each into a short "
    "list of numbers, passes them through one hidden layer and scores every character that could "
    "come next. It is far too small to write well, but it learns quickly which letters follow "
    "which, where the spaces go, and that a full stop is followed by a space and a capital "
    "letter. Its loss falls from the loss of guessing to less than half of it within a hundred "
    "steps, on two cores, in a few seconds.\n";

struct char_corpus_config {
  int batch_size = 16;  // B
  int seq_len = 64;     // T
};

/// Character windows over a text; satisfies trainkit::data::data_source.
class char_corpus {
 public:
  static constexpr int vocab = 128;

  char_corpus(std::string_view text, char_corpus_config config) : config_(config) {
    if (config_.batch_size < 1 || config_.seq_len < 1)
      throw trainkit::config_error("char_corpus: batch_size " + std::to_string(config_.batch_size) +
                                   " and seq_len " + std::to_string(config_.seq_len) +
                                   " must be >= 1");
    if (text.size() < std::size_t(config_.seq_len) + 1)
      throw trainkit::config_error("char_corpus: the text has " + std::to_string(text.size()) +
                                   " characters, fewer than one window of seq_len + 1 = " +
                                   std::to_string(config_.seq_len + 1));
    tokens_.reserve(text.size());
    for (unsigned char c : text) tokens_.push_back(c < vocab ? std::int32_t(c) : std::int32_t('?'));
  }

  int batch_size() const noexcept { return config_.batch_size; }
  int seq_len() const noexcept { return config_.seq_len; }
  int vocab_size() const noexcept { return vocab; }

  void next(trainkit::host_batch& batch) {
    const int B = config_.batch_size, T = config_.seq_len;
    if (batch.batch_size != B || batch.seq_len != T) batch = trainkit::host_batch(B, T);
    // Window starts run over [0, starts): every window, targets included, stays inside the text.
    const std::size_t starts = tokens_.size() - std::size_t(T);
    for (int b = 0; b < B; ++b) {
      const std::size_t start = (window_ * std::size_t(T)) % starts;
      for (int t = 0; t < T; ++t) {
        batch.inputs[std::size_t(b) * T + t] = tokens_[start + t];  // (B, T)
        batch.targets[std::size_t(b) * T + t] = tokens_[start + t + 1];
      }
      ++window_;
    }
  }

  /// offset = windows consumed; a checkpoint stores it and seek() restores it.
  trainkit::source_position position() const noexcept { return {.offset = window_}; }
  void seek(const trainkit::source_position& p) { window_ = p.offset; }

 private:
  char_corpus_config config_;
  std::vector<std::int32_t> tokens_;
  std::uint64_t window_ = 0;
};

// Checked here, at the definition: a missing member is reported against this line, not from deep
// inside the trainer.
static_assert(trainkit::data::data_source<char_corpus>);

}  // namespace custom_policy
