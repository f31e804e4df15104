// trainkit/core/tensor_role.hpp — what a parameter tensor is to its model, and sets of such roles.
//
// A model describes each tensor of its flat parameter buffer with a role; an optimizer decides
// from the role (never from the tensor's name or shape) how to treat it. AdamW's decay rule is one
// such decision: its config holds the set of roles that decay (adamw_config::decay_roles); Muon's
// split is another (hidden matrices by Muon, every other role by AdamW).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace trainkit {

/// The kinds of parameter tensor a model declares.
enum class tensor_role : std::uint8_t {
  embedding,  // a lookup table: token or position embeddings (wte, wpe)
  matrix,     // the weight of a linear map (qkvw, attprojw, fcw, fcprojw)
  bias,       // the additive term of a linear map (qkvb, attprojb, fcb, fcprojb)
  norm,       // a normalisation's gain or shift (LayerNorm's ln1w, ln1b, ..., lnfb)
  head,       // an untied output projection to the vocabulary (a Llama lm_head); a tied head is
              // its embedding's tensor and keeps the embedding role (GPT-2's wte)
};

inline constexpr tensor_role all_tensor_roles[] = {tensor_role::embedding, tensor_role::matrix,
                                                   tensor_role::bias, tensor_role::norm,
                                                   tensor_role::head};

constexpr std::string_view tensor_role_name(tensor_role r) noexcept {
  switch (r) {
    case tensor_role::embedding:
      return "embedding";
    case tensor_role::matrix:
      return "matrix";
    case tensor_role::bias:
      return "bias";
    case tensor_role::norm:
      return "norm";
    case tensor_role::head:
      return "head";
  }
  return "?";
}

/// A set of tensor roles (e.g. those AdamW decays); a value type, comparable and printable.
class tensor_role_set {
 public:
  constexpr tensor_role_set() noexcept = default;
  constexpr tensor_role_set(std::initializer_list<tensor_role> roles) noexcept {
    for (tensor_role r : roles) bits_ |= bit(r);
  }

  constexpr bool contains(tensor_role r) const noexcept { return (bits_ & bit(r)) != 0; }
  constexpr bool empty() const noexcept { return bits_ == 0; }

  /// The roles in declaration order, comma-separated ("embedding,matrix"); "none" when empty.
  std::string to_string() const {
    std::string out;
    for (tensor_role r : all_tensor_roles) {
      if (!contains(r)) continue;
      if (!out.empty()) out += ',';
      out += tensor_role_name(r);
    }
    return out.empty() ? "none" : out;
  }

  friend constexpr bool operator==(tensor_role_set, tensor_role_set) noexcept = default;

 private:
  static constexpr std::uint8_t bit(tensor_role r) noexcept {
    return std::uint8_t(1u << unsigned(r));
  }
  std::uint8_t bits_ = 0;
};

}  // namespace trainkit
