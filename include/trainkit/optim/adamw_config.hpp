// trainkit/optim/adamw_config.hpp — AdamW's hyper-parameters, shared by adamw_cpu and adamw_cuda.
//
// Its own header so that CUDA translation units can name the config without including
// adamw_cpu.hpp, which pulls in Eigen (nvcc floods warnings on it). Both optimizers take exactly
// this type, so a run switches between CPU and CUDA without translating settings.
#pragma once

#include <cmath>
#include <string>

#include "trainkit/core/error.hpp"
#include "trainkit/core/tensor_role.hpp"
#include "trainkit/optim/detail/number_text.hpp"
#include "trainkit/optim/role_lr_scales.hpp"

namespace trainkit::optim {

/// AdamW hyper-parameters (GPT-3 paper / llm.c defaults). The learning rate is not here: it
/// changes every step and comes from the schedule through `update(model, lr, clip, ctx)`. Nor is
/// the gradient-clipping threshold: it is the trainer's (trainer_config::grad_clip), and the
/// optimizer receives only the factor.
struct adamw_config {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;  // decoupled; only on tensors whose role is in decay_roles
  // llm.c's rule (it decays the 2-D tensors): matrices and both embeddings (wte and wpe), not
  // biases or LayerNorm parameters; an untied output head (Llama's lm_head) is 2-D too.
  tensor_role_set decay_roles{tensor_role::embedding, tensor_role::matrix, tensor_role::head};
  // The rate of each role's tensors is the schedule's times this (optim/role_lr_scales.hpp); the
  // decoupled decay follows the scaled rate. All 1: a single rate, as always.
  role_lr_scales lr_scales{};

  friend bool operator==(const adamw_config&, const adamw_config&) = default;

  /// Throws config_error naming the first field out of range and its value.
  void validate() const {
    using detail::number_text;
    auto in_unit = [](float x) { return x >= 0.0f && x < 1.0f; };  // false for NaN
    if (!in_unit(beta1))
      throw config_error("adamw_config: beta1 must be in [0,1): " + number_text(beta1));
    if (!in_unit(beta2))
      throw config_error("adamw_config: beta2 must be in [0,1): " + number_text(beta2));
    if (!(eps > 0.0f) || !std::isfinite(eps))
      throw config_error("adamw_config: eps must be finite and > 0: " + number_text(eps));
    if (!(weight_decay >= 0.0f) || !std::isfinite(weight_decay))
      throw config_error("adamw_config: weight_decay must be finite and >= 0: " +
                         number_text(weight_decay));
    lr_scales.validate("adamw_config.lr_scales");
  }

  /// "beta1=0.9 beta2=0.95 eps=1e-08 weight_decay=0.1 decay_roles=embedding,matrix,head" for
  /// logs.
  std::string to_string() const {
    using detail::number_text;
    return "beta1=" + number_text(beta1) + " beta2=" + number_text(beta2) +
           " eps=" + number_text(eps) + " weight_decay=" + number_text(weight_decay) +
           " decay_roles=" + decay_roles.to_string() +
           (lr_scales.all_one() ? "" : " lr_scales={" + lr_scales.to_string() + "}");
  }
};

}  // namespace trainkit::optim
