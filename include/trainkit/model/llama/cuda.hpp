// trainkit/model/llama/cuda.hpp — the CUDA Llama-style model (bf16 weights and activations, fp32
// accumulation, cuBLASLt matmuls), a trainkit::model::model in device memory: the Llama block on
// the shared CUDA transformer (model/transformer/cuda.hpp).
//
// The network, parameter layout (with roles), initialisation and gradient buckets of
// llama/config.hpp / llama/cpu.hpp: token embedding, pre-RMSNorm blocks (fused q|k|v projection,
// optional QK-norm, RoPE, grouped-query causal attention, output projection; SwiGLU or ReLU² MLP),
// final RMSNorm, untied or tied head. A model of one seed starts from llama_cpu's weights rounded
// to bf16. transformer_cuda owns what every family shares: the cuBLASLt matmul context (with
// autotuning), the attention engines (flash_attention.cuh and cuDNN through attention_engine.hpp,
// both with GQA), the head and the fused classifier, the loss accumulation and the step protocol's
// synchronisation contract, bucket publishing. This file is the block: the Llama kernels
// (rmsnorm.cuh with the residual add fused, rope.cuh, gated_mlp.cuh, tested against CPU twins in
// detail/llama_cuda_twins.hpp), the RoPE table on the device, and the embedding gradient from the
// device token buckets.
//
// The speedrun recipe (llama_config::recipe, issue 38): sliding-window attention per layer and
// step (the window of cfg.attention_window(layer, step), the step set by set_step before a step's
// micro-steps; both flash and cuDNN take it), the logit soft-cap (the classifier's cap), zero-init
// projections (llama_cpu's initialisation, which this model starts from) and the recipe tensors'
// places (llama_tensor_offsets), value embeddings (v ← λ₀·v + λ₁·E[token] after RoPE, by
// model/cuda/recipe.cuh's value mix; the tables' gradients through the token buckets) and U-net
// skips (a decoder block's input is the previous output plus w times its encoder source's output,
// kept apart; the source's gradient is added when the backward reaches it). None of it has run on
// a GPU.
//
// Not offered here (gpt2_cuda has them): activation recomputation, CUDA graphs, the naive
// attention (GQA lives in flash and cuDNN only; flash or cuDNN keep no T×T matrix) and the atomic
// embedding backward. Gradients are bf16, one rounding per element per micro-batch, as gpt2_cuda's
// (docs/cuda.md, "Precision"). Activations live in one arena (model/llama/cuda_memory.hpp).
// Needs nvcc (the kernels are in the included headers); link trainkit::cuda.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/model/concepts.hpp"
#include "trainkit/model/cuda/attention_engine.hpp"
#include "trainkit/model/cuda/elementwise.cuh"
#include "trainkit/model/cuda/encoder.cuh"
#include "trainkit/model/cuda/gated_mlp.cuh"
#include "trainkit/model/cuda/recipe.cuh"
#include "trainkit/model/cuda/rmsnorm.cuh"
#include "trainkit/model/cuda/rope.cuh"
#include "trainkit/model/cuda/token_buckets.cuh"
#include "trainkit/model/detail/rope_table.hpp"
#include "trainkit/model/llama/config.hpp"
#include "trainkit/model/llama/cuda_memory.hpp"
#include "trainkit/model/llama/init.hpp"
#include "trainkit/model/recipe/unet_skips.hpp"
#include "trainkit/model/recipe/value_embeddings.hpp"
#include "trainkit/model/transformer/cuda.hpp"

namespace trainkit::model {

/// Run-time choices of the CUDA Llama.
struct llama_cuda_options {
  /// Arena shape to reserve up front; 0 = sized by the first batch (a larger one grows it).
  int batch_size = 0;
  int seq_len = 0;
  /// flash (trainkit's kernels, head sizes 64 and 128) or cudnn (cudnn_attention.hpp compiled
  /// into the program); naive is refused: its kernels have no GQA.
  cuda_attention attention = cuda_attention::flash;
  /// The same bits run to run: cuDNN's deterministic backward, no autotuned GEMM algorithm;
  /// flash (dQ atomics) is refused in this mode.
  bool deterministic = false;
  /// Time cuBLASLt's top algorithms per GEMM shape and keep the fastest (not in deterministic
  /// mode).
  bool gemm_autotune = true;

  friend bool operator==(const llama_cuda_options&, const llama_cuda_options&) = default;
};

/// A host model the CUDA model can copy its shape and weights from (llama_cpu, or anything with a
/// llama_config and float parameters in llama_parameter_layout order).
template <class M>
concept llama_host_weights = host_weights_for<M, llama_config>;

/// The Llama block for transformer_cuda (the cuda_block concept).
class llama_cuda_block {
  using bf16_t = kernels::bf16_t;

 public:
  using config_type = llama_config;
  using options_type = llama_cuda_options;
  using plan_type = llama_cuda_arena_plan;
  using tensor = llama_tensor;
  using pass = cuda_pass<plan_type, tensor>;
  static constexpr std::string_view model_name = "llama_cuda";
  static constexpr std::string_view config_name = "llama_config";

  static std::vector<tensor_info> parameter_layout(const llama_config& cfg) {
    return llama_parameter_layout(cfg);
  }
  static std::vector<gradient_bucket> gradient_buckets(const llama_config& cfg) {
    return llama_gradient_buckets(cfg);
  }
  /// llama_cpu's initialisation of `seed` (rounded to bf16 on upload).
  static std::vector<float> initial_parameters(const llama_config& cfg, std::uint64_t seed) {
    std::vector<float> p(cfg.num_parameters());
    detail::llama_initialize(cfg, seed, std::span<float>(p));
    return p;
  }
  /// A tied head is wte (lm_head is then absent from the layout).
  static tensor head(const llama_config& cfg) noexcept {
    return cfg.tied_embeddings ? tensor::wte : tensor::lm_head;
  }
  static int kv_heads(const llama_config& cfg) noexcept { return cfg.num_kv_heads; }
  /// Where each llama_tensor lives (the recipe's optional tensors move with the head's presence).
  static std::array<std::size_t, std::size_t(tensor::tensor_count)> tensor_offsets(
      const llama_config& cfg) {
    return llama_tensor_offsets(cfg);
  }
  /// The recipe's logit soft-cap (0 = off), applied in the classifier's cross-entropy.
  static float logit_cap(const llama_config& cfg) noexcept { return cfg.recipe.logit_cap; }
  /// The optimizer step of the next micro-steps: the recipe's windows grow with it.
  void set_step(std::int64_t step) noexcept { step_ = step; }

  // The shape the kernels can run, each refusal naming the llama_config field.
  static llama_config validated(const llama_config& cfg) {
    cfg.validate();
    auto fail = [](const char* field, const std::string& why) {
      throw config_error(std::string("llama_cuda: llama_config.") + field + " " + why);
    };
    if (cfg.channels % 8 != 0)
      fail("channels",
           std::to_string(cfg.channels) + " must be a multiple of 8 (16-byte vector accesses)");
    if (cfg.head_size() % 16 != 0)
      fail("channels", "/ num_heads = head size " + std::to_string(cfg.head_size()) +
                           " must be a multiple of 16 (rope.cuh rotates 8 pairs a thread)");
    if (cfg.qk_norm && cfg.head_size() > 256)
      fail("qk_norm",
           "needs head size at most 256 (head_rmsnorm), got " + std::to_string(cfg.head_size()));
    if (cfg.hidden_size % 8 != 0)
      fail("hidden_size", std::to_string(cfg.hidden_size) + " must be a multiple of 8");
    return cfg;  // the value width KV·hs is then a multiple of 16, as the value mix needs
  }

  // Checked before any device work, so a bad choice is reported on a machine without a GPU too.
  static llama_cuda_options checked_options(const llama_cuda_options& opt,
                                            const llama_config& cfg) {
    if (opt.attention == cuda_attention::naive)
      throw config_error(
          "llama_cuda_options.attention = naive: the naive attention kernels have no grouped "
          "queries; use flash or cudnn");
    check_attention_engine(opt.attention, cfg.head_size(), opt.deterministic, cfg.to_string(),
                           "llama_cuda_options.attention");
    return opt;
  }

  static llama_cuda_arena_plan plan(const llama_config& cfg, int B, int T,
                                    const llama_cuda_options& opt,
                                    std::size_t attention_workspace) {
    return plan_llama_cuda_arena(cfg, B, T, opt.attention == cuda_attention::flash,
                                 attention_workspace);
  }
  static cuda_memory_report memory(const llama_config& cfg, int B, int T,
                                   const llama_cuda_options& opt, std::size_t attention_workspace) {
    return llama_cuda_memory(cfg, B, T, opt.attention == cuda_attention::flash,
                             attention_workspace);
  }

  /// Uploads the RoPE table on `s` (ordered before the model's kernels).
  llama_cuda_block(const llama_config& cfg, const llama_cuda_options&, cudaStream_t s)
      : config_(cfg) {
    const detail::rope_table table(config_.max_seq_len, config_.head_size(), config_.rope_theta);
    rope_cos_ = trainkit::cuda::device_buffer<float>(table.cos.size());
    rope_sin_ = trainkit::cuda::device_buffer<float>(table.sin.size());
    trainkit::cuda::copy_to_device(rope_cos_.data(), std::span<const float>(table.cos), s);
    trainkit::cuda::copy_to_device(rope_sin_.data(), std::span<const float>(table.sin), s);
    rope_ = kernels::rope_device_table{rope_cos_.data(), rope_sin_.data(), table.T, table.half};
  }

  void reserve(int B, int T) {
    token_buckets_.reserve(std::size_t(B) * std::size_t(T), config_.vocab_size);
  }

  // The embedding (flags[0] raised for a bad input token), then layer 0's first RMSNorm.
  void embed(const pass& p, const std::int32_t* inputs) {
    const int C = config_.channels;
    inputs_ = inputs;  // the value embeddings look the tokens up again in the layers
    buckets_built_ = false;
    bf16_t* encoded = p.slot<bf16_t>(p.plan.encoded);
    kernels::encoder_forward(encoded, inputs, p.param(wte), nullptr, p.flags, p.B, p.T, C,
                             config_.vocab_size, p.stream);
    const layer_views v0 = layer(p, 0);
    kernels::rmsnorm_forward(nullptr, v0.ln1, v0.ln1_rstd, encoded, nullptr, p.param(ln1w),
                             p.rows(), C, config_.norm_eps, p.stream);
  }

  // Layer l from its ln1 on; its residual add is fused with the next RMSNorm (the next layer's
  // ln1, or the final one into plan.lnf).
  void forward_layer(const pass& p, int l) {
    const int C = config_.channels, L = config_.num_layers, H = config_.num_heads,
              KV = config_.num_kv_heads, hs = config_.head_size(), D = config_.qkv_rows(),
              R = config_.fc_rows(), F = config_.hidden_size, N = p.rows(), T = p.T;
    const float eps = config_.norm_eps;
    const cudaStream_t s = p.stream;
    bf16_t* proj = p.slot<bf16_t>(p.plan.proj);
    const layer_views v = layer(p, l);
    const bf16_t* x = input_of(p, l);  // (N, C)
    const std::size_t lc = std::size_t(l) * C;
    // q | k | v straight into the kept buffer; QK-norm and RoPE in place; attention reads it.
    p.linear_forward(v.qkvr, v.ln1, p.param(qkvw) + lc * D, N, C, D);
    if (config_.qk_norm) kernels::head_rmsnorm_forward(v.qkvr, v.qk_rstd, N, H + KV, hs, D, eps, s);
    kernels::rope_forward(v.qkvr, rope_, N, T, H, KV, hs, s);
    if (const int j = llama_ve_slot(config_, l); j >= 0)  // v ← λ₀·v + λ₁·E[token]
      kernels::value_mix_forward(v.qkvr + std::size_t(H + KV) * hs, D, ve_saved(p, j),
                                 ve_table(p, l, false), inputs_, N, config_.value_width(),
                                 config_.vocab_size, p.param(ve_lambdas) + 2 * j, s);
    p.attention_forward(v.atty, v.lse, v.qkvr, C, H, KV, window(l));
    p.linear_forward(proj, v.atty, p.param(attprojw) + lc * C, N, C, C);
    kernels::rmsnorm_forward(v.res2, v.ln2, v.ln2_rstd, x, proj, p.param(ln2w) + lc, N, C, eps,
                             s);  // res2 = x + proj, ln2 = RMSNorm(res2)
    p.linear_forward(v.fc, v.ln2, p.param(fcw) + lc * R, N, C, R);
    if (config_.mlp == llama_mlp::swiglu)
      kernels::swiglu_forward(v.fc_act, v.fc, N, F, s);
    else
      kernels::relu_squared_forward(v.fc_act, v.fc, std::int64_t(N) * F, s);
    p.linear_forward(proj, v.fc_act, p.param(fcprojw) + lc * F, N, F, C);
    if (l + 1 < L) {
      const layer_views next = layer(p, l + 1);
      kernels::rmsnorm_forward(v.res3, next.ln1, next.ln1_rstd, v.res2, proj,
                               p.param(ln1w) + lc + C, N, C, eps, s);
      if (const int i = unet_.weight_index(l + 1); i >= 0) {
        // U-net: block l + 1's input is res3 + w·(its encoder source's output), kept apart (the
        // source may be res3 itself); its first RMSNorm is taken again from that input.
        bf16_t* in = unet_in(p, i);
        TRAINKIT_CUDA_CHECK(cudaMemcpyAsync(in, v.res3, std::size_t(N) * C * sizeof(bf16_t),
                                            cudaMemcpyDeviceToDevice, s));
        kernels::skip_add_forward(in, layer(p, unet_.skip_source(l + 1)).res3, std::size_t(N) * C,
                                  p.param(unet_weights) + i, s);
        kernels::rmsnorm_forward(nullptr, next.ln1, next.ln1_rstd, in, nullptr,
                                 p.param(ln1w) + lc + C, N, C, eps, s);
      }
    } else {
      kernels::rmsnorm_forward(v.res3, p.slot<bf16_t>(p.plan.lnf), p.slot<float>(p.plan.lnf_rstd),
                               v.res2, proj, p.param(lnfw), N, C, eps, s);
    }
  }

  // The final RMSNorm's backward from ∂lnf (plan.dln) into the residual stream's gradient.
  void backward_final(const pass& p) {
    const int C = config_.channels, N = p.rows();
    bf16_t* dres = p.slot<bf16_t>(p.plan.dres);
    TRAINKIT_CUDA_CHECK(cudaMemsetAsync(dres, 0, std::size_t(N) * C * sizeof(bf16_t), p.stream));
    if (config_.recipe.value_embeddings > 0) build_buckets(p);  // the tables' gradients need them
    if (const int k = config_.unet_weights(); k > 0)
      TRAINKIT_CUDA_CHECK(
          cudaMemsetAsync(unet_dskip(p, 0), 0, std::size_t(k) * N * C * sizeof(bf16_t), p.stream));
    kernels::rmsnorm_backward(dres, p.grad(lnfw), p.slot<float>(p.plan.norm_partial),
                              p.slot<bf16_t>(p.plan.dln), layer(p, config_.num_layers - 1).res3,
                              p.param(lnfw), p.slot<float>(p.plan.lnf_rstd), N, C, p.stream);
  }

  void backward_layer(const pass& p, int l) {
    const int C = config_.channels, H = config_.num_heads, KV = config_.num_kv_heads,
              hs = config_.head_size(), D = config_.qkv_rows(), R = config_.fc_rows(),
              F = config_.hidden_size, N = p.rows(), T = p.T;
    const cudaStream_t s = p.stream;
    bf16_t* dres = p.slot<bf16_t>(p.plan.dres);
    bf16_t* dln = p.slot<bf16_t>(p.plan.dln);
    bf16_t* datty = p.slot<bf16_t>(p.plan.datty);
    bf16_t* dqkv = p.slot<bf16_t>(p.plan.dqkv);
    bf16_t* dfc = p.slot<bf16_t>(p.plan.dfc);
    bf16_t* dfc_act = p.slot<bf16_t>(p.plan.dfc_act);
    float* partial = p.slot<float>(p.plan.norm_partial);
    const layer_views v = layer(p, l);
    const bf16_t* x = input_of(p, l);
    const std::size_t lc = std::size_t(l) * C;
    // U-net: this block's output also fed a decoder block's input; that block's backward left
    // w·dx for it.
    if (const int i = unet_source_index(l); i >= 0)
      kernels::accumulate(dres, unet_dskip(p, i), std::int64_t(N) * C, s);
    // MLP: res3 = res2 + act(ln2 · fcwᵀ) · fcprojwᵀ
    p.linear_backward(dfc_act, p.grad(fcprojw) + lc * F, dres, v.fc_act, p.param(fcprojw) + lc * F,
                      N, F, C);
    if (config_.mlp == llama_mlp::swiglu)
      kernels::swiglu_backward(dfc, v.fc, dfc_act, N, F, s);
    else
      kernels::relu_squared_backward(dfc, v.fc, dfc_act, std::int64_t(N) * F, s);
    p.linear_backward(dln, p.grad(fcw) + lc * R, dfc, v.ln2, p.param(fcw) + lc * R, N, C, R);
    kernels::rmsnorm_backward(dres, p.grad(ln2w) + lc, partial, dln, v.res2, p.param(ln2w) + lc,
                              v.ln2_rstd, N, C, s);
    // Attention: res2 = x + attention(rope(qk_norm(ln1 · qkvwᵀ))) · attprojwᵀ
    p.linear_backward(datty, p.grad(attprojw) + lc * C, dres, v.atty, p.param(attprojw) + lc * C, N,
                      C, C);
    p.attention_backward(dqkv, datty, v.qkvr, v.atty, v.lse, C, H, KV, window(l));
    if (const int j = llama_ve_slot(config_, l); j >= 0) {
      // dv ← λ₀·dv; λ₁·dv summed per token into the table's gradient; dλ.
      const int W = config_.value_width();
      bf16_t* scaled = p.slot<bf16_t>(p.plan.ve_scaled);
      kernels::value_mix_backward(dqkv + std::size_t(H + KV) * hs, D, scaled,
                                  p.grad(ve_lambdas) + 2 * j, p.slot<float>(p.plan.recipe_partials),
                                  ve_saved(p, j), ve_table(p, l, false), inputs_, N, W,
                                  config_.vocab_size, p.param(ve_lambdas) + 2 * j, s);
      kernels::encoder_backward_buckets(ve_table(p, l, true), scaled,
                                        p.slot<std::int32_t>(p.plan.buckets), N, W, s);
    }
    // QK-norm's backward in the rotated frame, then the inverse rotation (llama_cpu's order:
    // the parameter-free RMSNorm commutes with the rotation).
    if (config_.qk_norm)
      kernels::head_rmsnorm_backward(dqkv, v.qkvr, v.qk_rstd, N, H + KV, hs, D, s);
    kernels::rope_backward(dqkv, rope_, N, T, H, KV, hs, s);
    p.linear_backward(dln, p.grad(qkvw) + lc * D, dqkv, v.ln1, p.param(qkvw) + lc * D, N, C, D);
    kernels::rmsnorm_backward(dres, p.grad(ln1w) + lc, partial, dln, x, p.param(ln1w) + lc,
                              v.ln1_rstd, N, C, s);
    // U-net: x = res3(l − 1) + w·res3(source): dres passes to res3(l − 1) as it is; the source
    // gets w·dres (added when its block's backward starts), w gets Σ dres·source.
    if (const int i = unet_.weight_index(l); i >= 0)
      kernels::skip_add_backward(
          unet_dskip(p, i), p.grad(unet_weights) + i, p.slot<float>(p.plan.recipe_partials), dres,
          layer(p, unet_.skip_source(l)).res3, std::size_t(N) * C, p.param(unet_weights) + i, s);
  }

  // Embedding: fp32 sums per token, one bf16 rounding per element (token_buckets.cuh).
  void backward_embed(const pass& p, const std::int32_t* inputs) {
    const int N = p.rows();
    inputs_ = inputs;
    if (!buckets_built_) build_buckets(p);
    kernels::encoder_backward_buckets(p.grad(wte), p.slot<bf16_t>(p.plan.dres),
                                      p.slot<std::int32_t>(p.plan.buckets), N, config_.channels,
                                      p.stream);
  }

 private:
  using enum llama_tensor;

  struct layer_views {
    bf16_t *ln1, *qkvr, *atty, *res2, *ln2, *fc, *fc_act, *res3;
    float *ln1_rstd, *qk_rstd, *lse, *ln2_rstd;
  };

  // Layer l's kept tensors for a batch of (B, T): llama_cuda_layer (llama/cuda_memory.hpp, tested
  // on the CPU: inside their slots, disjoint across layers).
  layer_views layer(const pass& p, int l) const {
    const llama_cuda_layer_slots ls = llama_cuda_layer(p.plan, config_, p.B, p.T, l);
    layer_views v;
    v.ln1 = p.slot<bf16_t>(ls.ln1);
    v.qkvr = p.slot<bf16_t>(ls.qkvr);
    v.atty = p.slot<bf16_t>(ls.atty);
    v.res2 = p.slot<bf16_t>(ls.res2);
    v.ln2 = p.slot<bf16_t>(ls.ln2);
    v.fc = p.slot<bf16_t>(ls.fc);
    v.fc_act = p.slot<bf16_t>(ls.fc_act);
    v.res3 = p.slot<bf16_t>(ls.res3);
    v.ln1_rstd = p.slot<float>(ls.ln1_rstd);
    v.qk_rstd = config_.qk_norm ? p.slot<float>(ls.qk_rstd) : nullptr;
    v.lse = p.slot<float>(ls.lse);
    v.ln2_rstd = p.slot<float>(ls.ln2_rstd);
    return v;
  }

  // Layer l's attention window at the current step: 0 (full causal, today's kernels) when the
  // recipe's windows are off or reach past any sequence.
  int window(int l) const noexcept {
    if (!config_.recipe.windows.on()) return 0;
    return config_.attention_window(l, step_);
  }

  // Layer l's input: the embedding for l = 0, else layer l-1's output.
  // A U-net decoder block's input is its skip-added copy.
  const bf16_t* input_of(const pass& p, int l) const {
    if (const int i = unet_.weight_index(l); i >= 0) return unet_in(p, i);
    return l == 0 ? p.slot<bf16_t>(p.plan.encoded) : layer(p, l - 1).res3;
  }

  // ---- the recipe's buffers ----
  bf16_t* ve_saved(const pass& p, int j) const {
    return p.slot<bf16_t>(llama_cuda_recipe_part(p.plan.ve_saved, std::size_t(p.rows()),
                                                 std::size_t(config_.value_width()), j));
  }
  bf16_t* unet_in(const pass& p, int i) const {
    return p.slot<bf16_t>(llama_cuda_recipe_part(p.plan.unet_in, std::size_t(p.rows()),
                                                 std::size_t(config_.channels), i));
  }
  bf16_t* unet_dskip(const pass& p, int i) const {
    return p.slot<bf16_t>(llama_cuda_recipe_part(p.plan.unet_dskip, std::size_t(p.rows()),
                                                 std::size_t(config_.channels), i));
  }
  // Layer l's value-embedding table (k, Vp, KV·hs): the parameter, or its gradient.
  bf16_t* ve_table(const pass& p, int l, bool grad) const {
    const std::size_t at = std::size_t(ve_plan_.table_of(l)) *
                           std::size_t(config_.padded_vocab_size) *
                           std::size_t(config_.value_width());
    return (grad ? p.grad(value_embeds) : p.param(value_embeds)) + at;
  }
  // The U-net weight index whose skip reads block l's output, or −1.
  int unet_source_index(int l) const noexcept {
    const int half = unet_.encoder_blocks();
    return config_.recipe.unet_skips && l < half ? half - 1 - l : -1;
  }
  void build_buckets(const pass& p) {
    token_buckets_.build(p.slot<std::int32_t>(p.plan.buckets), inputs_, p.rows(),
                         config_.vocab_size, p.stream);
    buckets_built_ = true;
  }

  llama_config config_;
  // set_step: the recipe's window schedule reads it; until set, its final windows (as llama_cpu).
  std::int64_t step_ = std::numeric_limits<std::int64_t>::max();
  // The recipe's maps (empty when off: no table, no skip).
  recipe::value_embedding_plan ve_plan_{config_.recipe.value_embeddings, config_.num_layers};
  recipe::unet_plan unet_{config_.recipe.unet_skips ? config_.num_layers : 0};
  const std::int32_t* inputs_ = nullptr;  // this micro-step's tokens (embed, backward_embed)
  bool buckets_built_ = false;            // this micro-step's token buckets are in plan.buckets
  trainkit::cuda::device_buffer<float> rope_cos_, rope_sin_;  // (max_T, hs/2)
  kernels::rope_device_table rope_;
  kernels::device_token_buckets token_buckets_;
};

/// The CUDA Llama: transformer_cuda with the Llama block.
class llama_cuda : public transformer_cuda<llama_cuda_block> {
 public:
  using transformer_cuda<llama_cuda_block>::transformer_cuda;
};

static_assert(model<llama_cuda>, "llama_cuda must satisfy trainkit::model::model");
static_assert(names_its_device<llama_cuda>, "llama_cuda reports its device for the MFU peak");

}  // namespace trainkit::model
