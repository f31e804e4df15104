// trainkit/model/llama/cpu.hpp — the CPU reference Llama-style model (Eigen + OpenMP), float or
// double: the Llama block on the shared CPU transformer (model/transformer/cpu.hpp).
//
// The family of llama/config.hpp: token embedding, pre-RMSNorm blocks (grouped-query causal
// attention with a fused q|k|v projection, optional QK-norm and rotary position embeddings, then a
// SwiGLU or ReLU² MLP, each added to the residual stream), a final RMSNorm and an untied (or tied)
// head. transformer_cpu owns everything the families share (step protocol, micro-step
// accumulation, buckets, head and loss, checks, checkpoint walk), so the trainer, the reducers,
// the checkpointers and the sampler treat both families alike; this file is the block: its kernels
// (cpu/rmsnorm_rope_kernels.hpp, with the shared linear layers of cpu/kernels.hpp), the tensors
// they read and the activations they keep (attention probabilities among them: L·B·H·T² values).
//
// The speedrun recipe's parts (llama_config::recipe; issue 38, docs/recipes.md) are computed here
// when on, each from its kernel in model/recipe/: value embeddings mixed into v (before QK-norm
// and RoPE, which touch only q and k), U-net skips (a decoder block's input kept apart, its
// gradient routed back to the encoder output), sliding windows per layer from the step the trainer
// sets (set_step), and the logit cap, which transformer_cpu applies (logit_cap()). Off, none of
// them runs and the block computes what it did before they existed.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "trainkit/core/step_protocol.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/model/concepts.hpp"
#include "trainkit/model/cpu/kernels.hpp"
#include "trainkit/model/cpu/rmsnorm_rope_kernels.hpp"
#include "trainkit/model/detail/aligned_vector.hpp"
#include "trainkit/model/detail/rope_table.hpp"
#include "trainkit/model/llama/config.hpp"
#include "trainkit/model/llama/init.hpp"
#include "trainkit/model/recipe/sliding_window_attention.hpp"
#include "trainkit/model/recipe/unet_skips.hpp"
#include "trainkit/model/recipe/value_embeddings.hpp"
#include "trainkit/model/transformer/cpu.hpp"

namespace trainkit::model {

/// The Llama block for transformer_cpu (the cpu_block concept): RMSNorm, RoPE (and QK-norm),
/// grouped-query attention, SwiGLU or ReLU², no biases, the head untied or tied to wte.
template <class Scalar>
class llama_cpu_block {
 public:
  using scalar_type = Scalar;
  using config_type = llama_config;
  using tensor = llama_tensor;
  static constexpr std::string_view model_name = "llama_cpu";
  static constexpr std::string_view config_name = "llama_config";

  static std::vector<tensor_info> parameter_layout(const llama_config& cfg) {
    return llama_parameter_layout(cfg);
  }
  static std::vector<gradient_bucket> gradient_buckets(const llama_config& cfg) {
    return llama_gradient_buckets(cfg);
  }
  /// Every tensor's offset: the recipe's optional tensors follow the head (llama/config.hpp).
  static std::array<std::size_t, std::size_t(tensor::tensor_count)> tensor_offsets(
      const llama_config& cfg) {
    return llama_tensor_offsets(cfg);
  }
  /// The family's initialisation (llama/init.hpp), as llama_cuda's.
  static void initialize(const llama_config& cfg, std::uint64_t seed, std::span<Scalar> params) {
    detail::llama_initialize(cfg, seed, params);
  }
  /// A tied head is wte (lm_head is then absent from the layout).
  static tensor head(const llama_config& cfg) noexcept {
    return cfg.tied_embeddings ? tensor::wte : tensor::lm_head;
  }

  explicit llama_cpu_block(const llama_config& cfg)
      : config_(cfg),
        rope_(cfg.max_seq_len, cfg.head_size(), cfg.rope_theta),
        offsets_(llama_tensor_offsets(cfg)) {}

  /// The optimizer step the next passes belong to (0-based): it picks each layer's attention
  /// window (llama_config::attention_window). Until it is set, the schedule's final windows (a
  /// trained model evaluated or sampled).
  void set_step(std::int64_t step) noexcept { step_ = step; }
  /// The logit soft-cap transformer_cpu applies in its cross-entropy and logits (0 = off).
  float logit_cap() const noexcept { return config_.recipe.logit_cap; }

  // Sizes the activations for (B, T); called by transformer_cpu when the shape changes. D =
  // (H+2KV)·hs, R = fc_rows() (2F or F).
  void prepare(int B, int T) {
    const std::size_t L = std::size_t(config_.num_layers), C = std::size_t(config_.channels),
                      H = std::size_t(config_.num_heads), N = std::size_t(B) * T,
                      D = std::size_t(config_.qkv_rows()), R = std::size_t(config_.fc_rows()),
                      F = std::size_t(config_.hidden_size),
                      QK = std::size_t(config_.num_heads + config_.num_kv_heads);
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
    a.lnf_rstd.assign(N, 0);
    activation_grads& g = dact_;
    for (auto* v : {&g.residual, &g.ln, &g.atty}) v->assign(N * C, 0);
    g.qkv.assign(N * D, 0);
    g.fc.assign(N * R, 0);
    g.fc_act.assign(N * F, 0);
    g.att.assign(B * H * T * T, 0);
    // The recipe's activations (empty when its parts are off).
    const std::size_t half = std::size_t(config_.unet_weights());
    tokens_.assign(config_.recipe.value_embeddings > 0 ? N : 0, 0);
    a.skipped.assign(half * N * C, 0);
    g.skip.assign(half * N * C, 0);
  }

  using pass = cpu_pass<Scalar, tensor>;

  void embed(const pass& p, const std::int32_t* inputs) {
    std::copy_n(inputs, tokens_.size(), tokens_.begin());  // value embeddings read them later
    detail::embedding_forward(act_.encoded.data(), inputs, p.tensor(wte), p.rows(),
                              config_.channels);
  }

  void forward_layer(const pass& p, int l) {
    namespace k = detail;
    const int T = p.seq, C = config_.channels, H = config_.num_heads, KV = config_.num_kv_heads,
              hs = config_.head_size(), D = config_.qkv_rows(), R = config_.fc_rows(),
              F = config_.hidden_size;
    const k::index N = p.rows();
    const std::size_t NC = std::size_t(N) * C, ND = std::size_t(N) * D, NR = std::size_t(N) * R,
                      NF = std::size_t(N) * F, BHTT = std::size_t(p.batch) * H * T * T;
    const Scalar eps = Scalar(config_.norm_eps);
    activations& a = act_;
    if (const int i = unet_.weight_index(l); i >= 0) {  // x = previous output + w·skip
      Scalar* skipped = a.skipped.data() + std::size_t(i) * NC;
      std::copy_n(output_of(l - 1, NC), NC, skipped);
      recipe::unet_skip_forward(skipped, output_of(unet_.skip_source(l), NC), std::ptrdiff_t(NC),
                                recipe_tensor(p.params, unet_weights)[i]);
    }
    const Scalar* x = input_of(l, NC);  // (B, T, C)
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
    k::rmsnorm_forward(ln1, a.ln1_rstd.data() + l * N, x, p.tensor(ln1w) + lc, N, C, eps);
    k::matmul_forward<Scalar>(qkv, ln1, p.tensor(qkvw) + lc * D, nullptr, nullptr, N, C, D);
    std::copy_n(qkv, ND, qkvr);
    if (const int slot = llama_ve_slot(config_, l); slot >= 0) {  // v ← λ₀·v + λ₁·E[token]
      const Scalar* lambda = recipe_tensor(p.params, ve_lambdas) + 2 * slot;
      const std::size_t vo = std::size_t(H + KV) * hs;
      recipe::value_embed_forward(qkvr + vo, D, qkv + vo, D, value_table(p.params, l),
                                  tokens_.data(), N, config_.value_width(), lambda[0], lambda[1]);
    }
    if (config_.qk_norm)  // q and k heads are the first H + KV heads of each row
      k::head_rmsnorm_forward(qkvr, a.qk_rstd.data() + std::size_t(l) * N * (H + KV), N, H + KV, hs,
                              D, eps);
    k::rope_rotate(qkvr, rope_, N, T, H + KV, hs, D, /*inverse=*/false);
    recipe::sliding_window_gqa_attention_forward(atty, a.att.data() + l * BHTT, qkvr,
                                                 attention_shape(p),
                                                 config_.attention_window(l, step_));
    k::matmul_forward<Scalar>(res2, atty, p.tensor(attprojw) + lc * C, nullptr, x, N, C, C);
    k::rmsnorm_forward(ln2, a.ln2_rstd.data() + l * N, res2, p.tensor(ln2w) + lc, N, C, eps);
    k::matmul_forward<Scalar>(fc, ln2, p.tensor(fcw) + lc * R, nullptr, nullptr, N, C, R);
    if (config_.mlp == llama_mlp::swiglu)
      k::swiglu_forward(fc_act, fc, N, F);
    else
      k::relu_squared_forward(fc_act, fc, N * F);
    k::matmul_forward<Scalar>(res3, fc_act, p.tensor(fcprojw) + lc * F, nullptr, res2, N, F, C);
  }

  void forward_final(const pass& p, Scalar* out) {
    const std::size_t NC = std::size_t(p.rows()) * config_.channels;
    detail::rmsnorm_forward(out, act_.lnf_rstd.data(), input_of(config_.num_layers, NC),
                            p.tensor(lnfw), p.rows(), config_.channels, Scalar(config_.norm_eps));
  }

  void backward_final(const pass& p, const Scalar* dout) {
    const std::size_t NC = std::size_t(p.rows()) * config_.channels;
    std::fill(dact_.residual.begin(), dact_.residual.end(), Scalar(0));
    std::fill(dact_.skip.begin(), dact_.skip.end(), Scalar(0));
    detail::rmsnorm_backward(dact_.residual.data(), p.grad(lnfw), dout,
                             input_of(config_.num_layers, NC), p.tensor(lnfw), act_.lnf_rstd.data(),
                             p.rows(), config_.channels);
  }

  void backward_layer(const pass& p, int l) {
    namespace k = detail;
    const int T = p.seq, C = config_.channels, H = config_.num_heads, KV = config_.num_kv_heads,
              hs = config_.head_size(), D = config_.qkv_rows(), R = config_.fc_rows(),
              F = config_.hidden_size;
    const k::index N = p.rows();
    const std::size_t NC = std::size_t(N) * C, ND = std::size_t(N) * D, NR = std::size_t(N) * R,
                      NF = std::size_t(N) * F, BHTT = std::size_t(p.batch) * H * T * T;
    activations& a = act_;
    activation_grads& d = dact_;
    Scalar* dres = d.residual.data();
    const Scalar* x = input_of(l, NC);
    const std::size_t lc = std::size_t(l) * C;
    if (l < unet_.encoder_blocks() && config_.recipe.unet_skips) {  // ∂ from the decoder's skip
      const Scalar* dskip = d.skip.data() + std::size_t(l) * NC;
      for (std::size_t j = 0; j < NC; ++j) dres[j] += dskip[j];
    }
    // res3 = res2 + fc_act·fcprojwᵀ
    k::matmul_backward<Scalar>(d.fc_act.data(), p.grad(fcprojw) + lc * F, nullptr, dres,
                               a.fc_act.data() + l * NF, p.tensor(fcprojw) + lc * F, N, F, C);
    if (config_.mlp == llama_mlp::swiglu)
      k::swiglu_backward(d.fc.data(), a.fc.data() + l * NR, d.fc_act.data(), N, F);
    else
      k::relu_squared_backward(d.fc.data(), a.fc.data() + l * NR, d.fc_act.data(), N * F);
    k::matmul_backward<Scalar>(d.ln.data(), p.grad(fcw) + lc * R, nullptr, d.fc.data(),
                               a.ln2.data() + l * NC, p.tensor(fcw) + lc * R, N, C, R);
    k::rmsnorm_backward(dres, p.grad(ln2w) + lc, d.ln.data(), a.res2.data() + l * NC,
                        p.tensor(ln2w) + lc, a.ln2_rstd.data() + l * N, N, C);
    // res2 = x + atty·attprojwᵀ
    k::matmul_backward<Scalar>(d.atty.data(), p.grad(attprojw) + lc * C, nullptr, dres,
                               a.atty.data() + l * NC, p.tensor(attprojw) + lc * C, N, C, C);
    const Scalar* qkvr = a.qkvr.data() + l * ND;
    k::gqa_attention_backward(d.qkv.data(), d.att.data(), d.atty.data(), qkvr,
                              a.att.data() + l * BHTT, attention_shape(p));
    if (const int slot = llama_ve_slot(config_, l); slot >= 0) {  // in place on ∂v
      const Scalar* lambda = recipe_tensor(p.params, ve_lambdas) + 2 * slot;
      const std::size_t vo = std::size_t(H + KV) * hs;
      const std::size_t table = std::size_t(ve_plan().table_of(l)) * config_.padded_vocab_size *
                                std::size_t(config_.value_width());
      recipe::value_embed_backward(d.qkv.data() + vo, D,
                                   recipe_tensor(p.grads, value_embeds) + table,
                                   recipe_tensor(p.grads, ve_lambdas) + 2 * slot, d.qkv.data() + vo,
                                   D, a.qkv.data() + l * ND + vo, D, value_table(p.params, l),
                                   tokens_.data(), N, config_.value_width(), lambda[0], lambda[1]);
    }
    // QK-norm's backward in the rotated frame, then the inverse rotation: a parameter-free
    // RMSNorm commutes with the rotation (it preserves norms and dot products), so
    // R⁻¹·norm'(Rŷ)·d = norm'(ŷ)·R⁻¹d and the rotated output qkvr serves as ŷ.
    if (config_.qk_norm)
      k::head_rmsnorm_backward(d.qkv.data(), qkvr, a.qk_rstd.data() + std::size_t(l) * N * (H + KV),
                               N, H + KV, hs, D);
    k::rope_rotate(d.qkv.data(), rope_, N, T, H + KV, hs, D, /*inverse=*/true);
    k::matmul_backward<Scalar>(d.ln.data(), p.grad(qkvw) + lc * D, nullptr, d.qkv.data(),
                               a.ln1.data() + l * NC, p.tensor(qkvw) + lc * D, N, C, D);
    k::rmsnorm_backward(dres, p.grad(ln1w) + lc, d.ln.data(), x, p.tensor(ln1w) + lc,
                        a.ln1_rstd.data() + l * N, N, C);
    if (const int i = unet_.weight_index(l); i >= 0) {  // x = previous output + w·skip
      const int source = unet_.skip_source(l);
      recipe::unet_skip_backward(
          d.skip.data() + std::size_t(source) * NC, recipe_tensor(p.grads, unet_weights) + i, dres,
          output_of(source, NC), std::ptrdiff_t(NC), recipe_tensor(p.params, unet_weights)[i]);
    }
  }

  void backward_embed(const pass& p, const std::int32_t* inputs) {
    detail::embedding_backward(p.grad(wte), dact_.residual.data(), inputs, p.rows(),
                               config_.channels);
  }

 private:
  using buffer = detail::aligned_vector<Scalar>;
  using enum llama_tensor;

  // Forward activations for one batch shape; per-layer ones are stacked (L, ...).
  struct activations {
    buffer encoded;        // (B, T, C)
    buffer ln1, ln1_rstd;  // (L, B, T, C), (L, B, T)
    buffer qkv;            // (L, B, T, D) projection output
    buffer qkvr;           // (L, B, T, D) q, k after QK-norm and RoPE; v
    buffer qk_rstd;        // (L, B, T, H+KV) QK-norm's rstd (qk_norm only)
    buffer att;            // (L, B, H, T, T) softmax probabilities
    buffer atty;           // (L, B, T, C) attention output before projection
    buffer res2;           // (L, B, T, C) residual after attention
    buffer ln2, ln2_rstd;  // (L, B, T, C), (L, B, T)
    buffer fc;             // (L, B, T, R)
    buffer fc_act;         // (L, B, T, F) MLP hidden after the nonlinearity
    buffer res3;           // (L, B, T, C) residual after the MLP
    buffer lnf_rstd;       // (B, T)
    buffer skipped;        // (L/2, B, T, C) a decoder block's input with its U-net skip added
  };

  // Gradients of activations, one layer's worth, reused layer after layer.
  struct activation_grads {
    buffer residual;  // (B, T, C) running ∂loss/∂residual stream
    buffer ln;        // (B, T, C) ∂ of an RMSNorm output (ln1 or ln2)
    buffer atty;      // (B, T, C)
    buffer qkv;       // (B, T, D) ∂qkvr, then ∂qkv in place
    buffer fc;        // (B, T, R)
    buffer fc_act;    // (B, T, F)
    buffer att;       // (B, H, T, T) scratch for the softmax backward
    buffer skip;      // (L/2, B, T, C) ∂ of each encoder output through its U-net skip
  };

  detail::gqa_shape attention_shape(const pass& p) const noexcept {
    return {p.batch, p.seq, config_.num_heads, config_.num_kv_heads, config_.head_size()};
  }

  // Layer l's output (res3).
  const Scalar* output_of(int l, std::size_t NC) const noexcept {
    return act_.res3.data() + std::size_t(l) * NC;
  }
  // Layer l's input: the embedding for l = 0, a decoder block's skipped input with U-net skips,
  // else layer l-1's output (l = L: the last output).
  const Scalar* input_of(int l, std::size_t NC) const noexcept {
    if (const int i = unet_.weight_index(l); i >= 0) return act_.skipped.data() + i * NC;
    return l == 0 ? act_.encoded.data() : output_of(l - 1, NC);
  }

  // A recipe tensor in the parameter or gradient buffer (present: its part is on).
  Scalar* recipe_tensor(Scalar* base, llama_tensor t) const noexcept {
    return base + offsets_[std::size_t(t)];
  }
  recipe::value_embedding_plan ve_plan() const noexcept {
    return {config_.recipe.value_embeddings, config_.num_layers};
  }
  // The value-embedding table layer l reads ((Vp, KV·hs) in value_embeds).
  const Scalar* value_table(Scalar* params, int l) const noexcept {
    return recipe_tensor(params, value_embeds) + std::size_t(ve_plan().table_of(l)) *
                                                     config_.padded_vocab_size *
                                                     std::size_t(config_.value_width());
  }

  llama_config config_;
  detail::rope_table rope_;
  std::array<std::size_t, std::size_t(llama_tensor::tensor_count)> offsets_;
  recipe::unet_plan unet_{config_.recipe.unet_skips ? config_.num_layers : 0};
  std::int64_t step_ = std::numeric_limits<std::int64_t>::max();  // set_step
  std::vector<std::int32_t> tokens_;  // (B, T) this pass's inputs (value embeddings only)
  activations act_;
  activation_grads dact_;
};

/// The CPU Llama: transformer_cpu with the Llama block.
template <class Scalar>
class basic_llama_cpu : public transformer_cpu<llama_cpu_block<Scalar>> {
 public:
  using transformer_cpu<llama_cpu_block<Scalar>>::transformer_cpu;
};

using llama_cpu = basic_llama_cpu<float>;

static_assert(model<basic_llama_cpu<float>>, "llama_cpu must satisfy trainkit::model::model");
static_assert(model<basic_llama_cpu<double>>,
              "llama_cpu<double> must satisfy trainkit::model::model");

}  // namespace trainkit::model
