// trainkit/optim/detail/muon_cuda_twin.hpp — the host twin of optim::muon_cuda's whole step: the
// same numbers, stored and rounded where the device stores and rounds them.
//
// muon_cuda (optim/muon_cuda.hpp) keeps fp32 master weights initialised from the model's bf16
// parameters, fp32 momentum, and reads bf16 gradients. Per Muon matrix, element by element:
//   g   = float(grad_bf16)·factor
//   buf = buf + (1−β)·(g − buf)                    (muon_cpu's order)
//   u   = bf16(Nesterov ? g + β·(buf − g) : buf)   the Newton–Schulz input is bf16 on the device
//   O   = newton_schulz_bf16_reference(u)          the bf16 twin of optim/cuda/newton_schulz.cuh
//   master = master·keep − (rate·shape)·O;  param = bf16(master)  (nearest even)
// with keep = 1 − rate·λ and shape = √max(1, rows/cols), each product rounded separately (the
// kernels use __fmul_rn/__fsub_rn, so nvcc does not contract them; trainkit's builds pass
// -ffp-contract=off to the host compiler). The AdamW half is basic_adamw_cpu<float> over the packed
// other elements, fp32 master from bf16 parameters and bf16 gradients: adamw_cuda's kernel is
// adamw_cpu's formula to the last bit or two (optim/cuda/adamw.cuh), and muon_cuda runs adamw_cuda
// itself.
//
// So a GPU test can compare muon_cuda with this class at the tolerance of differently ordered fp32
// sums inside the bf16 GEMMs, and a CPU test can compare it with muon_cpu (fp32 throughout) and
// with the PyTorch fixtures at the tolerance bf16 Newton–Schulz explains. Includes adamw_cpu.hpp
// (Eigen): compile it with the host compiler, as tests/cuda's reference units do.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/core/execution_context.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/detail/newton_schulz_bf16.hpp"
#include "trainkit/optim/detail/ns_coefficients.hpp"
#include "trainkit/optim/muon_config.hpp"
#include "trainkit/optim/muon_matrices.hpp"

namespace trainkit::optim::detail {

class muon_cuda_twin {
  struct packed_view {  // the AdamW elements as a host model basic_adamw_cpu can update
    using memory_space = host_memory;
    using parameter_type = float;
    std::span<float> params, grads;
    std::span<const tensor_info> layout;
    std::span<const tensor_info> parameter_layout() const { return layout; }
    std::span<float> parameters() { return params; }
    std::span<float> gradients() { return grads; }
    std::size_t num_parameters() const { return params.size(); }
  };

 public:
  /// `params`: the model's parameters (rounded to bf16 here, as the device holds them), laid out
  /// by `layout`. `k`: the Newton–Schulz coefficients (a test may plant a slip).
  muon_cuda_twin(std::span<const tensor_info> layout, std::span<const float> params,
                 muon_config config, ns_coefficients k = muon_quintic)
      : config_((config.validate(), config)),
        k_(k),
        layout_(layout.begin(), layout.end()),
        matrices_(muon_matrices(layout_, config_.muon_roles, "muon_cuda_twin")),
        runs_(muon_adamw_runs(matrices_, params.size(), "muon_cuda_twin")),
        adamw_layout_(muon_adamw_layout(layout_, config_.muon_roles, runs_, "muon_cuda_twin")),
        master_(params.size()),
        packed_master_(muon_run_elements(runs_)),
        packed_grads_(packed_master_.size()),
        adamw_(packed_view{packed_master_, packed_grads_, adamw_layout_}, config_.adamw) {
    for (std::size_t i = 0; i < params.size(); ++i) master_[i] = round_to_bf16(params[i]);
    std::size_t elements = 0;
    for (const muon_matrix& m : matrices_) elements += m.numel();
    momentum_.assign(elements, 0.0f);
    gather(master_, packed_master_);
  }

  /// One step from `grads` (the model's gradients; rounded to bf16 here) at the schedule's rate
  /// `lr`, the gradients times `factor` (the device's float clipping factor).
  void update(std::span<const float> grads, float lr, float factor) {
    if (grads.size() != master_.size())
      throw config_error("muon_cuda_twin: " + std::to_string(grads.size()) + " gradients for " +
                         std::to_string(master_.size()) + " parameters");
    std::vector<float> g(grads.size());
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = round_to_bf16(grads[i]);

    // AdamW half: adamw_cuda over the packed elements.
    gather(g, packed_grads_);
    packed_view view{packed_master_, packed_grads_, adamw_layout_};
    host_context ctx;
    adamw_.update(view, lr, {double(factor)}, ctx);
    scatter(packed_master_, master_);

    // Muon half.
    const float rate = static_cast<float>(double(lr) * config_.lr_ratio);
    const float keep = 1.0f - rate * config_.weight_decay;
    const float beta = config_.momentum, one_minus_beta = 1.0f - config_.momentum;
    // One thread per matrix (matrices are disjoint; each one's arithmetic is sequential, so the
    // result does not depend on the thread count).
#pragma omp parallel for schedule(dynamic, 1)
    for (std::ptrdiff_t i = 0; i < std::ptrdiff_t(matrices_.size()); ++i) {
      const muon_matrix& m = matrices_[std::size_t(i)];
      const std::size_t n = m.numel();
      std::vector<float> u(n), o(n);
      float* buf = momentum_.data() + m.state_offset;
      for (std::size_t e = 0; e < n; ++e) {
        const float gk = g[m.offset + e] * factor;
        buf[e] = buf[e] + one_minus_beta * (gk - buf[e]);
        u[e] = round_to_bf16(config_.nesterov ? gk + beta * (buf[e] - gk) : buf[e]);
      }
      newton_schulz_bf16_reference(u.data(), o.data(), m.rows, m.cols, config_.ns_steps, k_);
      const float step =
          rate * static_cast<float>(std::sqrt(std::max(1.0, double(m.rows) / double(m.cols))));
      for (std::size_t e = 0; e < n; ++e) {
        const float decayed = master_[m.offset + e] * keep;
        const float moved = step * o[e];
        master_[m.offset + e] = decayed - moved;
      }
    }
  }

  /// The fp32 master weights of every element (model layout).
  std::span<const float> master() const noexcept {
    return master_;
  }
  /// The model's bf16 parameters after the steps (master rounded to nearest even), as floats.
  std::vector<float> params() const {
    std::vector<float> out(master_.size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = round_to_bf16(master_[i]);
    return out;
  }
  /// Every matrix's momentum, packed in layout order ("optim.muon.momentum").
  std::span<const float> momentum() const noexcept {
    return momentum_;
  }
  std::span<const muon_matrix> matrices() const noexcept {
    return matrices_;
  }

 private:
  void gather(std::span<const float> flat, std::span<float> packed) const {
    std::size_t at = 0;
    for (const muon_run& r : runs_)
      for (std::size_t i = r.begin; i < r.end; ++i) packed[at++] = flat[i];
  }
  void scatter(std::span<const float> packed, std::span<float> flat) const {
    std::size_t at = 0;
    for (const muon_run& r : runs_)
      for (std::size_t i = r.begin; i < r.end; ++i) flat[i] = packed[at++];
  }

  muon_config config_;
  ns_coefficients k_;
  std::vector<tensor_info> layout_;
  std::vector<muon_matrix> matrices_;
  std::vector<muon_run> runs_;
  std::vector<tensor_info> adamw_layout_;
  std::vector<float> master_;                        // (N,) fp32 master weights, model layout
  std::vector<float> momentum_;                      // (matrix elements,) packed in layout order
  std::vector<float> packed_master_, packed_grads_;  // (AdamW elements,)
  basic_adamw_cpu<float> adamw_;
};

}  // namespace trainkit::optim::detail
