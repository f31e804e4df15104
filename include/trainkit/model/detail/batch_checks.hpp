// trainkit/model/detail/batch_checks.hpp — what both GPT-2 models require of a batch before
// they touch it, with the same messages.
//
// A batch needs a non-empty shape, T within the position embedding (max_seq_len rows) and token
// pointers. Token ids are checked where the tokens live: gpt2_cpu scans them on the host
// (check_gpt2_tokens); gpt2_cuda flags them in its embedding kernel and reports after the step.
// `who` names the model in the message ("gpt2_cpu", "gpt2_cuda").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "trainkit/core/error.hpp"
#include "trainkit/model/gpt2/config.hpp"

namespace trainkit::model::detail {

/// B, T > 0 and T <= max_seq_len; config_error otherwise.
inline void check_gpt2_batch_shape(const gpt2_config& cfg, int B, int T, std::string_view who) {
  if (B <= 0 || T <= 0)
    throw config_error(std::string(who) + ": batch shape B=" + std::to_string(B) +
                       " T=" + std::to_string(T) + " is empty");
  if (T > cfg.max_seq_len)
    throw config_error(std::string(who) + ": sequence length T=" + std::to_string(T) +
                       " exceeds max_seq_len " + std::to_string(cfg.max_seq_len));
}

/// The batch's token pointers are set; `what` is "input" or "target".
inline void check_gpt2_tokens_given(const std::int32_t* tokens, const char* what,
                                    std::string_view who) {
  if (!tokens) throw config_error(std::string(who) + ": batch has no " + what + " tokens");
}

/// Host tokens (B·T of them, rows of T) are in [0, vocab_size); config_error naming the first
/// bad one and its (b, t).
inline void check_gpt2_tokens(const gpt2_config& cfg, const std::int32_t* tokens, std::size_t n,
                              const char* what, int T, std::string_view who) {
  check_gpt2_tokens_given(tokens, what, who);
  for (std::size_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= cfg.vocab_size)
      throw config_error(std::string(who) + ": " + what + " token " + std::to_string(tokens[i]) +
                         " at (b=" + std::to_string(i / std::size_t(T)) +
                         ", t=" + std::to_string(i % std::size_t(T)) +
                         ") is outside [0, vocab_size=" + std::to_string(cfg.vocab_size) + ")");
  }
}

}  // namespace trainkit::model::detail
