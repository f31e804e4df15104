// trainkit/model/transformer/cpu.hpp — the CPU reference transformer (Eigen + OpenMP), float or
// double, that every model family shares; a family supplies only its block (cpu_block below).
//
// What is the same for every family lives here once: the flat parameter and gradient buffers in
// the family's layout, the step protocol (micro-step accumulation, the step's loss, bucket
// publishing), the layer loop, the LM head with its chunked softmax cross-entropy, the
// forward/eval/sampling entry points, the batch checks and the checkpoint tensor walk. What
// differs — the embedding, the norm, the positional encoding, the attention layout, the MLP and
// the tensors they read — is the family's block: gpt2_cpu_block (model/gpt2/cpu.hpp) and
// llama_cpu_block (model/llama/cpu.hpp); docs/writing_a_policy.md has the recipe for a third.
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
// Buckets (transformer/layout.hpp): every family publishes bucket 0 after the final norm's backward
// (the head's gradients are final then), transformer_layer_bucket(L, l) after layer l's backward,
// and the last one after the embedding's backward (a tied head's gradient lands in wte).
//
// Two hooks serve blocks whose computation has more to it (the Llama's speedrun recipe): a
// block's `logit_cap()` soft-caps the logits in the cross-entropy and in forward_logits, and its
// `set_step(step)` is reachable as the model's (the trainer tells it the step). Blocks without
// them (GPT-2) compute exactly as before.
//
// Activations are sized for the batch shape on first use and reused while it stays the same. The
// LM head runs in chunks of rows so a large B·T never materialises all (B·T, Vp) logits. Logits
// span the padded vocabulary Vp, but the softmax ranges over the V real tokens only, so padded rows
// of the head get no gradient. Results are bit-identical run to run for a fixed thread count; the
// double instantiation exists for finite-difference gradient checks.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/core/batch.hpp"
#include "trainkit/core/calibrate_cpu.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/execution_context.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/model/concepts.hpp"
#include "trainkit/model/cpu/kernels.hpp"
#include "trainkit/model/detail/aligned_vector.hpp"
#include "trainkit/model/detail/batch_checks.hpp"
#include "trainkit/model/recipe/softcap_crossentropy.hpp"
#include "trainkit/model/transformer/layout.hpp"
#include "trainkit/model/zero_parameters.hpp"

namespace trainkit::model {

/// What a block reads and writes during one pass: the parameter tensors and their gradients (by
/// the family's tensor enum) and the batch shape. Gradients go to gradients() itself or, for a
/// later micro-step, to that micro-step's own buffer (the file comment); a block need not know.
template <class Scalar, class Tensor>
struct cpu_pass {
  Scalar* params;
  Scalar* grads;
  const std::size_t* offsets;  // per Tensor: its offset in the flat buffers
  int batch;                   // B
  int seq;                     // T

  Scalar* tensor(Tensor t) const noexcept { return params + offsets[std::size_t(t)]; }
  Scalar* grad(Tensor t) const noexcept { return grads + offsets[std::size_t(t)]; }
  detail::index rows() const noexcept { return detail::index(batch) * seq; }  // N = B·T
};

/// A family's CPU block: everything transformer_cpu does not own. Requires:
///  - `scalar_type` (float or double), `config_type` (with validate(), num_parameters(),
///    flops_per_token(T) and the fields vocab_size, padded_vocab_size, channels, num_layers,
///    max_seq_len), `tensor` (an enum of its parameter tensors ending in `tensor_count`);
///  - `model_name`, `config_name`: how messages name the model and its config ("gpt2_cpu",
///    "gpt2_config");
///  - static `parameter_layout(cfg)` (tensor i of the enum is entry i, where present) and
///    `gradient_buckets(cfg)` (head, layers L-1..0, embeddings: the file comment);
///  - static `initialize(cfg, seed, params)`, and `head(cfg)`: the tensor the LM head reads
///    ((Vp, C): wte when tied);
///  - a constructor from the config; `prepare(B, T)` sizing its activations (called when the batch
///    shape changes);
///  - forward: `embed(pass, inputs)`, `forward_layer(pass, l)` for l = 0..L-1,
///    `forward_final(pass, out)` writing the final norm's (B, T, C) output to `out`;
///  - backward, in reverse: `backward_final(pass, dout)` from ∂out, `backward_layer(pass, l)` for
///    l = L-1..0, `backward_embed(pass, inputs)`. Backward adds into parameter gradients.
template <class B>
concept cpu_block = (std::same_as<typename B::scalar_type, float> ||
                     std::same_as<typename B::scalar_type,
                                  double>)&&requires(B b, const typename B::config_type& cfg,
                                                     std::span<typename B::scalar_type> params,
                                                     const cpu_pass<typename B::scalar_type,
                                                                    typename B::tensor>& pass,
                                                     typename B::scalar_type* out,
                                                     const std::int32_t* tokens) {
  B::tensor::tensor_count;
  { B::model_name } -> std::convertible_to<std::string_view>;
  { B::config_name } -> std::convertible_to<std::string_view>;
  { B::parameter_layout(cfg) } -> std::same_as<std::vector<tensor_info>>;
  { B::gradient_buckets(cfg) } -> std::same_as<std::vector<gradient_bucket>>;
  B::initialize(cfg, std::uint64_t{}, params);
  { B::head(cfg) } -> std::same_as<typename B::tensor>;
  B(cfg);
  b.prepare(int{}, int{});
  b.embed(pass, tokens);
  b.forward_layer(pass, int{});
  b.forward_final(pass, out);
  b.backward_final(pass, out);
  b.backward_layer(pass, int{});
  b.backward_embed(pass, tokens);
};

template <cpu_block Block>
class transformer_cpu {
  using Scalar = typename Block::scalar_type;
  using tensor_id = typename Block::tensor;

 public:
  using block_type = Block;
  using config_type = typename Block::config_type;
  using memory_space = host_memory;
  using parameter_type = typename Block::scalar_type;

  /// The family's initialisation from `seed` (Block::initialize). Throws config_error.
  transformer_cpu(config_type cfg, std::uint64_t seed) : transformer_cpu(cfg, zero_parameters) {
    Block::initialize(config_, seed, std::span<Scalar>(params_));
  }

  /// All parameters zero. Throws config_error naming the config field that is invalid.
  transformer_cpu(config_type cfg, zero_parameters_t)
      : config_(validated(cfg)),
        layout_(Block::parameter_layout(config_)),
        buckets_(Block::gradient_buckets(config_)),
        block_(config_) {
    params_.assign(config_.num_parameters(), Scalar(0));
    grads_.assign(params_.size(), Scalar(0));
    if constexpr (requires { Block::tensor_offsets(config_); })
      offsets_ = Block::tensor_offsets(config_);  // the block maps its enum (optional tensors)
    else
      for (std::size_t i = 0; i < layout_.size(); ++i) offsets_[i] = layout_[i].offset;
    head_ = Block::head(config_);
    check_buckets_tile(buckets_, params_.size(), std::string(Block::model_name).c_str());
    if (buckets_.size() != std::size_t(config_.num_layers) + 2)
      throw config_error(std::string(Block::model_name) + ": " + std::to_string(buckets_.size()) +
                         " gradient buckets, expected head, " + std::to_string(config_.num_layers) +
                         " layers and embeddings");
  }

  const config_type& config() const noexcept { return config_; }

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

  /// The buckets backward finishes, in that order (Block::gradient_buckets).
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

  /// Logits (B, T, Vp) for `inputs` (B, T), e.g. for sampling (model/sampling.hpp): the span stays
  /// valid until the next call of any forward function. Columns [V, Vp) are the padded rows'
  /// logits and are not tokens: samplers must ignore them. Throws config_error like forward().
  std::span<const Scalar> forward_logits(std::span<const std::int32_t> inputs, int B, int T) {
    if (inputs.size() != std::size_t(B) * std::size_t(T) || B <= 0 || T <= 0)
      throw config_error(
          std::string(Block::model_name) + "::forward_logits: " + std::to_string(inputs.size()) +
          " inputs do not form a B=" + std::to_string(B) + " T=" + std::to_string(T) + " batch");
    check_shape(B, T);
    check_tokens(inputs.data(), inputs.size(), "input", T);
    prepare(B, T);
    forward_trunk(inputs.data());
    const std::size_t N = std::size_t(B) * T, Vp = std::size_t(config_.padded_vocab_size);
    logits_out_.resize(N * Vp);
    detail::matmul_forward<Scalar>(logits_out_.data(), final_.data(), tensor(head_), nullptr,
                                   nullptr, detail::index(N), config_.channels,
                                   config_.padded_vocab_size);
    if (const Scalar cap = logit_cap(); cap > Scalar(0))  // the logits the loss is of
      for (Scalar& z : logits_out_) z = cap * std::tanh(z / cap);
    return {logits_out_.data(), logits_out_.size()};
  }

  /// The optimizer step the next passes belong to, for a block whose computation follows a
  /// schedule (the Llama's attention windows); the trainer calls it before each step.
  void set_step(std::int64_t step) requires requires(Block& b, std::int64_t s) { b.set_step(s); }
  { block_.set_step(step); }

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
  using buffer = detail::aligned_vector<Scalar>;  // 64-byte aligned: see aligned_vector.hpp
  using pass_type = cpu_pass<Scalar, tensor_id>;

  // Rows of the LM head computed at once: bounds the logits buffer to ~64 MiB at Vp = 50304.
  static constexpr int classifier_chunk_bytes = 64 << 20;

  static config_type validated(const config_type& cfg) {
    cfg.validate();
    return cfg;
  }

  Scalar* tensor(tensor_id id) noexcept { return params_.data() + offsets_[std::size_t(id)]; }
  // Where backward writes gradients: gradients() itself, or this micro-step's own buffer.
  Scalar* grad(tensor_id id) noexcept {
    return (grad_target_ ? grad_target_ : grads_.data()) + offsets_[std::size_t(id)];
  }
  pass_type pass() noexcept {
    return {params_.data(), grad_target_ ? grad_target_ : grads_.data(), offsets_.data(), batch_,
            seq_};
  }

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

  void check_shape(int B, int T) const {
    detail::check_batch_shape(B, T, config_.max_seq_len, Block::model_name, Block::config_name);
  }
  void check_tokens(const std::int32_t* tokens, std::size_t n, const char* what, int T) const {
    detail::check_tokens(tokens, n, what, T, config_.vocab_size, Block::model_name);
  }
  void check_batch(const batch_view<host_memory>& batch) const {
    check_shape(batch.batch_size, batch.seq_len);
    check_tokens(batch.inputs, batch.tokens(), "input", batch.seq_len);
    check_tokens(batch.targets, batch.tokens(), "target", batch.seq_len);
  }

  // The block's logit soft-cap (0: none, and a block without one).
  Scalar logit_cap() const noexcept {
    if constexpr (requires(const Block& b) { b.logit_cap(); })
      return Scalar(block_.logit_cap());
    else
      return Scalar(0);
  }

  int classifier_rows(std::size_t N) const {
    const std::size_t rows =
        classifier_chunk_bytes / (sizeof(Scalar) * std::size_t(config_.padded_vocab_size));
    return int(std::clamp<std::size_t>(rows, 1, N));
  }

  // Sizes the buffers for (B, T); a no-op while the shape stays the same.
  void prepare(int B, int T) {
    if (B == batch_ && T == seq_) return;
    block_.prepare(B, T);
    const std::size_t N = std::size_t(B) * T, C = std::size_t(config_.channels),
                      Vp = std::size_t(config_.padded_vocab_size);
    final_.assign(N * C, 0);
    dfinal_.assign(N * C, 0);
    logits_.assign(std::size_t(classifier_rows(N)) * Vp, 0);
    losses_.assign(N, 0);
    batch_ = B;
    seq_ = T;
  }

  void forward_trunk(const std::int32_t* inputs) {
    linalg::new_weights_epoch();  // weights may have changed: bf16 GEMMs round them afresh
    const pass_type p = pass();
    block_.embed(p, inputs);
    for (int l = 0; l < config_.num_layers; ++l) block_.forward_layer(p, l);
    block_.forward_final(p, final_.data());
  }

  // LM head + softmax cross-entropy, chunk by chunk over rows; with backward, also ∂final (into
  // dfinal_) and the head's gradient. Returns the mean loss.
  double classifier(const std::int32_t* targets, bool backward, Scalar grad_scale) {
    namespace k = detail;
    const int C = config_.channels, V = config_.vocab_size, Vp = config_.padded_vocab_size;
    const k::index N = k::index(batch_) * seq_;
    const k::index chunk = classifier_rows(std::size_t(N));
    const Scalar dloss = grad_scale / Scalar(N), cap = logit_cap();
    Scalar* logits = logits_.data();  // (chunk, Vp)
    for (k::index r0 = 0; r0 < N; r0 += chunk) {
      const k::index rows = std::min(chunk, N - r0);
      const Scalar* in = final_.data() + r0 * C;
      k::matmul_forward<Scalar>(logits, in, tensor(head_), nullptr, nullptr, rows, C, Vp);
      // cap 0 is softmax_crossentropy itself (recipe/softcap_crossentropy.hpp)
      recipe::softcapped_crossentropy(logits, losses_.data() + r0, targets + r0, rows, V, Vp,
                                      backward, dloss, cap);
      if (backward)  // dlogits now in `logits`, zero in the padded columns
        k::matmul_backward<Scalar>(dfinal_.data() + r0 * C, grad(head_), nullptr, logits, in,
                                   tensor(head_), rows, C, Vp);
    }
    double sum = 0;  // in row order: deterministic
    for (double l : losses_) sum += l;
    return sum / double(N);
  }

  void backward_trunk(const std::int32_t* inputs, const bucket_observer& on_bucket) {
    const pass_type p = pass();
    const int L = config_.num_layers;
    block_.backward_final(p, dfinal_.data());
    bucket_done(0, on_bucket);  // the final norm (and an untied head)
    for (int l = L - 1; l >= 0; --l) {
      block_.backward_layer(p, l);
      bucket_done(transformer_layer_bucket(L, l), on_bucket);
    }
    block_.backward_embed(p, inputs);
    bucket_done(transformer_embedding_bucket(L), on_bucket);
  }

  config_type config_;
  std::vector<tensor_info> layout_;
  std::vector<gradient_bucket> buckets_;
  Block block_;
  std::array<std::size_t, std::size_t(tensor_id::tensor_count)> offsets_{};
  tensor_id head_{};
  buffer params_;
  buffer grads_;
  buffer micro_grads_;                     // a later micro-step's own gradient (empty until needed)
  Scalar* grad_target_ = nullptr;          // micro_grads_ while such a micro-step runs, else grads_
  bool grads_zeroed_ = true;               // no backward since zero_grad() (or construction)
  buffer final_;                           // (B, T, C) the final norm's output, the head's input
  buffer dfinal_;                          // (B, T, C) ∂final from the head
  buffer logits_;                          // (rows per chunk, Vp), reused across chunks
  detail::aligned_vector<double> losses_;  // (B, T)
  buffer logits_out_;                      // (B, T, Vp) from forward_logits
  double last_loss_ = 0.0;
  double step_loss_sum_ = 0.0;  // Σ float(micro-step loss) of the current step, in double
  int step_loss_count_ = 1;
  int batch_ = 0;  // shape the buffers are sized for
  int seq_ = 0;
};

}  // namespace trainkit::model
