// trainkit/optim/muon_cpu.hpp — the Muon optimizer family on the host: Muon for the hidden
// matrices, AdamW for everything else, the split made by parameter role.
//
// Muon (Keller Jordan, https://kellerjordan.github.io/posts/muon/, and
// github.com/KellerJordan/Muon) updates a weight matrix with the orthogonalised momentum of its
// gradient. Per matrix, per step:
//   buf ← β·buf + (1−β)·g                          momentum (g already times the clip factor)
//   u   ← g + β·(buf − g)   (Nesterov; buf without)
//   O   ← NewtonSchulz5(u)                         ≈ U·Vᵀ of u (optim/detail/newton_schulz.hpp)
//   p   ← p·(1 − η·λ) − η·√max(1, rows/cols)·O     decoupled weight decay, then the update
// The shape factor is the published Muon's (`max(1, rows/cols)^0.5`, rows = output features as a
// PyTorch Linear stores them, which is how trainkit's models store matrices too): O has unit
// singular values, so its RMS is 1/√max(rows, cols); the factor lifts a tall matrix's update to the
// RMS of a square one, 1/√cols. We keep that convention rather than Moonshot's 0.2·√max(rows, cols)
// (RMS matched to AdamW's) because the published default rate η = 0.02 is tuned for it and the
// golden fixtures pin the published algorithm.
//
// "A matrix" is one 2-D slice of a tensor whose role is in muon_config::muon_roles (by default
// `matrix`): a stacked [L, rows, cols] tensor is L matrices, and a slice fusing several matrices
// (tensor_info::row_parts: GPT-2's qkvw is q, k and v) is one matrix per part, as modded-nanogpt
// treats q, k and v. Every other tensor (embeddings, an untied head, norms, biases) and any padding
// between tensors goes to basic_adamw_cpu, reused as it is: those elements are packed into one
// buffer, updated there and written back, so AdamW's arithmetic exists once in the code base.
//
// Variants (muon_config; each off by default, and off the arithmetic above is unchanged):
// - `orthogonalizer = polar_express`: NewtonSchulz5 becomes the Polar Express iteration, other
//   coefficients at every step (optim/muon_orthogonalizer.hpp; Amsel et al. 2025,
//   arXiv:2505.16932).
// - `normuon`: NorMuon (Z. Li, L. Liu, C. Liang, W. Chen, T. Zhao, "NorMuon: Making Muon more
//   efficient and scalable", arXiv:2510.05491, 2025) keeps a second moment per neuron of the
//   orthogonalised update and divides by its root, evening out the update's scale across
//   neurons. In the form modded-nanogpt and nanochat run it (nanochat/optim.py): lines are the
//   rows when rows ≥ cols, else the columns (max(rows, cols) lines of n_red = min(rows, cols)
//   elements each); per line l
//     m_l ← mean over the line of O²;   v_l ← v_l + (1−β₂)·(m_l − v_l);   s_l = 1/√max(v_l, 1e-10)
//   then O ← O·s_l·(‖O‖_F / max(‖O·s‖_F, 1e-10)), with ‖O‖_F² = Σ n_red·m_l and ‖O·s‖_F² =
//   Σ n_red·m_l·s_l²: the normalised update keeps O's Frobenius norm, so Muon's rate convention
//   (and η = 0.02) holds. The paper instead rescales to 0.2·√(rows·cols) (Moonshot's RMS match).
//   State "optim.muon.second_moment" (every owned matrix's lines, packed in layout order).
// - `cautious_weight_decay`: Cautious Weight Decay (L. Chen et al., "Cautious Weight Decay",
//   arXiv:2510.12402, 2025; in modded-nanogpt and nanochat's Muon) decays only the coordinates
//   the update moves toward zero: p ← (u·p ≥ 0 ? p·(1 − η·λ) : p) − η·√max(1, rows/cols)·u, with
//   u the update after the steps above and p the weight before it.
//
// Muon's rate follows the schedule: the trainer hands `lr`, the schedule's value, which AdamW uses
// as it is; Muon uses lr · muon_config::lr_ratio (muon_config.hpp).
//
// Matrices are orthogonalised in parallel (OpenMP over matrices, one thread per matrix), so the
// result depends neither on the thread count nor on the order matrices are taken in. State:
// "optim.muon.momentum" (every matrix's buffer, packed in layout order), AdamW's moments as
// "optim.adamw.m"/"optim.adamw.v" over the packed other elements, and "optim.step"; the names
// differ from adamw_cpu's so that neither optimizer resumes from the other's checkpoint. One rank
// of optim/sharded_muon_cpu.hpp is this class constructed for a contiguous range of the matrices
// (muon_shards): it keeps and updates only those.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "trainkit/comm/gradient_layout.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/execution_context.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/model/concepts.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/clip_scale.hpp"
#include "trainkit/optim/detail/newton_schulz.hpp"
#include "trainkit/optim/muon_config.hpp"
#include "trainkit/optim/muon_matrices.hpp"
#include "trainkit/optim/muon_orthogonalizer.hpp"

namespace trainkit::optim {

/// Muon for the matrices and AdamW for the rest, over a host-memory model of `Scalar`s.
template <class Scalar>
class basic_muon_cpu {
  static_assert(std::floating_point<Scalar>, "basic_muon_cpu computes in float or double");

  // The elements AdamW updates, packed into buffers of their own: a model adamw_cpu can update.
  struct packed_view {
    using memory_space = host_memory;
    using parameter_type = Scalar;
    std::span<Scalar> params, grads;
    std::span<const tensor_info> layout;
    std::span<const tensor_info> parameter_layout() const { return layout; }
    std::span<Scalar> parameters() { return params; }
    std::span<Scalar> gradients() { return grads; }
    std::size_t num_parameters() const { return params.size(); }
  };

 public:
  using memory_space = host_memory;
  using parameter_type = Scalar;
  using config_type = muon_config;
  static constexpr gradient_layout expected_gradients = gradient_layout::replicated;

  /// Finds the matrices (by role), zeroes the momentum and AdamW's moments. Throws config_error
  /// for a bad config or layout.
  template <model::parameter_holder M>
  requires std::same_as<typename M::memory_space, host_memory> basic_muon_cpu(const M& model,
                                                                              muon_config config)
      : basic_muon_cpu(model, config, std::nullopt) {}

  /// Updates (and keeps momentum for) only matrices [owned.first, owned.last) of `matrices()`,
  /// leaving the others' parameters as they are, and AdamW's half whole: the part of one rank of
  /// a sharded Muon (optim/sharded_muon_cpu.hpp), which gathers the others' matrices itself.
  template <model::parameter_holder M>
  requires std::same_as<typename M::memory_space, host_memory> basic_muon_cpu(
      const M& model, muon_config config, std::optional<muon_matrix_range> owned)
      : config_((config.validate(), config)),
        n_(std::size_t(model.num_parameters())),
        matrices_(muon_matrices(model.parameter_layout(), config_.muon_roles, "muon_cpu")),
        adamw_runs_(muon_adamw_runs(matrices_, n_, "muon_cpu")),
        adamw_layout_(muon_adamw_layout(model.parameter_layout(), config_.muon_roles, adamw_runs_,
                                        "muon_cpu")),
        packed_params_(muon_run_elements(adamw_runs_)),
        packed_grads_(packed_params_.size()),
        adamw_(packed_view{packed_params_, packed_grads_, adamw_layout_}, config_.adamw),
        iterations_(muon_iterations(config_.orthogonalizer, config_.ns_steps)) {
    line_offsets_.push_back(0);
    for (const muon_matrix& m : matrices_) {
      line_offsets_.push_back(line_offsets_.back() + std::size_t(normuon_lines(m)));
      if (m.offset + m.numel() > n_)
        throw config_error("muon_cpu: a matrix at offset " + std::to_string(m.offset) +
                           " leaves the model's " + std::to_string(n_) + " parameters");
      total_state_ += m.numel();
    }
    owned_ = owned.value_or(muon_matrix_range{0, matrices_.size()});
    if (owned_.first > owned_.last || owned_.last > matrices_.size())
      throw config_error("muon_cpu: matrices [" + std::to_string(owned_.first) + ", " +
                         std::to_string(owned_.last) + ") are not among the model's " +
                         std::to_string(matrices_.size()));
    state_begin_ =
        owned_.first < matrices_.size() ? matrices_[owned_.first].state_offset : total_state_;
    const std::size_t state_end =
        owned_.last < matrices_.size() ? matrices_[owned_.last].state_offset : total_state_;
    momentum_.assign(state_end - state_begin_, Scalar(0));
    if (config_.normuon)
      second_moment_.assign(line_offsets_[owned_.last] - line_offsets_[owned_.first], Scalar(0));
  }

  /// One step: AdamW over the other elements at rate `lr`, Muon over the matrices at rate
  /// lr · lr_ratio, both from the gradients times `clip.factor`.
  template <model::parameter_holder M>
  requires std::same_as<typename M::memory_space, host_memory> &&
      std::same_as<typename M::parameter_type, Scalar>
  void update(M& model, float lr, const clip_scale<host_memory>& clip, host_context& ctx) {
    const std::span<Scalar> params = model.parameters(), grads = model.gradients();
    if (params.size() != n_ || grads.size() != n_)
      throw config_error("muon_cpu: model has " + std::to_string(params.size()) +
                         " parameters and " + std::to_string(grads.size()) +
                         " gradients but the optimizer was built for " + std::to_string(n_));
    const float beta = config_.momentum_at(adamw_.steps_taken());  // before this update counts
    update_adamw(params, grads, lr, clip, ctx);
    const Scalar rate = static_cast<Scalar>(double(lr) * config_.lr_ratio);
    update_matrices(params, grads, rate, static_cast<Scalar>(clip.factor), beta);
  }

  /// Updates applied so far.
  std::uint64_t steps_taken() const noexcept { return adamw_.steps_taken(); }

  /// "optim.muon.momentum" ({matrix elements}), "optim.adamw.m", "optim.adamw.v" ({other
  /// elements}) and "optim.step" (u64 {1}), viewing this optimizer's own storage; with NorMuon
  /// also "optim.muon.second_moment" ({lines of the owned matrices}).
  std::vector<state_tensor> state() {
    std::vector<state_tensor> out = adamw_.state();
    for (state_tensor& t : out) {
      if (t.name == "optim.m") t.name = "optim.adamw.m";
      if (t.name == "optim.v") t.name = "optim.adamw.v";
    }
    out.push_back(make_state_tensor("optim.muon.momentum", std::span<Scalar>(momentum_),
                                    {std::int64_t(momentum_.size())}));
    if (config_.normuon)
      out.push_back(make_state_tensor("optim.muon.second_moment", std::span<Scalar>(second_moment_),
                                      {std::int64_t(second_moment_.size())}));
    return out;
  }

  const muon_config& config() const noexcept { return config_; }
  /// Every matrix of the model Muon treats, in layout order (this instance updates `owned()`).
  std::span<const muon_matrix> matrices() const noexcept { return matrices_; }
  /// The matrices this instance updates and keeps momentum for (all, unless constructed for one
  /// rank's share).
  muon_matrix_range owned() const noexcept { return owned_; }
  /// Where this instance's momentum lies in the packed buffer of every matrix's momentum
  /// (`offset` + `count` of `momentum_elements()`).
  muon_state_range momentum_range() const noexcept { return {state_begin_, momentum_.size()}; }
  /// Elements of every matrix's momentum together (the packed buffer's length).
  std::size_t momentum_elements() const noexcept { return total_state_; }
  /// Elements AdamW updates (every element not in a matrix, padding included).
  std::size_t adamw_elements() const noexcept { return packed_params_.size(); }
  /// Bytes of optimizer state: the momentum and AdamW's two moments.
  std::size_t state_bytes() const noexcept {
    return (momentum_.size() + second_moment_.size()) * sizeof(Scalar) + adamw_.state_bytes();
  }

 private:
  struct thread_workspace {
    std::vector<Scalar> update;  // (rows, cols) of the matrix at hand
    detail::newton_schulz_workspace<Scalar> ns;
    std::vector<double> line_mean;   // (lines,) NorMuon's sums of squares per line
    std::vector<Scalar> line_scale;  // (lines,) its 1/√v per line
  };

  // Muon over the owned matrices, in parallel over matrices.
  void update_matrices(std::span<Scalar> params, std::span<const Scalar> grads, Scalar rate,
                       Scalar grad_scale, float momentum) {
    const std::size_t first = owned_.first, last = owned_.last;
    int threads = 1;
#if defined(_OPENMP)
    threads = omp_get_max_threads();
#endif
    if (workspaces_.size() < std::size_t(threads)) workspaces_.resize(std::size_t(threads));
    const Scalar beta = momentum;
    const Scalar keep = Scalar(1) - rate * static_cast<Scalar>(config_.weight_decay);
    const bool nesterov = config_.nesterov, normuon = config_.normuon;
    const bool cautious = config_.cautious_weight_decay;
    const std::span<const detail::ns_coefficients> iterations(iterations_);
    const std::size_t lines_begin = line_offsets_[first];
#pragma omp parallel for schedule(dynamic, 1)
    for (std::ptrdiff_t i = std::ptrdiff_t(first); i < std::ptrdiff_t(last); ++i) {
      int thread = 0;
#if defined(_OPENMP)
      thread = omp_get_thread_num();
#endif
      thread_workspace& ws = workspaces_[std::size_t(thread)];
      const muon_matrix& m = matrices_[std::size_t(i)];
      const std::size_t n = m.numel();
      ws.update.resize(n);
      Scalar* buf = momentum_.data() + (m.state_offset - state_begin_);
      const Scalar* g = grads.data() + m.offset;
      Scalar* u = ws.update.data();
      for (std::size_t k = 0; k < n; ++k) {
        const Scalar gk = g[k] * grad_scale;
        buf[k] += (Scalar(1) - beta) * (gk - buf[k]);
        u[k] = nesterov ? gk + beta * (buf[k] - gk) : buf[k];
      }
      detail::newton_schulz<Scalar>(u, u, m.rows, m.cols, iterations, ws.ns);
      if (normuon)
        normalize_lines(m, u, second_moment_.data() + (line_offsets_[std::size_t(i)] - lines_begin),
                        ws);
      const Scalar step =
          rate * static_cast<Scalar>(std::sqrt(std::max(1.0, double(m.rows) / double(m.cols))));
      Scalar* p = params.data() + m.offset;
      if (cautious) {
        for (std::size_t k = 0; k < n; ++k)
          p[k] = (u[k] * p[k] >= Scalar(0) ? p[k] * keep : p[k]) - step * u[k];
      } else {
        for (std::size_t k = 0; k < n; ++k) p[k] = p[k] * keep - step * u[k];
      }
    }
  }

  // NorMuon (file header): u (rows, cols) ← u·s_l·(‖u‖_F / ‖u·s‖_F) per line l, updating the
  // line's second moment v (lines,). Sums in double, in a fixed order.
  void normalize_lines(const muon_matrix& m, Scalar* u, Scalar* v, thread_workspace& ws) const {
    const bool by_rows = m.rows >= m.cols;
    const std::size_t lines = std::size_t(normuon_lines(m));
    const std::size_t reduced = std::size_t(by_rows ? m.cols : m.rows);
    const std::size_t cols = std::size_t(m.cols);
    ws.line_mean.assign(lines, 0.0);
    for (std::size_t r = 0; r < std::size_t(m.rows); ++r)
      for (std::size_t c = 0; c < cols; ++c) {
        const double x = double(u[r * cols + c]);
        ws.line_mean[by_rows ? r : c] += x * x;
      }
    const Scalar one_minus_beta2 = Scalar(1) - static_cast<Scalar>(config_.normuon_beta2);
    double norm_sq = 0.0, scaled_sq = 0.0;
    ws.line_scale.resize(lines);
    for (std::size_t l = 0; l < lines; ++l) {
      const Scalar mean = static_cast<Scalar>(ws.line_mean[l] / double(reduced));
      v[l] += one_minus_beta2 * (mean - v[l]);
      const Scalar s = Scalar(1) / std::sqrt(std::max(v[l], Scalar(1e-10)));
      ws.line_scale[l] = s;
      norm_sq += double(mean) * double(reduced);
      scaled_sq += double(mean) * double(reduced) * double(s) * double(s);
    }
    const Scalar keep_norm =
        static_cast<Scalar>(std::sqrt(norm_sq) / std::max(std::sqrt(scaled_sq), 1e-10));
    for (std::size_t r = 0; r < std::size_t(m.rows); ++r)
      for (std::size_t c = 0; c < cols; ++c)
        u[r * cols + c] *= ws.line_scale[by_rows ? r : c] * keep_norm;
  }

  void update_adamw(std::span<Scalar> params, std::span<const Scalar> grads, float lr,
                    const clip_scale<host_memory>& clip, host_context& ctx) {
    std::size_t at = 0;
    for (const muon_run& r : adamw_runs_) {
      std::copy(params.begin() + r.begin, params.begin() + r.end, packed_params_.begin() + at);
      std::copy(grads.begin() + r.begin, grads.begin() + r.end, packed_grads_.begin() + at);
      at += r.end - r.begin;
    }
    packed_view view{packed_params_, packed_grads_, adamw_layout_};
    adamw_.update(view, lr, clip, ctx);
    at = 0;
    for (const muon_run& r : adamw_runs_) {
      std::copy(packed_params_.begin() + at, packed_params_.begin() + at + (r.end - r.begin),
                params.begin() + r.begin);
      at += r.end - r.begin;
    }
  }

  muon_config config_;
  std::size_t n_ = 0;
  std::vector<muon_matrix> matrices_;
  std::size_t total_state_ = 0;  // elements of every matrix
  muon_matrix_range owned_{};
  std::size_t state_begin_ = 0;   // where the owned matrices start in the packed momentum
  std::vector<Scalar> momentum_;  // (owned matrix elements,) packed in layout order
  std::vector<muon_run> adamw_runs_;
  std::vector<tensor_info> adamw_layout_;
  std::vector<Scalar> packed_params_, packed_grads_;  // (adamw elements,)
  basic_adamw_cpu<Scalar> adamw_;
  std::vector<detail::ns_coefficients> iterations_;  // (ns_steps,) each iteration's coefficients
  std::vector<std::size_t> line_offsets_;  // (matrices + 1,) NorMuon's lines before each matrix
  std::vector<Scalar> second_moment_;      // (owned lines,) NorMuon only
  std::vector<thread_workspace> workspaces_;
};

using muon_cpu = basic_muon_cpu<float>;

}  // namespace trainkit::optim
