// trainkit/optim/muon_cuda.hpp — the Muon optimizer family for device-memory models with bf16
// parameters (gpt2_cuda): Muon for the hidden matrices, AdamW for everything else, split by
// parameter role exactly as muon_cpu.hpp splits it (optim/muon_matrices.hpp).
//
// Numbers live as in adamw_cuda: the model's bf16 parameters are a rounded copy of fp32 master
// weights kept here, momentum is fp32, gradients are read as bf16. One `update` enqueues on the
// execution context's stream, with no host synchronisation:
//   1. AdamW half: the other elements' gradients are copied into a packed buffer (a few
//      cudaMemcpyAsync, one per run between matrices), a composed adamw_cuda updates its own fp32
//      master and moments over that packed "model" and writes packed bf16 parameters, which are
//      copied back. So AdamW's math exists once, in adamw_cuda and its kernel.
//   2. Muon half: one kernel updates every matrix's fp32 momentum (Nesterov, muon_cpu's order)
//      and writes the Newton–Schulz input in bf16 into a work buffer grouped by shape (GPT-2: two
//      groups, C×C — q, k, v of every layer and the attention projection — and 4C×C with C×4C,
//      which differ); one batched newton_schulz_cuda call per shape orthogonalises a group in
//      place; one kernel applies decoupled decay, the shape scale √max(1, rows/cols) and the step
//      to the fp32 master and rounds it to the bf16 parameter (nearest even).
// The clipping factor is read from device memory (clip_scale<device_memory>), as adamw_cuda does.
// Kernels: optim/cuda/muon_kernels.cuh, optim/cuda/newton_schulz.cuh. Host twin of the whole step:
// optim/detail/muon_cuda_twin.hpp (tested against muon_cpu and the PyTorch fixtures on the CPU;
// tests/optim/test_muon_cuda_step.cu holds this class to it on a device).
//
// Set-up work (allocations, cuBLASLt's autotuning of each Newton–Schulz GEMM shape) happens in the
// constructor, which synchronises; an update allocates nothing and never waits for the host. Like
// adamw_cuda, per-step constants (rates, bias corrections) are kernel arguments, so a captured
// CUDA graph of the update would need its node parameters updated per step; nothing here stops
// capturing it. Constructed for a contiguous share of the matrices (muon_shards) it keeps and
// updates only those: one rank of optim/sharded_muon_cuda.hpp, which gathers the rest over NCCL.
// Never run on a GPU yet. Needs nvcc; link trainkit::cuda.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "trainkit/comm/gradient_layout.hpp"
#include "trainkit/core/bf16.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/execution_context.hpp"
#include "trainkit/core/cuda/stream.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/linalg/gemm_cublaslt.cuh"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/optim/adamw_cuda.hpp"
#include "trainkit/optim/clip_scale.hpp"
#include "trainkit/optim/cuda/muon_kernels.cuh"
#include "trainkit/optim/cuda/newton_schulz.cuh"
#include "trainkit/optim/muon_config.hpp"
#include "trainkit/optim/muon_matrices.hpp"

namespace trainkit::optim {

class muon_cuda {
  using bf16_t = __nv_bfloat16;

  // The AdamW elements, packed, as a device model the composed adamw_cuda updates.
  struct packed_view {
    using memory_space = device_memory;
    using parameter_type = trainkit::bf16;
    std::span<trainkit::bf16> params, grads;
    std::span<const tensor_info> layout;
    std::span<const tensor_info> parameter_layout() const { return layout; }
    std::span<trainkit::bf16> parameters() { return params; }
    std::span<trainkit::bf16> gradients() { return grads; }
    std::size_t num_parameters() const { return params.size(); }
  };

 public:
  /// Matrices of one shape, contiguous in the work buffer from `work_offset`.
  struct shape_group {
    std::int64_t rows = 0, cols = 0;
    int count = 0;
    std::size_t work_offset = 0;
  };

  /// The host half of the set-up for matrices [owned.first, owned.last) of `matrices`: their
  /// shape groups (in order of first appearance, each a contiguous run of the work buffer), the
  /// kernels' table (flat offset; state offset relative to the first owned matrix, since the
  /// momentum and master buffers hold the owned ones only; work offset; shape scale) and their
  /// element count. No device: tests/optim/test_sharded_muon_cuda.cu checks it on the host.
  struct share_plan {
    std::vector<shape_group> groups;
    std::vector<kernels::matrix_entry> table;
    std::size_t elements = 0;
  };
  static share_plan plan_share(std::span<const muon_matrix> matrices, muon_matrix_range owned) {
    share_plan plan;
    const std::size_t count = owned.last - owned.first;
    const std::size_t state_begin = count > 0 ? matrices[owned.first].state_offset : 0;
    std::vector<std::size_t> group_of(count);
    for (std::size_t k = 0; k < count; ++k) {
      const muon_matrix& m = matrices[owned.first + k];
      auto it = std::find_if(plan.groups.begin(), plan.groups.end(), [&](const shape_group& g) {
        return g.rows == m.rows && g.cols == m.cols;
      });
      if (it == plan.groups.end())
        it = plan.groups.insert(plan.groups.end(), {m.rows, m.cols, 0, 0});
      group_of[k] = std::size_t(it - plan.groups.begin());
      ++it->count;
      plan.elements += m.numel();
    }
    std::size_t at = 0;
    for (shape_group& g : plan.groups) {
      g.work_offset = at;
      at += std::size_t(g.count) * std::size_t(g.rows) * std::size_t(g.cols);
    }
    std::vector<std::size_t> filled(plan.groups.size(), 0);
    plan.table.resize(count);
    for (std::size_t k = 0; k < count; ++k) {
      const muon_matrix& m = matrices[owned.first + k];
      const shape_group& g = plan.groups[group_of[k]];
      plan.table[k] = {
          m.offset, m.state_offset - state_begin, g.work_offset + filled[group_of[k]] * m.numel(),
          static_cast<float>(std::sqrt(std::max(1.0, double(m.rows) / double(m.cols))))};
      ++filled[group_of[k]];
    }
    return plan;
  }

  using memory_space = device_memory;
  using parameter_type = trainkit::bf16;
  using config_type = muon_config;
  static constexpr gradient_layout expected_gradients = gradient_layout::replicated;

  /// Finds the matrices (by role), groups them by shape, takes fp32 master weights from the
  /// model's bf16 parameters, zeroes momentum and AdamW's moments, and warms up the Newton–Schulz
  /// GEMMs (allocations, autotuning). Synchronises. Throws config_error or cuda_error.
  template <bf16_device_model M>
  muon_cuda(const M& model, muon_config config) : muon_cuda(model, config, std::nullopt) {}

  /// Updates (and keeps momentum and master weights for) only matrices [owned.first, owned.last)
  /// of `matrices()`, leaving the others' parameters as they are, and AdamW's half whole: one
  /// rank's part of a sharded Muon (optim/sharded_muon_cuda.hpp), which gathers the others'
  /// matrices itself. muon_cpu's constructor of the same shape is the host one's.
  template <bf16_device_model M>
  muon_cuda(const M& model, muon_config config, std::optional<muon_matrix_range> owned)
      : config_((config.validate(), config)),
        n_(std::size_t(model.num_parameters())),
        layout_(model.parameter_layout().begin(), model.parameter_layout().end()),
        matrices_(muon_matrices(layout_, config_.muon_roles, "muon_cuda")),
        runs_(muon_adamw_runs(matrices_, n_, "muon_cuda")),
        adamw_layout_(muon_adamw_layout(layout_, config_.muon_roles, runs_, "muon_cuda")),
        matmul_(std::make_unique<linalg::matmul_context>()) {
    for (const muon_matrix& m : matrices_) {
      if (m.offset + m.numel() > n_)
        throw config_error("muon_cuda: a matrix at offset " + std::to_string(m.offset) +
                           " leaves the model's " + std::to_string(n_) + " parameters");
      all_elements_ += m.numel();
    }
    owned_ = owned.value_or(muon_matrix_range{0, matrices_.size()});
    if (owned_.first > owned_.last || owned_.last > matrices_.size())
      throw config_error("muon_cuda: matrices [" + std::to_string(owned_.first) + ", " +
                         std::to_string(owned_.last) + ") are not among the model's " +
                         std::to_string(matrices_.size()));
    state_begin_ =
        owned_.first < matrices_.size() ? matrices_[owned_.first].state_offset : all_elements_;
    build_groups();
    // The model initialised its parameters on its own stream: order after it (set-up path).
    TRAINKIT_CUDA_CHECK(cudaDeviceSynchronize());
    const cudaStream_t s = stream_.get();
    momentum_ = cuda::device_buffer<float>(total_);
    master_ = cuda::device_buffer<float>(total_);
    work_ = cuda::device_buffer<bf16_t>(total_);
    momentum_.fill_bytes_async(0, s);
    work_.fill_bytes_async(0, s);
    const std::size_t packed = muon_run_elements(runs_);
    packed_params_ = cuda::device_buffer<trainkit::bf16>(packed);
    packed_grads_ = cuda::device_buffer<trainkit::bf16>(packed);
    packed_grads_.fill_bytes_async(0, s);
    const std::span<trainkit::bf16> params = const_cast<M&>(model).parameters();  // only read
    load_master(params.data(), s);
    for (std::size_t g = 0; g < groups_.size(); ++g) {  // allocate and autotune now
      const shape_group& grp = groups_[g];
      bf16_t* w = work_.data() + grp.work_offset;
      ns_[g].run(w, w, int(grp.rows), int(grp.cols), grp.count, config_.ns_steps, s);
    }
    stream_.synchronize();
    if (packed > 0) adamw_.emplace(view(), config_.adamw);
  }

  muon_cuda(muon_cuda&&) noexcept = default;
  muon_cuda& operator=(muon_cuda&&) noexcept = default;
  muon_cuda(const muon_cuda&) = delete;
  muon_cuda& operator=(const muon_cuda&) = delete;

  /// One step, enqueued on the context's stream after the clipping step that wrote
  /// `clip.norm_and_factor` there: AdamW at rate `lr` over the other elements, Muon at
  /// lr · lr_ratio over the matrices. No host synchronisation.
  template <bf16_device_model M>
  void update(M& model, float lr, const clip_scale<device_memory>& clip,
              cuda::execution_context& ctx) {
    check_sizes(model);
    if (!clip.norm_and_factor) throw config_error("muon_cuda::update: no clipping factor given");
    const cudaStream_t s = ctx.stream();
    bf16_t* params = as_device(model.parameters().data());
    const bf16_t* grads = as_device(model.gradients().data());

    if (adamw_) {
      copy_runs(as_device(packed_grads_.data()), grads, true, s);
      packed_view v = view();
      adamw_->update(v, lr, clip, ctx);
      copy_runs(params, as_device(packed_params_.data()), false, s);
    }
    if (total_ == 0) return;
    const float rate = static_cast<float>(double(lr) * config_.lr_ratio);
    const float keep = 1.0f - rate * config_.weight_decay;
    kernels::muon_momentum(grads, momentum_.data(), work_.data(), table_.data(), owned_count(),
                           total_, clip.norm_and_factor,
                           {config_.momentum, 1.0f - config_.momentum, config_.nesterov}, s);
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      const shape_group& grp = groups_[g];
      bf16_t* w = work_.data() + grp.work_offset;
      ns_[g].run(w, w, int(grp.rows), int(grp.cols), grp.count, config_.ns_steps, s);
    }
    kernels::muon_apply(params, master_.data(), work_.data(), table_.data(), owned_count(), total_,
                        rate, keep, s);
    ++muon_steps_;
  }

  /// Updates applied so far.
  std::uint64_t steps_taken() const noexcept {
    return adamw_ ? adamw_->steps_taken() : muon_steps_;
  }

  /// "optim.muon.momentum" and "optim.muon.master" ({owned matrix elements}: every matrix unless
  /// constructed for a share; packed in layout order as muon_cpu's momentum), "optim.adamw.m",
  /// "optim.adamw.v" and "optim.adamw.master" ({other elements}, packed as muon_cpu's), all fp32 in
  /// device memory, and "optim.step" (u64 {1}, host). muon_cpu has the same names less the two
  /// masters (its parameters are fp32 already).
  std::vector<state_tensor> state() {
    std::vector<state_tensor> out;
    if (adamw_) {
      out = adamw_->state();
      for (state_tensor& t : out) {
        if (t.name == "optim.m") t.name = "optim.adamw.m";
        if (t.name == "optim.v") t.name = "optim.adamw.v";
        if (t.name == "optim.master") t.name = "optim.adamw.master";
      }
    } else {
      out.push_back(
          make_state_tensor("optim.step", std::span<std::uint64_t>(&muon_steps_, 1), {1}));
    }
    const auto n = static_cast<std::int64_t>(total_);
    for (auto [name, buf] :
         {std::pair{"optim.muon.momentum", &momentum_}, std::pair{"optim.muon.master", &master_}}) {
      state_tensor t = make_state_tensor(name, buf->device_span(), {n});
      t.on_device = true;
      out.push_back(t);
    }
    return out;
  }

  /// Re-reads every master weight from the model's bf16 parameters (after replacing them, e.g.
  /// copy_parameters_from_host). Momentum, moments and step count are kept. Synchronises.
  template <bf16_device_model M>
  void reload_master(M& model) {
    check_sizes(model);
    TRAINKIT_CUDA_CHECK(cudaDeviceSynchronize());
    const cudaStream_t s = stream_.get();
    load_master(model.parameters().data(), s);
    stream_.synchronize();
    if (adamw_) {
      packed_view v = view();
      adamw_->reload_master(v);
    }
  }

  /// Every fp32 master weight in the model's layout, copied to the host (tests, exports); for an
  /// instance owning a share of the matrices, the others' elements read 0. Waits for the device
  /// (updates run on the trainer's stream, not this optimizer's).
  std::vector<float> master_to_host() const {
    TRAINKIT_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> out(n_, 0.0f);
    if (adamw_) {
      const std::vector<float> packed = adamw_->master_to_host();
      std::size_t at = 0;
      for (const muon_run& r : runs_)
        for (std::size_t i = r.begin; i < r.end; ++i) out[i] = packed[at++];
    }
    std::vector<float> muon(total_);
    if (total_ > 0) cuda::copy_to_host(std::span<float>(muon), master_.data(), stream_.get());
    for (std::size_t i = owned_.first; i < owned_.last; ++i) {
      const muon_matrix& m = matrices_[i];
      std::copy_n(muon.begin() + std::ptrdiff_t(m.state_offset - state_begin_), m.numel(),
                  out.begin() + std::ptrdiff_t(m.offset));
    }
    return out;
  }

  const muon_config& config() const noexcept { return config_; }
  /// Every matrix of the model Muon treats, in layout order (this instance updates `owned()`).
  std::span<const muon_matrix> matrices() const noexcept { return matrices_; }
  /// The matrices this instance updates and keeps state for (all, unless constructed for a share).
  muon_matrix_range owned() const noexcept { return owned_; }
  /// Where this instance's momentum and master weights lie in the packed buffer of every matrix.
  muon_state_range momentum_range() const noexcept { return {state_begin_, total_}; }
  /// Elements of every matrix together (the packed buffer's length).
  std::size_t momentum_elements() const noexcept { return all_elements_; }
  /// Bytes of optimizer state on the device: momentum and master weights of the owned matrices,
  /// AdamW's master weights and moments (fp32).
  std::size_t state_bytes() const noexcept {
    return momentum_.bytes() + master_.bytes() + 3 * sizeof(float) * packed_params_.size();
  }
  /// Distinct matrix shapes: batched Newton–Schulz calls per update.
  std::size_t shape_groups() const noexcept { return groups_.size(); }
  /// Elements AdamW updates (every element not in a matrix, padding included).
  std::size_t adamw_elements() const noexcept { return packed_params_.size(); }

 private:
  // The host plan (plan_share), then a Newton–Schulz runner per shape and the table uploaded.
  void build_groups() {
    share_plan plan = plan_share(matrices_, owned_);
    groups_ = std::move(plan.groups);
    total_ = plan.elements;
    for (const shape_group& g : groups_) {
      newton_schulz_cuda::can_implement(int(g.rows), int(g.cols), g.count, config_.ns_steps);
      ns_.emplace_back(*matmul_);
    }
    table_ = cuda::device_buffer<kernels::matrix_entry>(plan.table.size());
    if (!plan.table.empty())
      cuda::copy_to_device(table_.data(), std::span<const kernels::matrix_entry>(plan.table),
                           stream_.get());
  }

  void load_master(trainkit::bf16* params, cudaStream_t s) {
    kernels::muon_load_master(master_.data(), as_device(params), table_.data(), owned_count(),
                              total_, s);
    copy_runs(as_device(packed_params_.data()), as_device(params), true, s);
  }

  // gather: packed ← flat over the AdamW runs; otherwise flat ← packed.
  void copy_runs(bf16_t* dst, const bf16_t* src, bool gather, cudaStream_t s) const {
    std::size_t at = 0;
    for (const muon_run& r : runs_) {
      const std::size_t n = r.end - r.begin;
      TRAINKIT_CUDA_CHECK(cudaMemcpyAsync(gather ? dst + at : dst + r.begin,
                                          gather ? src + r.begin : src + at, n * sizeof(bf16_t),
                                          cudaMemcpyDeviceToDevice, s));
      at += n;
    }
  }

  packed_view view() {
    return {packed_params_.device_span(), packed_grads_.device_span(), adamw_layout_};
  }

  template <class M>
  void check_sizes(M& model) const {
    if (model.parameters().size() != n_ || model.gradients().size() != n_)
      throw config_error("muon_cuda: model has " + std::to_string(model.parameters().size()) +
                         " parameters and " + std::to_string(model.gradients().size()) +
                         " gradients but the optimizer was built for " + std::to_string(n_));
  }

  int owned_count() const noexcept { return int(owned_.last - owned_.first); }

  static const bf16_t* as_device(const trainkit::bf16* p) noexcept {
    return reinterpret_cast<const bf16_t*>(p);
  }
  static bf16_t* as_device(trainkit::bf16* p) noexcept { return reinterpret_cast<bf16_t*>(p); }

  muon_config config_;
  std::size_t n_ = 0;
  std::vector<tensor_info> layout_;
  std::vector<muon_matrix> matrices_;
  std::vector<muon_run> runs_;
  std::vector<tensor_info> adamw_layout_;
  std::vector<shape_group> groups_;
  muon_matrix_range owned_{};     // the matrices this instance updates
  std::size_t state_begin_ = 0;   // where they start in the packed buffer of every matrix
  std::size_t all_elements_ = 0;  // elements of every matrix
  std::size_t total_ = 0;         // elements of the owned matrices
  cuda::stream stream_{true};     // set-up work only; updates run on the context's stream
  std::unique_ptr<linalg::matmul_context> matmul_;    // shared by ns_ (same stream, in turn)
  std::vector<newton_schulz_cuda> ns_;                // one per shape group (own work buffers)
  cuda::device_buffer<kernels::matrix_entry> table_;  // (matrices,)
  cuda::device_buffer<float> momentum_;               // (matrix elements,) packed in layout order
  cuda::device_buffer<float> master_;                 // (matrix elements,) fp32 master weights
  cuda::device_buffer<bf16_t> work_;                  // (matrix elements,) grouped by shape
  cuda::device_buffer<trainkit::bf16> packed_params_, packed_grads_;  // (AdamW elements,)
  std::optional<adamw_cuda> adamw_;
  std::uint64_t muon_steps_ = 0;
};

}  // namespace trainkit::optim
