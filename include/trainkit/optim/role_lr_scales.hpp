// trainkit/optim/role_lr_scales.hpp — a learning-rate multiplier per parameter role, so that
// embeddings, the head, norms/biases ("scalars") and matrices each move at their own rate.
//
// The speedrun records set a separate peak rate per parameter group (modded-nanogpt: Adam at
// 0.3 for the embeddings, 0.008 for the head, 0.04 for the scalar parameters, Muon at 0.05 for
// the hidden matrices; nanochat: embeddings 0.2, unembedding 0.004, matrices 0.02). trainkit's
// trainer hands an optimizer one rate per step, the schedule's value; an optimizer multiplies it
// by the multiplier of each tensor's role, so every group follows the same schedule shape at its
// own peak. With every multiplier 1 (the default) the arithmetic is today's bit for bit (x·1 is x
// in IEEE arithmetic). Shared by adamw_cpu and adamw_cuda (through decay_segments) and so by the
// AdamW half of the Muon family. No Eigen, no CUDA: a .cu unit includes it.
#pragma once

#include <cmath>
#include <string>

#include "trainkit/core/error.hpp"
#include "trainkit/core/tensor_role.hpp"
#include "trainkit/optim/detail/number_text.hpp"

namespace trainkit::optim {

/// Learning-rate multipliers per tensor role (1 = the schedule's rate as it is).
struct role_lr_scales {
  float embedding = 1.0f, matrix = 1.0f, bias = 1.0f, norm = 1.0f, head = 1.0f;

  friend bool operator==(const role_lr_scales&, const role_lr_scales&) = default;

  constexpr float of(tensor_role r) const noexcept {
    switch (r) {
      case tensor_role::embedding:
        return embedding;
      case tensor_role::matrix:
        return matrix;
      case tensor_role::bias:
        return bias;
      case tensor_role::norm:
        return norm;
      case tensor_role::head:
        return head;
    }
    return 1.0f;
  }

  bool all_one() const noexcept { return *this == role_lr_scales{}; }

  /// Throws config_error naming `<prefix>.<role>` for a multiplier that is not finite and > 0.
  void validate(const std::string& prefix) const {
    for (tensor_role r : all_tensor_roles) {
      const float x = of(r);
      if (!(x > 0.0f) || !std::isfinite(x))
        throw config_error(prefix + "." + std::string(tensor_role_name(r)) +
                           " must be finite and > 0: " + detail::number_text(x));
    }
  }

  /// "embedding=1 matrix=1 bias=1 norm=1 head=1".
  std::string to_string() const {
    std::string out;
    for (tensor_role r : all_tensor_roles) {
      if (!out.empty()) out += ' ';
      out += tensor_role_name(r);
      out += '=';
      out += detail::number_text(of(r));
    }
    return out;
  }
};

}  // namespace trainkit::optim
