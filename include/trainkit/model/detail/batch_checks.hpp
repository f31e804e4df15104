// trainkit/model/detail/batch_checks.hpp — what every transformer model requires of a batch before
// it touches it, with the same messages for every family and device.
//
// A batch needs a non-empty shape, T within the config's max_seq_len (the position embedding's
// rows, or the RoPE table's) and token pointers. Token ids are checked where the tokens live: the
// CPU models scan them on the host (check_tokens); the CUDA models flag them in their embedding
// kernel and report after the step. `who` names the model in the message ("gpt2_cpu",
// "llama_cuda"), `config` the config type whose field bounds T ("gpt2_config").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "trainkit/core/error.hpp"

namespace trainkit::model::detail {

/// B, T > 0 and T <= max_seq_len; config_error otherwise.
inline void check_batch_shape(int B, int T, int max_seq_len, std::string_view who,
                              std::string_view config) {
  if (B <= 0 || T <= 0)
    throw config_error(std::string(who) + ": batch shape B=" + std::to_string(B) +
                       " T=" + std::to_string(T) + " is empty");
  if (T > max_seq_len)
    throw config_error(std::string(who) + ": sequence length T=" + std::to_string(T) + " exceeds " +
                       std::string(config) + ".max_seq_len " + std::to_string(max_seq_len));
}

/// The batch's token pointers are set; `what` is "input" or "target".
inline void check_tokens_given(const std::int32_t* tokens, const char* what, std::string_view who) {
  if (!tokens) throw config_error(std::string(who) + ": batch has no " + what + " tokens");
}

/// Host tokens (B·T of them, rows of T) are in [0, vocab_size); config_error naming the first
/// bad one and its (b, t).
inline void check_tokens(const std::int32_t* tokens, std::size_t n, const char* what, int T,
                         int vocab_size, std::string_view who) {
  check_tokens_given(tokens, what, who);
  for (std::size_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab_size)
      throw config_error(std::string(who) + ": " + what + " token " + std::to_string(tokens[i]) +
                         " at (b=" + std::to_string(i / std::size_t(T)) +
                         ", t=" + std::to_string(i % std::size_t(T)) +
                         ") is outside [0, vocab_size=" + std::to_string(vocab_size) + ")");
  }
}

}  // namespace trainkit::model::detail
