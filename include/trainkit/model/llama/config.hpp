// trainkit/model/llama/config.hpp — the Llama-style family's shape, presets, parameter count,
// FLOPs, parameter layout (with roles) and gradient buckets, shared by every implementation of the
// family.
//
// The family is what Llama 3, nanochat and modded-nanogpt train: token embedding (no position
// embedding), pre-norm blocks with RMSNorm, causal attention with rotary position embeddings
// (Hugging Face's rotate-half layout) and grouped-query attention (num_kv_heads ≤ num_heads), an
// MLP that is SwiGLU (silu(gate)·up, Llama) or ReLU² (nanochat, modded-nanogpt), no biases, a
// final RMSNorm and an output head that is untied (Llama's lm_head, role `head`) or tied to the
// embedding (role `embedding`, as GPT-2's wte). An optional parameter-free QK-norm (RMSNorm of
// each query and key head before RoPE; nanochat) is a switch.
//
// The layout follows GPT-2's (gpt2/config.hpp): per-layer tensors are stacked (L, ...),
// tensor-major, so one layer's gradients are one range in each per-layer tensor. q, k and v are
// fused in one projection "qkvw" (L, (H + 2·KV)·hs, C) whose rows are declared as parts {H·hs,
// KV·hs, KV·hs}; SwiGLU's gate and up projections are fused in "fcw" (L, 2F, C), parts {F, F}.
//
// FLOPs per token adapt docs/architecture.md's 6·N + 12·L·C·T: the attention term is unchanged by
// GQA (scores and the weighted sum run over all H query heads: 12·L·H·hs·T = 12·L·C·T), and N
// leaves out the input embedding when the head is untied, for the reason GPT-2's N leaves out wpe:
// a lookup is not a matrix product. A tied table is counted once (it is the head's matrix).
//
// The speedrun recipe's model parts (issue 38, docs/recipes.md) are `llama_config::recipe`
// (llama_recipe), each off by default; off, the shape, layout, buckets, parameter count and FLOPs
// are today's. Value embeddings and U-net skips add tensors after the head (value_embeds,
// ve_lambdas, unet_weights; absent when off), whose gradients join the last bucket ("embeddings":
// all of them are final only once the whole backward has run). Because a tied model has no
// lm_head, a tensor's position in the layout is no longer always its llama_tensor index:
// llama_tensor_offsets(cfg) maps the enum to offsets for every model of the family.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/model/recipe/window_schedule.hpp"
#include "trainkit/model/transformer/layout.hpp"

namespace trainkit::model {

/// The MLP's nonlinearity.
enum class llama_mlp : std::uint8_t {
  swiglu,        // silu(x·gateᵀ) ⊙ (x·upᵀ), then ·downᵀ (Llama); fcw holds gate and up
  relu_squared,  // relu(x·fcᵀ)², then ·projᵀ (nanochat, modded-nanogpt)
};

constexpr std::string_view llama_mlp_name(llama_mlp m) noexcept {
  return m == llama_mlp::swiglu ? "swiglu" : "relu2";
}

/// The speedrun recipe's model parts (docs/recipes.md says where each default comes from); every
/// one is off by default, and off computes today's numbers bit for bit.
struct llama_recipe {
  /// Value-embedding tables (0 = off): table i is added into the attention values of layer i and
  /// of layer L − k + i, v ← λ₀·v + λ₁·E_i[token] with a learned (λ₀, λ₁) per such layer
  /// (model/recipe/value_embeddings.hpp). At most L/2.
  int value_embeddings = 0;
  /// U-net skips: the output of encoder block i (i < L/2) is added, times a learned scalar, to the
  /// input of block L − 1 − i (model/recipe/unet_skips.hpp). Needs L ≥ 2.
  bool unet_skips = false;
  /// Logit soft-cap (0 = off): the loss and the sampled logits are of cap·tanh(logits / cap)
  /// (model/recipe/softcap_crossentropy.hpp).
  float logit_cap = 0.0f;
  /// Zero-initialised attention and MLP output projections and, untied, lm_head (an init option:
  /// model/recipe/zero_init.hpp; the other tensors keep their draws).
  bool zero_init_projections = false;
  /// Sliding-window causal attention per layer and step (short_window 0 = off).
  recipe::window_schedule windows;

  friend bool operator==(const llama_recipe&, const llama_recipe&) = default;

  /// Whether any part is on.
  bool on() const noexcept {
    return value_embeddings > 0 || unet_skips || logit_cap > 0.0f || zero_init_projections ||
           windows.on();
  }
};

/// Shape of a Llama-style model. Layers, heads and width have no sensible default: pick a preset.
struct llama_config {
  int max_seq_len = 1024;         // maxT: longest sequence (rows of the RoPE table)
  int vocab_size = 50257;         // V: tokens the softmax ranges over (≤ 65536 for uint16 shards)
  int padded_vocab_size = 50304;  // Vp: rows of wte and lm_head, V rounded up for aligned GEMMs
  int num_layers = 0;             // L
  int num_heads = 0;              // H: query heads
  int num_kv_heads = 0;           // KV: key/value heads (GQA); divides H; H = multi-head attention
  int channels = 0;               // C = H·hs
  int hidden_size = 0;            // F: MLP hidden width
  float rope_theta = 10000.0f;    // RoPE base θ
  float norm_eps = 1e-5f;         // RMSNorm ε, inside the root: x / √(mean(x²) + ε)
  bool tied_embeddings = false;   // lm_head is wte (no lm_head tensor)
  bool qk_norm = false;           // parameter-free RMSNorm of each q and k head before RoPE
  llama_mlp mlp = llama_mlp::swiglu;
  llama_recipe recipe;  // the speedrun recipe's parts, all off by default

  friend bool operator==(const llama_config&, const llama_config&) = default;

  int head_size() const noexcept { return num_heads > 0 ? channels / num_heads : 0; }
  /// Rows of the fused q|k|v projection: (H + 2·KV)·hs.
  int qkv_rows() const noexcept { return (num_heads + 2 * num_kv_heads) * head_size(); }
  /// Rows of the MLP's input projection: 2F for SwiGLU (gate | up), F for ReLU².
  int fc_rows() const noexcept { return mlp == llama_mlp::swiglu ? 2 * hidden_size : hidden_size; }
  /// Width of a value-embedding row: the value part of the fused projection, KV·hs.
  int value_width() const noexcept { return num_kv_heads * head_size(); }
  /// U-net skip weights: one per mirrored pair, L/2 (0 when off).
  int unet_weights() const noexcept { return recipe.unet_skips ? num_layers / 2 : 0; }
  /// Layers whose values get a value embedding: 2k (0 when off).
  int value_embedding_layers() const noexcept { return 2 * recipe.value_embeddings; }
  /// The attention window of `layer` at optimizer step `step`; ≥ any T when windows are off.
  int attention_window(int layer, std::int64_t step) const noexcept {
    return recipe.windows.window(layer, num_layers, step);
  }

  /// "L=2 H=2 KV=1 C=128 F=384 V=50257 Vp=50304 maxT=1024 theta=10000 eps=1e-05 mlp=swiglu
  /// untied" (qk_norm and each recipe part appended when on).
  std::string to_string() const {
    auto num = [](float x) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", double(x));
      return std::string(buf);
    };
    return "L=" + std::to_string(num_layers) + " H=" + std::to_string(num_heads) +
           " KV=" + std::to_string(num_kv_heads) + " C=" + std::to_string(channels) +
           " F=" + std::to_string(hidden_size) + " V=" + std::to_string(vocab_size) +
           " Vp=" + std::to_string(padded_vocab_size) + " maxT=" + std::to_string(max_seq_len) +
           " theta=" + num(rope_theta) + " eps=" + num(norm_eps) +
           " mlp=" + std::string(llama_mlp_name(mlp)) + (tied_embeddings ? " tied" : " untied") +
           (qk_norm ? " qk_norm" : "") + recipe_string(num);
  }

  /// " value_embeds=3 unet logit_cap=30 zero_init windows=128/1024" for the recipe parts that are
  /// on (empty when none is).
  template <class Num>
  std::string recipe_string(Num num) const {
    const llama_recipe& r = recipe;
    std::string out;
    if (r.value_embeddings > 0) out += " value_embeds=" + std::to_string(r.value_embeddings);
    if (r.unet_skips) out += " unet";
    if (r.logit_cap > 0.0f) out += " logit_cap=" + num(r.logit_cap);
    if (r.zero_init_projections) out += " zero_init";
    if (r.windows.on()) {
      const recipe::window_schedule& w = r.windows;
      out += " windows=" + std::to_string(w.short_window) + "/" + std::to_string(w.long_window);
      if (!w.pattern.empty()) out += ":" + w.pattern;
      if (w.grow_steps > 0)
        out += " from " + std::to_string(w.start) + " over " + std::to_string(w.grow_steps);
    }
    return out;
  }

  /// SwiGLU's hidden width for width C: 8C/3 (the parameter count of a 4C GELU MLP), rounded up
  /// to a multiple of 64 (Llama rounds to 256 at its sizes; 64 keeps d2 small).
  static int swiglu_hidden_size(int channels) noexcept { return (8 * channels / 3 + 63) / 64 * 64; }

  /// d2, d6, d12, d20, d24 with GPT-2's vocabulary (trainkit's tokenizer) and T up to 1024.
  /// Width 64·depth as nanochat; head size 64 up to d12 (H = C/64), 128 from d20 (nanochat's
  /// choice: fewer, wider heads at width ≥ 1280); KV = H/2 (GQA with groups of 2 in every preset,
  /// so the grouped path is the one that runs; d2's single KV head serves both query heads);
  /// SwiGLU of width swiglu_hidden_size(C); untied head; θ = 10000; ε = 1e-5.
  static llama_config preset(std::string_view name) {
    struct entry {
      std::string_view name;
      int layers, heads, kv_heads, channels;
    };
    static constexpr std::array<entry, 5> presets{{{"d2", 2, 2, 1, 128},
                                                   {"d6", 6, 6, 3, 384},
                                                   {"d12", 12, 12, 6, 768},
                                                   {"d20", 20, 10, 5, 1280},
                                                   {"d24", 24, 12, 6, 1536}}};
    std::string valid;
    for (const auto& p : presets) {
      if (p.name == name) {
        llama_config c;
        c.num_layers = p.layers;
        c.num_heads = p.heads;
        c.num_kv_heads = p.kv_heads;
        c.channels = p.channels;
        c.hidden_size = swiglu_hidden_size(p.channels);
        return c;
      }
      valid += (valid.empty() ? "" : ", ") + std::string(p.name);
    }
    throw config_error("unknown Llama preset '" + std::string(name) + "' (valid: " + valid + ")");
  }

  /// Throws config_error naming the first field (`llama_config.<field>`) that makes the shape
  /// impossible.
  void validate() const {
    auto fail = [](const char* field, const std::string& why) {
      throw config_error(std::string("llama_config.") + field + " " + why);
    };
    auto positive = [&](const char* field, int v) {
      if (v <= 0) fail(field, "must be positive, got " + std::to_string(v));
    };
    positive("max_seq_len", max_seq_len);
    positive("vocab_size", vocab_size);
    positive("padded_vocab_size", padded_vocab_size);
    positive("num_layers", num_layers);
    positive("num_heads", num_heads);
    positive("num_kv_heads", num_kv_heads);
    positive("channels", channels);
    positive("hidden_size", hidden_size);
    if (padded_vocab_size < vocab_size)
      fail("padded_vocab_size", std::to_string(padded_vocab_size) + " is smaller than vocab_size " +
                                    std::to_string(vocab_size));
    if (padded_vocab_size % 128 != 0)
      fail("padded_vocab_size", std::to_string(padded_vocab_size) + " is not a multiple of 128");
    if (channels % num_heads != 0)
      fail("channels", std::to_string(channels) + " is not divisible by num_heads " +
                           std::to_string(num_heads));
    if (head_size() % 2 != 0)
      fail("channels", "/ num_heads = head size " + std::to_string(head_size()) +
                           " must be even (RoPE rotates pairs)");
    if (num_kv_heads > num_heads || num_heads % num_kv_heads != 0)
      fail("num_kv_heads",
           std::to_string(num_kv_heads) + " must divide num_heads " + std::to_string(num_heads));
    if (!(rope_theta > 1.0f) || !(rope_theta < 1e30f))
      fail("rope_theta", "must be finite and > 1, got " + std::to_string(rope_theta));
    if (!(norm_eps > 0.0f) || !(norm_eps < 1.0f))
      fail("norm_eps", "must be in (0, 1), got " + std::to_string(norm_eps));
    if (mlp != llama_mlp::swiglu && mlp != llama_mlp::relu_squared)
      fail("mlp", "is not swiglu or relu2: " + std::to_string(int(mlp)));
    const llama_recipe& r = recipe;
    if (r.value_embeddings < 0 || 2 * r.value_embeddings > num_layers)
      fail("recipe.value_embeddings", "must be in [0, num_layers/2] (" +
                                          std::to_string(num_layers) + " layers), got " +
                                          std::to_string(r.value_embeddings));
    if (r.unet_skips && num_layers < 2)
      fail("recipe.unet_skips", "needs at least 2 layers, got " + std::to_string(num_layers));
    if (!(r.logit_cap >= 0.0f) || !(r.logit_cap < 1e30f))
      fail("recipe.logit_cap",
           "must be finite and >= 0 (0 = off), got " + std::to_string(r.logit_cap));
    r.windows.validate("llama_config.recipe.windows");
  }

  /// Elements of every parameter tensor, padded vocabulary rows included.
  std::size_t num_parameters() const {
    const std::size_t C = std::size_t(channels), L = std::size_t(num_layers);
    const std::size_t per_layer = C                                // ln1w
                                  + std::size_t(qkv_rows()) * C    // qkvw
                                  + C * C                          // attprojw
                                  + C                              // ln2w
                                  + std::size_t(fc_rows()) * C     // fcw
                                  + C * std::size_t(hidden_size);  // fcprojw
    const std::size_t table = std::size_t(padded_vocab_size) * C;
    return table + L * per_layer + C + (tied_embeddings ? 0 : table) + recipe_parameters();
  }

  /// Elements of the recipe's tensors: the value-embedding tables (k, Vp, KV·hs), their mixing
  /// weights (2k, 2) and the U-net weights (L/2); 0 when those parts are off.
  std::size_t recipe_parameters() const {
    return value_embedding_table_elements() + 2 * std::size_t(value_embedding_layers()) +
           std::size_t(unet_weights());
  }
  std::size_t value_embedding_table_elements() const {
    return std::size_t(recipe.value_embeddings) * std::size_t(padded_vocab_size) *
           std::size_t(value_width());
  }

  /// Training FLOPs per token at sequence length T: 6·N + 12·L·C·T, N excluding the input
  /// embedding of an untied model and the value-embedding tables (lookups; file comment).
  double flops_per_token(int T) const {
    const double table = double(padded_vocab_size) * channels;
    const double n = double(num_parameters()) - (tied_embeddings ? 0.0 : table) -
                     double(value_embedding_table_elements());
    return 6.0 * n + 12.0 * double(num_layers) * channels * T;
  }
};

/// The Llama parameter tensors. Up to lm_head, index i is position i of llama_parameter_layout
/// (lm_head is absent from a tied model's layout); the recipe's tensors follow, each present only
/// when its part is on, so their positions vary: llama_tensor_offsets maps every index.
enum class llama_tensor : std::size_t {
  wte,           // (Vp, C) token embedding
  ln1w,          // (L, C) attention RMSNorm gain
  qkvw,          // (L, (H+2KV)·hs, C) q | k | v
  attprojw,      // (L, C, C) attention output projection
  ln2w,          // (L, C) MLP RMSNorm gain
  fcw,           // (L, 2F, C) gate | up, or (L, F, C) for ReLU²
  fcprojw,       // (L, C, F) MLP down projection
  lnfw,          // (C) final RMSNorm gain
  lm_head,       // (Vp, C) untied output head
  value_embeds,  // (k, Vp, KV·hs) value-embedding tables (recipe.value_embeddings = k > 0)
  ve_lambdas,    // (2k, 2) (λ₀, λ₁) of each layer with a value embedding, in layer order
  unet_weights,  // (L/2) U-net skip weights (recipe.unet_skips), decoder block order
  tensor_count
};

/// The tensors of the flat parameter buffer, in llama_tensor order, packed without gaps.
inline std::vector<tensor_info> llama_parameter_layout(const llama_config& cfg) {
  const std::int64_t Vp = cfg.padded_vocab_size, L = cfg.num_layers, C = cfg.channels,
                     F = cfg.hidden_size, hs = cfg.head_size();
  layout_builder b;
  b.add("wte", {Vp, C}, tensor_role::embedding);
  b.add("ln1w", {L, C}, tensor_role::norm);
  b.add("qkvw", {L, cfg.qkv_rows(), C}, tensor_role::matrix,
        {cfg.num_heads * hs, cfg.num_kv_heads * hs, cfg.num_kv_heads * hs});  // q, k, v fused
  b.add("attprojw", {L, C, C}, tensor_role::matrix);
  b.add("ln2w", {L, C}, tensor_role::norm);
  if (cfg.mlp == llama_mlp::swiglu)
    b.add("fcw", {L, 2 * F, C}, tensor_role::matrix, {F, F});  // gate, up fused
  else
    b.add("fcw", {L, F, C}, tensor_role::matrix);
  b.add("fcprojw", {L, C, F}, tensor_role::matrix);
  b.add("lnfw", {C}, tensor_role::norm);
  if (!cfg.tied_embeddings) b.add("lm_head", {Vp, C}, tensor_role::head);
  // The recipe's tensors: tables are lookups (role embedding: AdamW, the embedding rate); the
  // mixing and skip weights are scalars (role norm: AdamW, no decay, the scalar rate; never Muon).
  if (const int k = cfg.recipe.value_embeddings; k > 0) {
    b.add("value_embeds", {k, Vp, cfg.value_width()}, tensor_role::embedding);
    b.add("ve_lambdas", {2 * k, 2}, tensor_role::norm);
  }
  if (cfg.recipe.unet_skips) b.add("unet_weights", {cfg.unet_weights()}, tensor_role::norm);
  static_assert(std::size_t(llama_tensor::tensor_count) == 12);
  return std::move(b).take();
}

/// The offset llama_tensor_offsets gives a tensor the layout lacks.
inline constexpr std::size_t llama_absent_tensor = ~std::size_t(0);

/// Offset of each llama_tensor in the flat buffer (llama_tensor order); absent tensors (lm_head
/// of a tied model, recipe parts that are off) get llama_absent_tensor.
inline std::array<std::size_t, std::size_t(llama_tensor::tensor_count)> llama_tensor_offsets(
    const llama_config& cfg) {
  std::array<std::size_t, std::size_t(llama_tensor::tensor_count)> out;
  out.fill(llama_absent_tensor);
  const auto layout = llama_parameter_layout(cfg);
  // Positions up to lm_head are the enum's; the rest by name.
  std::size_t i = 0;
  for (; i < layout.size() && i <= std::size_t(llama_tensor::lnfw); ++i) out[i] = layout[i].offset;
  for (; i < layout.size(); ++i) {
    const std::string& n = layout[i].name;
    const llama_tensor t = n == "lm_head"        ? llama_tensor::lm_head
                           : n == "value_embeds" ? llama_tensor::value_embeds
                           : n == "ve_lambdas"   ? llama_tensor::ve_lambdas
                                                 : llama_tensor::unet_weights;
    out[std::size_t(t)] = layout[i].offset;
  }
  return out;
}

/// The index into ve_lambdas (pairs) of `layer`'s value embedding, or −1 for a layer without one:
/// layers 0 … k−1 are pairs 0 … k−1, layers L−k … L−1 pairs k … 2k−1.
inline int llama_ve_slot(const llama_config& cfg, int layer) noexcept {
  const int k = cfg.recipe.value_embeddings, L = cfg.num_layers;
  if (layer < k) return layer;
  if (layer >= L - k) return k + layer - (L - k);
  return -1;
}

/// The Llama gradient buckets in the order backward finishes them: "head" (the final RMSNorm and,
/// untied, lm_head: both final once the classifier and lnf backward ran), then layer L-1 down to
/// layer 0 (one range in each of the 6 per-layer tensors), then "embeddings" (wte; tied, it also
/// holds the head's gradient).
inline std::vector<gradient_bucket> llama_gradient_buckets(const llama_config& cfg) {
  using enum llama_tensor;
  auto i = [](llama_tensor t) { return std::size_t(t); };
  std::vector<std::size_t> head{i(lnfw)};
  if (!cfg.tied_embeddings) head.push_back(i(lm_head));
  const auto layout = llama_parameter_layout(cfg);
  auto out = transformer_gradient_buckets(layout, cfg.num_layers, "head", head, i(ln1w), i(fcprojw),
                                          {i(wte)});
  // The recipe's tensors (after the head in the layout) join the last bucket: the tables and the
  // mixing weights are final after layer 0's backward, the skip weights after the decoder half's.
  const std::size_t first_recipe = std::size_t(i(lnfw)) + (cfg.tied_embeddings ? 1 : 2);
  for (std::size_t t = first_recipe; t < layout.size(); ++t)
    out.back().ranges.push_back({layout[t].offset, layout[t].numel()});
  return out;
}

/// Index into llama_gradient_buckets of layer l's bucket.
inline std::size_t llama_layer_bucket(const llama_config& cfg, int l) noexcept {
  return transformer_layer_bucket(cfg.num_layers, l);
}

/// Index into llama_gradient_buckets of the embeddings' bucket (the last one published).
inline std::size_t llama_embedding_bucket(const llama_config& cfg) noexcept {
  return transformer_embedding_bucket(cfg.num_layers);
}

}  // namespace trainkit::model
