// trainkit/optim/muon_orthogonalizer.hpp — which polynomial iteration Muon orthogonalises with:
// Keller Jordan's fixed quintic (five times the same coefficients) or the Polar Express schedule
// (different coefficients at every iteration), as the list of per-iteration coefficients that
// the host (optim/detail/newton_schulz.hpp), its bf16 twin and the CUDA iteration
// (optim/cuda/newton_schulz.cuh) all take.
//
// Polar Express: N. Amsel, D. Persson, C. Musco, R. M. Gower, "The Polar Express: Optimal Matrix
// Sign Methods and Their Application to the Muon Algorithm", arXiv:2505.16932 (2025). Each
// iteration's odd quintic is the minimax-optimal one for the interval the singular values lie in
// after the previous iterations, so five iterations land closer to U·Vᵀ than five of the fixed
// quintic. The coefficients below are the paper's for five iterations with safety factor 2e-2 and
// cushion 2, as modded-nanogpt adopted them (github.com/KellerJordan/modded-nanogpt) and nanochat
// (github.com/karpathy/nanochat, nanochat/optim.py) use them; both normalise with a margin, X = G /
// (‖G‖_F·1.01 + ε), so the spectral norm starts below 1 even after bf16 rounding. We keep Muon's
// normalisation X = G / (‖G‖_F + 1e-7) (one normalisation kernel for both methods) and fold the
// margin into the first iteration instead: p(X/s) = (a/s)·X + (b/s³)·X³ + (c/s⁵)·X⁵, exact up to
// the placement of ε (1e-7 against ‖G‖_F). The tests pin it to an independent PyTorch
// implementation that normalises the paper's way
// (tests/fixtures/recipe/make_muon_variant_fixtures.py).
#pragma once

#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/optim/detail/ns_coefficients.hpp"

namespace trainkit::optim {

/// How Muon orthogonalises: `ns5`, the published Muon's fixed quintic (any number of steps), or
/// `polar_express`, the per-iteration schedule (at most polar_express_max_steps steps).
enum class muon_orthogonalizer { ns5, polar_express };

inline constexpr std::string_view muon_orthogonalizer_name(muon_orthogonalizer o) noexcept {
  return o == muon_orthogonalizer::polar_express ? "polar" : "ns5";
}

/// "ns5" or "polar" (the names the program's --muon-ns takes); nullopt for anything else.
inline std::optional<muon_orthogonalizer> parse_muon_orthogonalizer(std::string_view s) noexcept {
  if (s == "ns5") return muon_orthogonalizer::ns5;
  if (s == "polar") return muon_orthogonalizer::polar_express;
  return std::nullopt;
}

/// Polar Express coefficients for five iterations (safety factor 2e-2, cushion 2), as published
/// (arXiv:2505.16932) and used by modded-nanogpt and nanochat. Kept in double; rounded to float
/// where the iteration uses them.
inline constexpr std::array<std::array<double, 3>, 5> polar_express_table{{
    {8.156554524902461, -22.48329292557795, 15.878769915207462},
    {4.042929935166739, -2.808917465908714, 0.5000178451051316},
    {3.8916678022926607, -2.772484153217685, 0.5060648178503393},
    {3.285753657755655, -2.3681294933425376, 0.46449024233003106},
    {2.3465413258596377, -1.7097828382687081, 0.42323551169305323},
}};
inline constexpr int polar_express_max_steps = int(polar_express_table.size());
/// The normalisation margin the Polar Express coefficients were computed for (‖G‖_F·1.01).
inline constexpr double polar_express_margin = 1.01;

/// The coefficients of each of `steps` iterations. ns5: Keller Jordan's quintic every time.
/// polar_express: the table's first `steps` rows (as nanochat takes them), the first divided by
/// the margin's powers (see the file header). Throws config_error naming
/// `muon_config.ns_steps` when polar_express is asked for more than five.
inline std::vector<detail::ns_coefficients> muon_iterations(muon_orthogonalizer o, int steps) {
  if (steps < 1) throw config_error("muon_config.ns_steps must be >= 1: " + std::to_string(steps));
  if (o == muon_orthogonalizer::ns5)
    return std::vector<detail::ns_coefficients>(std::size_t(steps), detail::muon_quintic);
  if (steps > polar_express_max_steps)
    throw config_error("muon_config.ns_steps must be in [1," +
                       std::to_string(polar_express_max_steps) +
                       "] with muon_config.orthogonalizer polar (the published coefficients "
                       "cover five iterations): " +
                       std::to_string(steps));
  std::vector<detail::ns_coefficients> out;
  for (int i = 0; i < steps; ++i) {
    const auto& row = polar_express_table[std::size_t(i)];
    const double s = i == 0 ? polar_express_margin : 1.0;
    out.push_back({static_cast<float>(row[0] / s), static_cast<float>(row[1] / (s * s * s)),
                   static_cast<float>(row[2] / (s * s * s * s * s))});
  }
  return out;
}

}  // namespace trainkit::optim
