// trainkit/model/llama/cpu.hpp — the CPU reference Llama-style model (Eigen + OpenMP), float or
// double.
//
// The family of llama/config.hpp written against trainkit's Model concept: token embedding,
// pre-RMSNorm blocks (grouped-query causal attention with a fused q|k|v projection, optional
// QK-norm and rotary position embeddings, then a SwiGLU or ReLU² MLP, each added to the residual
// stream), a final RMSNorm and an untied (or tied) head. Logits span the padded vocabulary Vp, the
// softmax only the V real tokens, so padded rows get no gradient.
//
// Everything else is gpt2_cpu's (gpt2/cpu.hpp), on purpose, so the trainer, the reducers (DDP and
// ZeRO-1), the checkpointers and the sampler treat both families alike: flat parameter and gradient
// buffers in the family's layout; a hand-written backward (cpu/rmsnorm_rope_kernels.hpp, with
// GPT-2's linear layers and cross-entropy) whose sums run in fixed order, bit-identical run to run
// for a fixed thread count; the double instantiation for finite-difference checks; gradient buckets
// (llama_gradient_buckets) published under the step protocol as backward finishes them; and the
// same micro-step accumulation: the first backward after zero_grad() writes in place, every later
// one computes its contribution from zero in a second buffer and adds it bucket by bucket, which is
// the arithmetic a data-parallel sum does (2 ranks × 1 micro-batch equal 1 × 2 bit for bit).
//
// Activations are sized for the batch shape on first use and reused while it stays the same; the
// head runs in row chunks; attention probabilities are kept for backward (L·B·H·T² values).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "trainkit/core/batch.hpp"
#include "trainkit/core/calibrate_cpu.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/execution_context.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/model/concepts.hpp"
#include "trainkit/model/detail/aligned_vector.hpp"
#include "trainkit/model/cpu/kernels.hpp"
#include "trainkit/model/cpu/rmsnorm_rope_kernels.hpp"
#include "trainkit/model/llama/init.hpp"
#include "trainkit/model/llama/config.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/model/zero_parameters.hpp"

namespace trainkit::model {

template <class Scalar>
class basic_llama_cpu {
  static_assert(std::same_as<Scalar, float> || std::same_as<Scalar, double>,
                "basic_llama_cpu computes in float or double");

 public:
  using memory_space = host_memory;
  using parameter_type = Scalar;

  /// The family's initialisation from `seed` (llama/init.hpp). Throws config_error.
  basic_llama_cpu(llama_config cfg, std::uint64_t seed) : basic_llama_cpu(cfg, zero_parameters) {
    detail::llama_initialize(config_, seed, std::span<Scalar>(params_));
  }

  /// All parameters zero. Throws config_error naming the llama_config field that is invalid.
  basic_llama_cpu(llama_config cfg, zero_parameters_t)
      : config_(validated(cfg)),
        layout_(llama_parameter_layout(cfg)),
        buckets_(llama_gradient_buckets(cfg)),
        rope_(cfg.max_seq_len, cfg.head_size(), cfg.rope_theta) {
    params_.assign(config_.num_parameters(), Scalar(0));
    grads_.assign(params_.size(), Scalar(0));
    for (std::size_t i = 0; i < layout_.size(); ++i) offsets_[i] = layout_[i].offset;
    // A tied head is wte: the head's reads and gradient go to wte's offset.
    if (config_.tied_embeddings) offsets_[std::size_t(lm_head)] = offsets_[std::size_t(wte)];
    check_buckets_tile(buckets_, params_.size(), "llama_cpu");
  }

  const llama_config& config() const noexcept { return config_; }

  std::span<const tensor_info> parameter_layout() const noexcept { return layout_; }
  std::span<Scalar> parameters() noexcept { return params_; }
  std::span<const Scalar> parameters() const noexcept { return params_; }
  std::span<Scalar> gradients() noexcept { return grads_; }
  std::span<const Scalar> gradients() const noexcept { return grads_; }
  std::size_t num_parameters() const noexcept { return params_.size(); }
  double flops_per_token(int T) const { return config_.flops_per_token(T); }
  /// mfu_settings.calibrate: the rate of the GEMM this model runs on (trainer/calibrate.hpp).
  gemm_calibration calibrate_gemm() const { return calibrate_cpu_sgemm(); }

  void zero_grad(host_context&) { zero_grad(); }
  void zero_grad() {
    std::fill(grads_.begin(), grads_.end(), Scalar(0));
    grads_zeroed_ = true;
  }

  /// The step protocol (core/step_protocol.hpp), as gpt2_cpu: adds micro.grad_scale·∂loss/∂θ to
  /// gradients() and the batch's mean loss to the step's; on the last micro-step publishes each
  /// bucket of gradient_buckets() as backward finishes it. Throws config_error for tokens outside
  /// [0, vocab_size) or T > max_seq_len.
  void forward_backward(batch_view<host_memory> batch, const micro_step& micro, host_context&) {
    if (micro.first()) step_loss_sum_ = 0.0;
    step_loss_count_ = micro.count;
    const bucket_observer none{};
    step_loss_sum_ += double(forward_backward_once(batch, Scalar(micro.grad_scale),
                                                   micro.last() ? micro.on_bucket : none));
  }

  /// The mean of this step's micro-step losses (each rounded to float, as the trainer logs them).
  double step_loss() const noexcept {
    return step_loss_sum_ / double(std::max(step_loss_count_, 1));
  }

  /// The buckets backward finishes, in that order: llama_gradient_buckets(config()).
  std::span<const gradient_bucket> gradient_buckets() const noexcept { return buckets_; }

  /// One micro-step outside a trainer: the mean cross-entropy, adding grad_scale·∂loss/∂θ to
  /// gradients() exactly as the protocol's forward_backward does. Throws like it.
  float forward_backward(batch_view<host_memory> batch, float grad_scale) {
    return forward_backward_once(batch, Scalar(grad_scale), bucket_observer{});
  }

  /// Mean cross-entropy over the batch's B·T targets; gradients untouched.
  float forward(batch_view<host_memory> batch) {
    check_batch(batch);
    prepare(batch.batch_size, batch.seq_len);
    forward_trunk(batch.inputs);
    last_loss_ = classifier(batch.targets, /*backward=*/false, Scalar(0));
    return float(last_loss_);
  }

  /// The mean loss of the last forward() or forward_backward(), accumulated in double.
  double last_loss() const noexcept { return last_loss_; }

  /// Logits (B, T, Vp) for `inputs` (B, T), e.g. for sampling (model/sampling.hpp): valid until the
  /// next call of any forward function. Columns [V, Vp) are padding, not tokens. Throws
  /// config_error like forward().
  std::span<const Scalar> forward_logits(std::span<const std::int32_t> inputs, int B, int T) {
    if (inputs.size() != std::size_t(B) * std::size_t(T) || B <= 0 || T <= 0)
      throw config_error("llama_cpu::forward_logits: " + std::to_string(inputs.size()) +
                         " inputs do not form a B=" + std::to_string(B) +
                         " T=" + std::to_string(T) + " batch");
    check_shape(B, T);
    check_tokens(inputs.data(), inputs.size(), "input", T);
    prepare(B, T);
    forward_trunk(inputs.data());
    const std::size_t N = std::size_t(B) * T, Vp = std::size_t(config_.padded_vocab_size);
    logits_out_.resize(N * Vp);
    detail::matmul_forward<Scalar>(logits_out_.data(), act_.lnf.data(), tensor(lm_head), nullptr,
                                   nullptr, detail::index(N), config_.channels,
                                   config_.padded_vocab_size);
    return {logits_out_.data(), logits_out_.size()};
  }

  /// The tensors a checkpoint must hold: "model.<name>" for each parameter tensor, in layout order.
  std::vector<state_tensor> state() {
    std::vector<state_tensor> out;
    out.reserve(layout_.size());
    for (const tensor_info& t : layout_)
      out.push_back(make_state_tensor(
          "model." + t.name, std::span<Scalar>(params_.data() + t.offset, t.numel()), t.shape));
    return out;
  }

 private:
  float forward_backward_once(batch_view<host_memory> batch, Scalar grad_scale,
                              const bucket_observer& on_bucket) {
    check_batch(batch);
    prepare(batch.batch_size, batch.seq_len);
    forward_trunk(batch.inputs);
    if (!grads_zeroed_) {
      micro_grads_.resize(grads_.size());  // allocates the first time only
      std::fill(micro_grads_.begin(), micro_grads_.end(), Scalar(0));
      grad_target_ = micro_grads_.data();
    }
    grads_zeroed_ = false;
    double loss = 0;
    try {
      loss = classifier(batch.targets, /*backward=*/true, grad_scale);
      backward_trunk(batch.inputs, on_bucket);
    } catch (...) {
      grad_target_ = nullptr;
      throw;
    }
    grad_target_ = nullptr;
    last_loss_ = loss;
    return float(loss);
  }

  using buffer = detail::aligned_vector<Scalar>;
  using enum llama_tensor;

  // Forward activations for one batch shape; per-layer ones are stacked (L, ...). D = (H+2KV)·hs,
  // R = fc_rows() (2F or F).
  struct activations {
    buffer encoded;                         // (B, T, C)
    buffer ln1, ln1_rstd;                   // (L, B, T, C), (L, B, T)
    buffer qkv;                             // (L, B, T, D) projection output
    buffer qkvr;                            // (L, B, T, D) q, k after QK-norm and RoPE; v
    buffer qk_rstd;                         // (L, B, T, H+KV) QK-norm's rstd (qk_norm only)
    buffer att;                             // (L, B, H, T, T) softmax probabilities
    buffer atty;                            // (L, B, T, C) attention output before projection
    buffer res2;                            // (L, B, T, C) residual after attention
    buffer ln2, ln2_rstd;                   // (L, B, T, C), (L, B, T)
    buffer fc;                              // (L, B, T, R)
    buffer fc_act;                          // (L, B, T, F) MLP hidden after the nonlinearity
    buffer res3;                            // (L, B, T, C) residual after the MLP
    buffer lnf, lnf_rstd;                   // (B, T, C), (B, T)
    buffer logits;                          // (rows per chunk, Vp), reused across chunks
    detail::aligned_vector<double> losses;  // (B, T)
  };

  // Gradients of activations, one layer's worth, reused layer after layer.
  struct activation_grads {
    buffer residual;  // (B, T, C) running ∂loss/∂residual stream
    buffer ln;        // (B, T, C) ∂ of an RMSNorm output (ln1, ln2 or lnf)
    buffer atty;      // (B, T, C)
    buffer qkv;       // (B, T, D) ∂qkvr, then ∂qkv in place
    buffer fc;        // (B, T, R)
    buffer fc_act;    // (B, T, F)
    buffer att;       // (B, H, T, T) scratch for the softmax backward
  };

  static constexpr int classifier_chunk_bytes = 64 << 20;  // as gpt2_cpu

  static llama_config validated(const llama_config& cfg) {
    cfg.validate();
    return cfg;
  }

  Scalar* tensor(llama_tensor id) noexcept { return params_.data() + offsets_[std::size_t(id)]; }
  Scalar* grad(llama_tensor id) noexcept {
    return (grad_target_ ? grad_target_ : grads_.data()) + offsets_[std::size_t(id)];
  }

  void bucket_done(std::size_t i, const bucket_observer& on_bucket) {
    if (grad_target_) {
      for (const gradient_range& r : buckets_[i].ranges) {
        Scalar* acc = grads_.data() + r.offset;
        const Scalar* mine = grad_target_ + r.offset;
        for (std::size_t j = 0; j < r.count; ++j) acc[j] += mine[j];
      }
    }
    on_bucket(i);
  }

  void check_shape(int B, int T) const {
    if (B <= 0 || T <= 0)
      throw config_error("llama_cpu: batch shape B=" + std::to_string(B) +
                         " T=" + std::to_string(T) + " is empty");
    if (T > config_.max_seq_len)
      throw config_error("llama_cpu: sequence length T=" + std::to_string(T) +
                         " exceeds llama_config.max_seq_len " +
                         std::to_string(config_.max_seq_len));
  }

  void check_tokens(const std::int32_t* tokens, std::size_t n, const char* what, int T) const {
    if (!tokens) throw config_error(std::string("llama_cpu: batch has no ") + what + " tokens");
    for (std::size_t i = 0; i < n; ++i)
      if (tokens[i] < 0 || tokens[i] >= config_.vocab_size)
        throw config_error(
            "llama_cpu: " + std::string(what) + " token " + std::to_string(tokens[i]) + " at (b=" +
            std::to_string(i / std::size_t(T)) + ", t=" + std::to_string(i % std::size_t(T)) +
            ") is outside [0, vocab_size=" + std::to_string(config_.vocab_size) + ")");
  }

  void check_batch(const batch_view<host_memory>& batch) const {
    check_shape(batch.batch_size, batch.seq_len);
    check_tokens(batch.inputs, batch.tokens(), "input", batch.seq_len);
    check_tokens(batch.targets, batch.tokens(), "target", batch.seq_len);
  }

  int classifier_rows(std::size_t N) const {
    const std::size_t rows =
        classifier_chunk_bytes / (sizeof(Scalar) * std::size_t(config_.padded_vocab_size));
    return int(std::clamp<std::size_t>(rows, 1, N));
  }

  detail::gqa_shape attention_shape() const noexcept {
    return {batch_, seq_, config_.num_heads, config_.num_kv_heads, config_.head_size()};
  }

  void prepare(int B, int T) {
    if (B == batch_ && T == seq_) return;
    const std::size_t L = std::size_t(config_.num_layers), C = std::size_t(config_.channels),
                      H = std::size_t(config_.num_heads), N = std::size_t(B) * T,
                      D = std::size_t(config_.qkv_rows()), R = std::size_t(config_.fc_rows()),
                      F = std::size_t(config_.hidden_size),
                      QK = std::size_t(config_.num_heads + config_.num_kv_heads),
                      Vp = std::size_t(config_.padded_vocab_size);
    activations& a = act_;
    a.encoded.assign(N * C, 0);
    for (auto* v : {&a.ln1, &a.atty, &a.res2, &a.ln2, &a.res3}) v->assign(L * N * C, 0);
    for (auto* v : {&a.ln1_rstd, &a.ln2_rstd}) v->assign(L * N, 0);
    a.qkv.assign(L * N * D, 0);
    a.qkvr.assign(L * N * D, 0);
    a.qk_rstd.assign(config_.qk_norm ? L * N * QK : 0, 0);
    a.att.assign(L * B * H * T * T, 0);
    a.fc.assign(L * N * R, 0);
    a.fc_act.assign(L * N * F, 0);
    a.lnf.assign(N * C, 0);
    a.lnf_rstd.assign(N, 0);
    a.logits.assign(std::size_t(classifier_rows(N)) * Vp, 0);
    a.losses.assign(N, 0);
    activation_grads& g = dact_;
    for (auto* v : {&g.residual, &g.ln, &g.atty}) v->assign(N * C, 0);
    g.qkv.assign(N * D, 0);
    g.fc.assign(N * R, 0);
    g.fc_act.assign(N * F, 0);
    g.att.assign(B * H * T * T, 0);
    batch_ = B;
    seq_ = T;
  }

  void forward_trunk(const std::int32_t* inputs) {
    namespace k = detail;
    linalg::new_weights_epoch();  // weights may have changed: bf16 GEMMs round them afresh
    const int T = seq_, C = config_.channels, H = config_.num_heads, KV = config_.num_kv_heads,
              hs = config_.head_size(), D = config_.qkv_rows(), R = config_.fc_rows(),
              F = config_.hidden_size;
    const k::index N = k::index(batch_) * T;
    const std::size_t NC = std::size_t(N) * C, ND = std::size_t(N) * D, NR = std::size_t(N) * R,
                      NF = std::size_t(N) * F, BHTT = std::size_t(batch_) * H * T * T;
    const Scalar eps = Scalar(config_.norm_eps);
    activations& a = act_;
    k::embedding_forward(a.encoded.data(), inputs, tensor(wte), N, C);
    for (int l = 0; l < config_.num_layers; ++l) {
      const Scalar* x = l == 0 ? a.encoded.data() : a.res3.data() + (l - 1) * NC;  // (B, T, C)
      Scalar* ln1 = a.ln1.data() + l * NC;
      Scalar* qkv = a.qkv.data() + l * ND;
      Scalar* qkvr = a.qkvr.data() + l * ND;
      Scalar* atty = a.atty.data() + l * NC;
      Scalar* res2 = a.res2.data() + l * NC;
      Scalar* ln2 = a.ln2.data() + l * NC;
      Scalar* fc = a.fc.data() + l * NR;
      Scalar* fc_act = a.fc_act.data() + l * NF;
      Scalar* res3 = a.res3.data() + l * NC;
      const std::size_t lc = std::size_t(l) * C;
      k::rmsnorm_forward(ln1, a.ln1_rstd.data() + l * N, x, tensor(ln1w) + lc, N, C, eps);
      k::matmul_forward<Scalar>(qkv, ln1, tensor(qkvw) + lc * D, nullptr, nullptr, N, C, D);
      std::copy_n(qkv, ND, qkvr);
      if (config_.qk_norm)  // q and k heads are the first H + KV heads of each row
        k::head_rmsnorm_forward(qkvr, a.qk_rstd.data() + std::size_t(l) * N * (H + KV), N, H + KV,
                                hs, D, eps);
      k::rope_rotate(qkvr, rope_, N, T, H + KV, hs, D, /*inverse=*/false);
      k::gqa_attention_forward(atty, a.att.data() + l * BHTT, qkvr, attention_shape());
      k::matmul_forward<Scalar>(res2, atty, tensor(attprojw) + lc * C, nullptr, x, N, C, C);
      k::rmsnorm_forward(ln2, a.ln2_rstd.data() + l * N, res2, tensor(ln2w) + lc, N, C, eps);
      k::matmul_forward<Scalar>(fc, ln2, tensor(fcw) + lc * R, nullptr, nullptr, N, C, R);
      if (config_.mlp == llama_mlp::swiglu)
        k::swiglu_forward(fc_act, fc, N, F);
      else
        k::relu_squared_forward(fc_act, fc, N * F);
      k::matmul_forward<Scalar>(res3, fc_act, tensor(fcprojw) + lc * F, nullptr, res2, N, F, C);
    }
    const Scalar* last = a.res3.data() + (config_.num_layers - 1) * NC;
    k::rmsnorm_forward(a.lnf.data(), a.lnf_rstd.data(), last, tensor(lnfw), N, C, eps);
  }

  // The head + softmax cross-entropy, chunk by chunk over rows; with backward, also ∂lnf (into
  // dact_.ln) and the head's gradient. Returns the mean loss.
  double classifier(const std::int32_t* targets, bool backward, Scalar grad_scale) {
    namespace k = detail;
    const int C = config_.channels, V = config_.vocab_size, Vp = config_.padded_vocab_size;
    const k::index N = k::index(batch_) * seq_;
    const k::index chunk = classifier_rows(std::size_t(N));
    const Scalar dloss = grad_scale / Scalar(N);
    Scalar* logits = act_.logits.data();  // (chunk, Vp)
    for (k::index r0 = 0; r0 < N; r0 += chunk) {
      const k::index rows = std::min(chunk, N - r0);
      const Scalar* lnf = act_.lnf.data() + r0 * C;
      k::matmul_forward<Scalar>(logits, lnf, tensor(lm_head), nullptr, nullptr, rows, C, Vp);
      k::softmax_crossentropy(logits, act_.losses.data() + r0, targets + r0, rows, V, Vp, backward,
                              dloss);
      if (backward)
        k::matmul_backward<Scalar>(dact_.ln.data() + r0 * C, grad(lm_head), nullptr, logits, lnf,
                                   tensor(lm_head), rows, C, Vp);
    }
    double sum = 0;  // in row order: deterministic
    for (double l : act_.losses) sum += l;
    return sum / double(N);
  }

  void backward_trunk(const std::int32_t* inputs, const bucket_observer& on_bucket) {
    namespace k = detail;
    const int T = seq_, C = config_.channels, H = config_.num_heads, KV = config_.num_kv_heads,
              hs = config_.head_size(), D = config_.qkv_rows(), R = config_.fc_rows(),
              F = config_.hidden_size;
    const k::index N = k::index(batch_) * T;
    const std::size_t NC = std::size_t(N) * C, ND = std::size_t(N) * D, NR = std::size_t(N) * R,
                      NF = std::size_t(N) * F, BHTT = std::size_t(batch_) * H * T * T;
    activations& a = act_;
    activation_grads& d = dact_;
    Scalar* dres = d.residual.data();
    std::fill(d.residual.begin(), d.residual.end(), Scalar(0));
    const Scalar* last = a.res3.data() + (config_.num_layers - 1) * NC;
    k::rmsnorm_backward(dres, grad(lnfw), d.ln.data(), last, tensor(lnfw), a.lnf_rstd.data(), N, C);
    bucket_done(0, on_bucket);  // lnfw (+ lm_head)
    for (int l = config_.num_layers - 1; l >= 0; --l) {
      const Scalar* x = l == 0 ? a.encoded.data() : a.res3.data() + (l - 1) * NC;
      const std::size_t lc = std::size_t(l) * C;
      // res3 = res2 + fc_act·fcprojwᵀ
      k::matmul_backward<Scalar>(d.fc_act.data(), grad(fcprojw) + lc * F, nullptr, dres,
                                 a.fc_act.data() + l * NF, tensor(fcprojw) + lc * F, N, F, C);
      if (config_.mlp == llama_mlp::swiglu)
        k::swiglu_backward(d.fc.data(), a.fc.data() + l * NR, d.fc_act.data(), N, F);
      else
        k::relu_squared_backward(d.fc.data(), a.fc.data() + l * NR, d.fc_act.data(), N * F);
      k::matmul_backward<Scalar>(d.ln.data(), grad(fcw) + lc * R, nullptr, d.fc.data(),
                                 a.ln2.data() + l * NC, tensor(fcw) + lc * R, N, C, R);
      k::rmsnorm_backward(dres, grad(ln2w) + lc, d.ln.data(), a.res2.data() + l * NC,
                          tensor(ln2w) + lc, a.ln2_rstd.data() + l * N, N, C);
      // res2 = x + atty·attprojwᵀ
      k::matmul_backward<Scalar>(d.atty.data(), grad(attprojw) + lc * C, nullptr, dres,
                                 a.atty.data() + l * NC, tensor(attprojw) + lc * C, N, C, C);
      const Scalar* qkvr = a.qkvr.data() + l * ND;
      k::gqa_attention_backward(d.qkv.data(), d.att.data(), d.atty.data(), qkvr,
                                a.att.data() + l * BHTT, attention_shape());
      // QK-norm's backward in the rotated frame, then the inverse rotation: a parameter-free
      // RMSNorm commutes with the rotation (it preserves norms and dot products), so
      // R⁻¹·norm'(Rŷ)·d = norm'(ŷ)·R⁻¹d and the rotated output qkvr serves as ŷ.
      if (config_.qk_norm)
        k::head_rmsnorm_backward(
            d.qkv.data(), qkvr, a.qk_rstd.data() + std::size_t(l) * N * (H + KV), N, H + KV, hs, D);
      k::rope_rotate(d.qkv.data(), rope_, N, T, H + KV, hs, D, /*inverse=*/true);
      k::matmul_backward<Scalar>(d.ln.data(), grad(qkvw) + lc * D, nullptr, d.qkv.data(),
                                 a.ln1.data() + l * NC, tensor(qkvw) + lc * D, N, C, D);
      k::rmsnorm_backward(dres, grad(ln1w) + lc, d.ln.data(), x, tensor(ln1w) + lc,
                          a.ln1_rstd.data() + l * N, N, C);
      bucket_done(llama_layer_bucket(config_, l), on_bucket);
    }
    k::embedding_backward(grad(wte), dres, inputs, N, C);
    bucket_done(llama_embedding_bucket(config_), on_bucket);
  }

  llama_config config_;
  std::vector<tensor_info> layout_;
  std::vector<gradient_bucket> buckets_;
  detail::rope_table rope_;
  std::array<std::size_t, std::size_t(tensor_count)> offsets_{};
  buffer params_;
  buffer grads_;
  buffer micro_grads_;             // a later micro-step's own gradient (empty until needed)
  Scalar* grad_target_ = nullptr;  // micro_grads_ while such a micro-step runs, else grads_
  bool grads_zeroed_ = true;       // no backward since zero_grad() (or construction)
  activations act_;
  activation_grads dact_;
  buffer logits_out_;  // (B, T, Vp) from forward_logits
  double last_loss_ = 0.0;
  double step_loss_sum_ = 0.0;
  int step_loss_count_ = 1;
  int batch_ = 0;  // shape the activations are sized for
  int seq_ = 0;
};

using llama_cpu = basic_llama_cpu<float>;

static_assert(model<basic_llama_cpu<float>>, "llama_cpu must satisfy trainkit::model::model");
static_assert(model<basic_llama_cpu<double>>,
              "llama_cpu<double> must satisfy trainkit::model::model");

}  // namespace trainkit::model
