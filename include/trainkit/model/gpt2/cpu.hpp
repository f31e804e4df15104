// trainkit/model/gpt2/cpu.hpp — the CPU reference GPT-2 (Eigen + OpenMP), float or double.
//
// The model llm.c's train_gpt2.c trains, written against trainkit's Model concept: token and
// position embeddings, pre-LayerNorm blocks (causal multi-head attention with a fused qkv
// projection, then a 4C tanh-GELU MLP, each added to the residual stream), a final LayerNorm and
// an LM head tied to wte. Logits span the padded vocabulary Vp, but the softmax ranges over the V
// real tokens only, so the padded rows of wte get no gradient from the head.
//
// Parameters and gradients are flat buffers in llm.c's layout (gpt2/config.hpp). The backward
// pass is written by hand (cpu/kernels.hpp); the double instantiation exists for
// finite-difference gradient checks. Results are bit-identical run to run for a fixed thread count.
//
// Gradient accumulation: the first backward after zero_grad() writes its gradient straight into
// the zeroed gradient buffer; every later one computes its own contribution c_k into a second,
// zeroed buffer and then adds it, bucket by bucket, so the step's gradient is exactly
// ((c_0 + c_1) + c_2) + ... with each c_k computed from zero. That is the arithmetic a
// data-parallel run does when every rank computes its micro-batches' gradient and a reducer sums
// them, which is what makes 2 ranks × 1 micro-batch bit-identical to 1 process × 2
// (docs/distributed.md). The cost is one more gradient-sized buffer, allocated the first time a
// step has more than one micro-step, and one pass over it per extra micro-step.
//
// Activations are sized for the batch shape on first use and reused while it stays the same. The
// LM head runs in chunks of rows so a large B·T never materialises all (B·T, Vp) logits. As in
// llm.c, attention probabilities are kept for backward: L·B·H·T² values (2.4 GB for d12 at B=4,
// T=1024 in float), the largest activation at long sequence lengths.
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
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/model/concepts.hpp"
#include "trainkit/model/detail/aligned_vector.hpp"
#include "trainkit/model/detail/batch_checks.hpp"
#include "trainkit/model/cpu/kernels.hpp"
#include "trainkit/model/gpt2/init.hpp"
#include "trainkit/model/gpt2/config.hpp"
#include "trainkit/model/zero_parameters.hpp"

namespace trainkit::model {

template <class Scalar>
class basic_gpt2_cpu {
  static_assert(std::same_as<Scalar, float> || std::same_as<Scalar, double>,
                "basic_gpt2_cpu computes in float or double");

 public:
  using memory_space = host_memory;
  using parameter_type = Scalar;

  /// GPT-2 initialisation from `seed` (gpt2/init.hpp: matrices and embeddings
  /// N(0, 0.02), the residual projections N(0, 0.02/√(2L)), biases 0, LayerNorm gains 1, wte's
  /// padded rows zero), the same weights gpt2_cuda starts from. Throws config_error.
  basic_gpt2_cpu(gpt2_config cfg, std::uint64_t seed) : basic_gpt2_cpu(cfg, zero_parameters) {
    detail::gpt2_initialize(config_, seed, std::span<Scalar>(params_));
  }

  /// All parameters zero. Throws config_error for an invalid config.
  basic_gpt2_cpu(gpt2_config cfg, zero_parameters_t)
      : config_(validated(cfg)),
        layout_(gpt2_parameter_layout(cfg)),
        buckets_(gpt2_gradient_buckets(cfg)) {
    params_.assign(config_.num_parameters(), Scalar(0));
    grads_.assign(params_.size(), Scalar(0));
    for (std::size_t i = 0; i < layout_.size(); ++i) offsets_[i] = layout_[i].offset;
    check_buckets_tile(buckets_, params_.size(), "gpt2_cpu");
  }

  const gpt2_config& config() const noexcept { return config_; }

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

  /// The step protocol (core/step_protocol.hpp): adds micro.grad_scale·∂loss/∂θ to gradients()
  /// and the batch's mean loss to the step's; on the last micro-step, publishes each bucket of
  /// gradient_buckets() right after backward has finished it. Micro-steps after the first compute
  /// their contribution from zero and then add it (see the file comment). Throws config_error for
  /// tokens outside [0, vocab_size) or T > max_seq_len.
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

  /// The buckets backward finishes, in that order: gpt2_gradient_buckets(config()).
  std::span<const gradient_bucket> gradient_buckets() const noexcept { return buckets_; }

  /// One micro-step outside a trainer: mean cross-entropy over the batch's B·T targets, adding
  /// grad_scale·∂loss/∂θ to gradients() exactly as the protocol's forward_backward does (so a
  /// loop of these after zero_grad() equals a trainer step bit for bit). Throws like it.
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

  /// The mean loss of the last forward() or forward_backward(), accumulated in double (the float
  /// they return is too coarse for finite differences on the double model).
  double last_loss() const noexcept { return last_loss_; }

  /// Logits (B, T, Vp) for `inputs` (B, T), e.g. for sampling: the span stays valid until the
  /// next call of any forward function. Columns [V, Vp) are the padded rows' logits and are not
  /// tokens: samplers must ignore them. Throws config_error like forward().
  std::span<const Scalar> forward_logits(std::span<const std::int32_t> inputs, int B, int T) {
    if (inputs.size() != std::size_t(B) * std::size_t(T) || B <= 0 || T <= 0)
      throw config_error("gpt2_cpu::forward_logits: " + std::to_string(inputs.size()) +
                         " inputs do not form a B=" + std::to_string(B) +
                         " T=" + std::to_string(T) + " batch");
    detail::check_gpt2_tokens(config_, inputs.data(), inputs.size(), "input", T, "gpt2_cpu");
    detail::check_gpt2_batch_shape(config_, B, T, "gpt2_cpu");
    prepare(B, T);
    forward_trunk(inputs.data());
    const std::size_t N = std::size_t(B) * T, Vp = std::size_t(config_.padded_vocab_size);
    logits_out_.resize(N * Vp);
    detail::matmul_forward<Scalar>(logits_out_.data(), act_.lnf.data(), tensor(wte), nullptr,
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
    // Onto zeroed gradients backward writes in place; onto a previous micro-step's it computes
    // this one's from zero in its own buffer and adds it bucket by bucket (file comment).
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

  using buffer = detail::aligned_vector<Scalar>;  // 64-byte aligned: see aligned_vector.hpp

  // Indices into layout_ (llm.c order).
  using tensor_id = gpt2_tensor;  // llm.c order, shared with the other GPT-2 model
  using enum gpt2_tensor;

  // Forward activations for one batch shape; per-layer ones are stacked (L, ...).
  struct activations {
    buffer encoded;                         // (B, T, C)
    buffer ln1, ln1_mean, ln1_rstd;         // (L, B, T, C), (L, B, T) ×2
    buffer qkv;                             // (L, B, T, 3C)
    buffer att;                             // (L, B, H, T, T) softmax probabilities
    buffer atty;                            // (L, B, T, C) attention output before projection
    buffer res2;                            // (L, B, T, C) residual after attention
    buffer ln2, ln2_mean, ln2_rstd;         // (L, B, T, C), (L, B, T) ×2
    buffer fch, fch_gelu;                   // (L, B, T, 4C)
    buffer res3;                            // (L, B, T, C) residual after the MLP
    buffer lnf, lnf_mean, lnf_rstd;         // (B, T, C), (B, T) ×2
    buffer logits;                          // (rows per chunk, Vp), reused across chunks
    detail::aligned_vector<double> losses;  // (B, T)
  };

  // Gradients of activations, one layer's worth, reused layer after layer.
  struct activation_grads {
    buffer residual;  // (B, T, C) running ∂loss/∂residual stream
    buffer ln;        // (B, T, C) ∂ of a LayerNorm output (ln1, ln2 or lnf)
    buffer atty;      // (B, T, C)
    buffer qkv;       // (B, T, 3C)
    buffer fch;       // (B, T, 4C) ∂fch_gelu, then ∂fch in place
    buffer att;       // (B, H, T, T) scratch for the softmax backward
  };

  // Rows of the LM head computed at once: bounds the logits buffer to ~64 MiB at Vp = 50304.
  static constexpr int classifier_chunk_bytes = 64 << 20;

  static gpt2_config validated(const gpt2_config& cfg) {
    cfg.validate();
    return cfg;
  }

  Scalar* tensor(tensor_id id) noexcept { return params_.data() + offsets_[std::size_t(id)]; }
  // Where backward writes gradients: gradients() itself, or this micro-step's own buffer.
  Scalar* grad(tensor_id id) noexcept {
    return (grad_target_ ? grad_target_ : grads_.data()) + offsets_[std::size_t(id)];
  }

  // Bucket i is complete for this micro-step: a micro-step computing into its own buffer adds
  // the bucket to gradients() (each bucket once: they tile the buffer), then it is published.
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

  void check_batch(const batch_view<host_memory>& batch) const {
    detail::check_gpt2_batch_shape(config_, batch.batch_size, batch.seq_len, "gpt2_cpu");
    detail::check_gpt2_tokens(config_, batch.inputs, batch.tokens(), "input", batch.seq_len,
                              "gpt2_cpu");
    detail::check_gpt2_tokens(config_, batch.targets, batch.tokens(), "target", batch.seq_len,
                              "gpt2_cpu");
  }

  int classifier_rows(std::size_t N) const {
    const std::size_t rows =
        classifier_chunk_bytes / (sizeof(Scalar) * std::size_t(config_.padded_vocab_size));
    return int(std::clamp<std::size_t>(rows, 1, N));
  }

  // Sizes the buffers for (B, T); a no-op while the shape stays the same.
  void prepare(int B, int T) {
    if (B == batch_ && T == seq_) return;
    const std::size_t L = std::size_t(config_.num_layers), C = std::size_t(config_.channels),
                      H = std::size_t(config_.num_heads), N = std::size_t(B) * T,
                      Vp = std::size_t(config_.padded_vocab_size);
    activations& a = act_;
    a.encoded.assign(N * C, 0);
    for (auto* v : {&a.ln1, &a.atty, &a.res2, &a.ln2, &a.res3}) v->assign(L * N * C, 0);
    for (auto* v : {&a.ln1_mean, &a.ln1_rstd, &a.ln2_mean, &a.ln2_rstd}) v->assign(L * N, 0);
    a.qkv.assign(L * N * 3 * C, 0);
    a.att.assign(L * B * H * T * T, 0);
    a.fch.assign(L * N * 4 * C, 0);
    a.fch_gelu.assign(L * N * 4 * C, 0);
    a.lnf.assign(N * C, 0);
    a.lnf_mean.assign(N, 0);
    a.lnf_rstd.assign(N, 0);
    a.logits.assign(std::size_t(classifier_rows(N)) * Vp, 0);
    a.losses.assign(N, 0);
    activation_grads& g = dact_;
    g.residual.assign(N * C, 0);
    g.ln.assign(N * C, 0);
    g.atty.assign(N * C, 0);
    g.qkv.assign(N * 3 * C, 0);
    g.fch.assign(N * 4 * C, 0);
    g.att.assign(B * H * T * T, 0);
    batch_ = B;
    seq_ = T;
  }

  void forward_trunk(const std::int32_t* inputs) {
    namespace k = detail;
    linalg::new_weights_epoch();  // weights may have changed: bf16 GEMMs round them afresh
    const int B = batch_, T = seq_, C = config_.channels, H = config_.num_heads;
    const k::index N = k::index(B) * T;
    const std::size_t NC = std::size_t(N) * C, BHTT = std::size_t(B) * H * T * T;
    activations& a = act_;
    k::encoder_forward(a.encoded.data(), inputs, tensor(wte), tensor(wpe), B, T, C);
    for (int l = 0; l < config_.num_layers; ++l) {
      const Scalar* x = l == 0 ? a.encoded.data() : a.res3.data() + (l - 1) * NC;  // (B, T, C)
      Scalar* ln1 = a.ln1.data() + l * NC;
      Scalar* qkv = a.qkv.data() + 3 * l * NC;
      Scalar* atty = a.atty.data() + l * NC;
      Scalar* res2 = a.res2.data() + l * NC;
      Scalar* ln2 = a.ln2.data() + l * NC;
      Scalar* fch = a.fch.data() + 4 * l * NC;
      Scalar* fch_gelu = a.fch_gelu.data() + 4 * l * NC;
      Scalar* res3 = a.res3.data() + l * NC;
      k::layernorm_forward(ln1, a.ln1_mean.data() + l * N, a.ln1_rstd.data() + l * N, x,
                           tensor(ln1w) + l * C, tensor(ln1b) + l * C, N, C);
      k::matmul_forward<Scalar>(qkv, ln1, tensor(qkvw) + std::size_t(l) * 3 * C * C,
                                tensor(qkvb) + l * 3 * C, nullptr, N, C, 3 * C);
      k::attention_forward(atty, a.att.data() + l * BHTT, qkv, B, T, C, H);
      k::matmul_forward(res2, atty, tensor(attprojw) + std::size_t(l) * C * C,
                        tensor(attprojb) + l * C, x, N, C, C);
      k::layernorm_forward(ln2, a.ln2_mean.data() + l * N, a.ln2_rstd.data() + l * N, res2,
                           tensor(ln2w) + l * C, tensor(ln2b) + l * C, N, C);
      k::matmul_forward<Scalar>(fch, ln2, tensor(fcw) + std::size_t(l) * 4 * C * C,
                                tensor(fcb) + l * 4 * C, nullptr, N, C, 4 * C);
      k::gelu_forward(fch_gelu, fch, 4 * N * C);
      k::matmul_forward(res3, fch_gelu, tensor(fcprojw) + std::size_t(l) * 4 * C * C,
                        tensor(fcprojb) + l * C, res2, N, 4 * C, C);
    }
    const Scalar* last = a.res3.data() + (config_.num_layers - 1) * NC;
    k::layernorm_forward(a.lnf.data(), a.lnf_mean.data(), a.lnf_rstd.data(), last, tensor(lnfw),
                         tensor(lnfb), N, C);
  }

  // LM head + softmax cross-entropy, chunk by chunk over rows; with backward, also ∂lnf (into
  // dact_.ln) and wte's head gradient. Returns the mean loss.
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
      k::matmul_forward<Scalar>(logits, lnf, tensor(wte), nullptr, nullptr, rows, C, Vp);
      k::softmax_crossentropy(logits, act_.losses.data() + r0, targets + r0, rows, V, Vp, backward,
                              dloss);
      if (backward)  // dlogits now in `logits`, zero in the padded columns
        k::matmul_backward<Scalar>(dact_.ln.data() + r0 * C, grad(wte), nullptr, logits, lnf,
                                   tensor(wte), rows, C, Vp);
    }
    double sum = 0;  // in row order: deterministic
    for (double l : act_.losses) sum += l;
    return sum / double(N);
  }

  void backward_trunk(const std::int32_t* inputs, const bucket_observer& on_bucket) {
    namespace k = detail;
    const int B = batch_, T = seq_, C = config_.channels, H = config_.num_heads;
    const k::index N = k::index(B) * T;
    const std::size_t NC = std::size_t(N) * C, BHTT = std::size_t(B) * H * T * T;
    activations& a = act_;
    activation_grads& d = dact_;
    Scalar* dres = d.residual.data();
    std::fill(d.residual.begin(), d.residual.end(), Scalar(0));
    const Scalar* last = a.res3.data() + (config_.num_layers - 1) * NC;
    k::layernorm_backward(dres, grad(lnfw), grad(lnfb), d.ln.data(), last, tensor(lnfw),
                          a.lnf_mean.data(), a.lnf_rstd.data(), N, C);
    bucket_done(0, on_bucket);  // lnf
    for (int l = config_.num_layers - 1; l >= 0; --l) {
      const Scalar* x = l == 0 ? a.encoded.data() : a.res3.data() + (l - 1) * NC;
      const std::size_t lc = std::size_t(l) * C;
      // res3 = res2 + fch_gelu·fcprojwᵀ + fcprojb
      k::matmul_backward(d.fch.data(), grad(fcprojw) + lc * 4 * C, grad(fcprojb) + lc, dres,
                         a.fch_gelu.data() + 4 * l * NC, tensor(fcprojw) + lc * 4 * C, N, 4 * C, C);
      k::gelu_backward(d.fch.data(), a.fch.data() + 4 * l * NC, d.fch.data(), 4 * N * C);
      k::matmul_backward(d.ln.data(), grad(fcw) + lc * 4 * C, grad(fcb) + 4 * lc, d.fch.data(),
                         a.ln2.data() + l * NC, tensor(fcw) + lc * 4 * C, N, C, 4 * C);
      k::layernorm_backward(dres, grad(ln2w) + lc, grad(ln2b) + lc, d.ln.data(),
                            a.res2.data() + l * NC, tensor(ln2w) + lc, a.ln2_mean.data() + l * N,
                            a.ln2_rstd.data() + l * N, N, C);
      // res2 = x + atty·attprojwᵀ + attprojb
      k::matmul_backward(d.atty.data(), grad(attprojw) + lc * C, grad(attprojb) + lc, dres,
                         a.atty.data() + l * NC, tensor(attprojw) + lc * C, N, C, C);
      k::attention_backward(d.qkv.data(), d.att.data(), d.atty.data(), a.qkv.data() + 3 * l * NC,
                            a.att.data() + l * BHTT, B, T, C, H);
      k::matmul_backward(d.ln.data(), grad(qkvw) + lc * 3 * C, grad(qkvb) + 3 * lc, d.qkv.data(),
                         a.ln1.data() + l * NC, tensor(qkvw) + lc * 3 * C, N, C, 3 * C);
      k::layernorm_backward(dres, grad(ln1w) + lc, grad(ln1b) + lc, d.ln.data(), x,
                            tensor(ln1w) + lc, a.ln1_mean.data() + l * N, a.ln1_rstd.data() + l * N,
                            N, C);
      bucket_done(gpt2_layer_bucket(config_, l), on_bucket);
    }
    k::encoder_backward(grad(wte), grad(wpe), dres, inputs, B, T, C);
    bucket_done(gpt2_embedding_bucket(config_), on_bucket);
  }

  gpt2_config config_;
  std::vector<tensor_info> layout_;
  std::vector<gradient_bucket> buckets_;
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
  double step_loss_sum_ = 0.0;  // Σ float(micro-step loss) of the current step, in double
  int step_loss_count_ = 1;
  int batch_ = 0;  // shape the activations are sized for
  int seq_ = 0;
};

using gpt2_cpu = basic_gpt2_cpu<float>;

static_assert(model<basic_gpt2_cpu<float>>, "gpt2_cpu must satisfy trainkit::model::model");
static_assert(model<basic_gpt2_cpu<double>>,
              "gpt2_cpu<double> must satisfy trainkit::model::model");

}  // namespace trainkit::model
