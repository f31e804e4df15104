// trainkit/model/sampling.hpp — sampling text from a language model: temperature, top-k, seed.
//
// `sample_token` draws the next token from one row of logits; `generate` extends a prompt one token
// at a time with any model that provides `forward_logits(inputs, B, T)` (gpt2_cpu does), keeping
// the last max_seq_len tokens as context. Padded vocabulary columns [V, Vp) are never candidates.
// Draws use the engine's raw 64-bit output (not std::uniform_real_distribution, whose algorithm
// differs between standard libraries), so a seed gives the same text everywhere.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "trainkit/core/error.hpp"

namespace trainkit::model {

struct sampling_config {
  float temperature = 1.0f;  // 0 = greedy (argmax)
  int top_k = 0;             // keep the k most likely tokens; 0 = all
  std::uint64_t seed = 0;

  void validate() const {
    if (!(temperature >= 0) || !std::isfinite(temperature))
      throw config_error("sampling_config.temperature must be >= 0: " +
                         std::to_string(temperature));
    if (top_k < 0)
      throw config_error("sampling_config.top_k must be >= 0: " + std::to_string(top_k));
  }
};

/// A uniform double in [0, 1) from the top 53 bits of one engine draw.
inline double uniform01(std::mt19937_64& rng) {
  return double(rng() >> 11) * 0x1p-53;
}

/// The next token from `logits` (at least `vocab` entries; only the first `vocab` are used).
template <class Scalar>
std::int32_t sample_token(std::span<const Scalar> logits, int vocab, const sampling_config& c,
                          std::mt19937_64& rng) {
  if (vocab <= 0 || logits.size() < std::size_t(vocab))
    throw config_error("sample_token: " + std::to_string(logits.size()) +
                       " logits for a vocabulary of " + std::to_string(vocab));
  const auto row = logits.first(std::size_t(vocab));
  if (c.temperature == 0.0f)
    return std::int32_t(std::max_element(row.begin(), row.end()) - row.begin());

  std::vector<std::int32_t> ids(static_cast<std::size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  std::size_t keep = ids.size();
  if (c.top_k > 0 && std::size_t(c.top_k) < ids.size()) {
    keep = std::size_t(c.top_k);
    // Ties broken by id so the candidate set does not depend on the sort implementation.
    std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(keep), ids.end(),
                      [&](std::int32_t a, std::int32_t b) {
                        return row[a] > row[b] || (row[a] == row[b] && a < b);
                      });
  }
  double max_logit = -INFINITY;
  for (std::size_t i = 0; i < keep; ++i) max_logit = std::max(max_logit, double(row[ids[i]]));
  std::vector<double> weights(keep);
  double total = 0;
  for (std::size_t i = 0; i < keep; ++i) {
    weights[i] = std::exp((double(row[ids[i]]) - max_logit) / c.temperature);
    total += weights[i];
  }
  double u = uniform01(rng) * total;
  for (std::size_t i = 0; i < keep; ++i) {
    u -= weights[i];
    if (u < 0) return ids[i];
  }
  return ids[keep - 1];  // rounding left u a hair above zero
}

/// Requires: `forward_logits(span<const int32_t>, B, T)` → (B, T, Vp) logits, and `config()` with
/// vocab_size, padded_vocab_size and max_seq_len.
template <class Model>
concept logit_model = requires(Model m, std::span<const std::int32_t> in) {
  m.forward_logits(in, 1, 1);
  m.config().vocab_size;
  m.config().padded_vocab_size;
  m.config().max_seq_len;
};

/// `count` new tokens after `prompt` (which must not be empty: start from <|endoftext|>).
template <logit_model Model>
std::vector<std::int32_t> generate(Model& model, std::span<const std::int32_t> prompt, int count,
                                   const sampling_config& c) {
  c.validate();
  if (prompt.empty()) throw config_error("generate: the prompt has no tokens");
  if (count < 0) throw config_error("generate: negative token count " + std::to_string(count));
  const auto& cfg = model.config();
  std::mt19937_64 rng(c.seed);
  std::vector<std::int32_t> tokens(prompt.begin(), prompt.end());
  std::vector<std::int32_t> out;
  out.reserve(std::size_t(count));
  for (int i = 0; i < count; ++i) {
    const std::size_t window = std::min(tokens.size(), std::size_t(cfg.max_seq_len));
    const std::span<const std::int32_t> context(tokens.data() + tokens.size() - window, window);
    const auto logits = model.forward_logits(context, 1, int(window));
    const auto last = logits.subspan((window - 1) * std::size_t(cfg.padded_vocab_size),
                                     std::size_t(cfg.padded_vocab_size));
    const std::int32_t next = sample_token(last, cfg.vocab_size, c, rng);
    tokens.push_back(next);
    out.push_back(next);
  }
  return out;
}

}  // namespace trainkit::model
