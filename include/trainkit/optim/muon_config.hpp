// trainkit/optim/muon_config.hpp — the settings of the Muon optimizer family: Muon's own
// hyper-parameters for the hidden matrices and an adamw_config for every other tensor.
//
// Its own header, like adamw_config.hpp, so that a CUDA translation unit or a program's option
// table can name the settings without including the Eigen-based muon_cpu.hpp. Validation names
// the field (`muon_config.momentum`, `muon_config.adamw.eps`, ...) and the value; it reports and
// never fixes.
//
// Learning rates: the trainer hands the optimizer one rate per step, the schedule's value, and that
// is the only rate the optimizer receives. AdamW's half uses it as it is; Muon's half moves at a
// fixed multiple of it, `lr_ratio` (rate_muon = lr · lr_ratio), so it follows the schedule's
// shape (warmup, decay) with nothing to keep in agreement. A program that takes Muon's peak rate
// (gpt_fineweb's --muon-lr) sets lr_ratio = muon peak / schedule peak once: the defaults, Muon's
// published 0.02 at a 6e-4 schedule peak, are lr_ratio = 0.02 / 6e-4 ≈ 33.3.
#pragma once

#include <cmath>
#include <string>

#include "trainkit/core/error.hpp"
#include "trainkit/core/tensor_role.hpp"
#include "trainkit/optim/adamw_config.hpp"
#include "trainkit/optim/detail/number_text.hpp"

namespace trainkit::optim {

/// Muon's hyper-parameters (defaults: Keller Jordan's published Muon, github.com/KellerJordan/Muon,
/// and its write-up https://kellerjordan.github.io/posts/muon/) plus AdamW's for the other roles.
struct muon_config {
  // Muon's rate over the schedule's (see the file header); default: 0.02 at a 6e-4 peak.
  double lr_ratio = double(0.02f) / double(6e-4f);
  float momentum = 0.95f;  // β of the momentum buffer
  bool nesterov = true;    // update from g + β·(buf − g) rather than from buf
  int ns_steps = 5;        // Newton–Schulz iterations
  float weight_decay = 0;  // decoupled: p ← p·(1 − rate·weight_decay) before the update
  // Roles Muon updates (each 2-D slice, each fused part separately); every other role goes to
  // AdamW. Only roles whose tensors are 2-D or more make sense here (checked against the model).
  tensor_role_set muon_roles{tensor_role::matrix};
  adamw_config adamw{};  // embeddings, head, norms, biases: lr is the schedule's value itself

  friend bool operator==(const muon_config&, const muon_config&) = default;

  /// Throws config_error naming the first field out of range (`muon_config.<field>`) and its
  /// value; AdamW's half is checked by adamw_config::validate.
  void validate() const {
    using detail::number_text;
    auto positive = [](double x) { return x > 0.0 && std::isfinite(x); };  // false for NaN
    if (!positive(lr_ratio))
      throw config_error("muon_config.lr_ratio must be finite and > 0: " +
                         detail::double_text(lr_ratio));
    if (!(momentum >= 0.0f && momentum < 1.0f))
      throw config_error("muon_config.momentum must be in [0,1): " + number_text(momentum));
    if (ns_steps < 1 || ns_steps > 100)
      throw config_error("muon_config.ns_steps must be in [1,100]: " + std::to_string(ns_steps));
    if (!(weight_decay >= 0.0f) || !std::isfinite(weight_decay))
      throw config_error("muon_config.weight_decay must be finite and >= 0: " +
                         number_text(weight_decay));
    for (tensor_role r : {tensor_role::bias, tensor_role::norm})
      if (muon_roles.contains(r))
        throw config_error("muon_config.muon_roles cannot hold '" +
                           std::string(tensor_role_name(r)) +
                           "' (its tensors are 1-D): " + muon_roles.to_string());
    try {
      adamw.validate();
    } catch (const config_error& e) {  // "adamw_config..." → "muon_config.adamw..."
      const std::string what = e.what(), prefix = "adamw_config";
      if (what.rfind(prefix, 0) != 0) throw;
      throw config_error("muon_config.adamw" + what.substr(prefix.size()));
    }
  }

  /// "lr_ratio=33.333331005027006 momentum=0.95 nesterov=1 ns_steps=5 weight_decay=0
  /// muon_roles=matrix adamw={...}" for logs and manifests.
  std::string to_string() const {
    using detail::number_text;
    return "lr_ratio=" + detail::double_text(lr_ratio) + " momentum=" + number_text(momentum) +
           " nesterov=" + (nesterov ? "1" : "0") + " ns_steps=" + std::to_string(ns_steps) +
           " weight_decay=" + number_text(weight_decay) + " muon_roles=" + muon_roles.to_string() +
           " adamw={" + adamw.to_string() + "}";
  }
};

}  // namespace trainkit::optim
