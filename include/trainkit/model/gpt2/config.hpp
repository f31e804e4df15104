// trainkit/model/gpt2/config.hpp — GPT-2 shape, presets, parameter count, FLOPs and the parameter
// layout every GPT-2 implementation in trainkit shares.
//
// The layout (names, shapes and order of the tensors in the flat parameter buffer) is llm.c's, so
// an llm.c model file is that buffer behind a 256-int32 header, and the CPU and CUDA models and
// the optimizers agree on one description. Per-layer tensors are stacked: "qkvw" is (L, 3C, C).
// FLOPs per token follow docs/architecture.md (PaLM appendix B): 6·N + 12·L·C·T, N without the
// position embedding.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/model/transformer/layout.hpp"

namespace trainkit::model {

/// Shape of a GPT-2 model. Layer count, heads and width have no sensible default: pick a preset.
struct gpt2_config {
  int max_seq_len = 1024;         // maxT: rows of the position embedding
  int vocab_size = 50257;         // V: tokens the softmax ranges over
  int padded_vocab_size = 50304;  // Vp: rows of wte, V rounded up for aligned GEMMs
  int num_layers = 0;             // L
  int num_heads = 0;              // H
  int channels = 0;               // C

  friend bool operator==(const gpt2_config&, const gpt2_config&) = default;

  /// "L=12 H=12 C=768 V=50257 Vp=50304 maxT=1024".
  std::string to_string() const {
    return "L=" + std::to_string(num_layers) + " H=" + std::to_string(num_heads) +
           " C=" + std::to_string(channels) + " V=" + std::to_string(vocab_size) +
           " Vp=" + std::to_string(padded_vocab_size) + " maxT=" + std::to_string(max_seq_len);
  }

  /// d2, d6, d12, d24, d36, d48 with GPT-2's vocabulary and T up to 1024.
  static gpt2_config preset(std::string_view name) {
    struct entry {
      std::string_view name;
      int layers, heads, channels;
    };
    static constexpr std::array<entry, 6> presets{{{"d2", 2, 2, 128},
                                                   {"d6", 6, 6, 384},
                                                   {"d12", 12, 12, 768},
                                                   {"d24", 24, 16, 1024},
                                                   {"d36", 36, 20, 1280},
                                                   {"d48", 48, 25, 1600}}};
    std::string valid;
    for (const auto& p : presets) {
      if (p.name == name) {
        gpt2_config c;
        c.num_layers = p.layers;
        c.num_heads = p.heads;
        c.channels = p.channels;
        return c;
      }
      valid += (valid.empty() ? "" : ", ") + std::string(p.name);
    }
    throw config_error("unknown GPT-2 preset '" + std::string(name) + "' (valid: " + valid + ")");
  }

  /// Throws config_error naming the first field that makes the shape impossible.
  void validate() const {
    auto positive = [](const char* field, int v) {
      if (v <= 0)
        throw config_error(std::string("gpt2_config.") + field + " must be positive, got " +
                           std::to_string(v));
    };
    positive("max_seq_len", max_seq_len);
    positive("vocab_size", vocab_size);
    positive("padded_vocab_size", padded_vocab_size);
    positive("num_layers", num_layers);
    positive("num_heads", num_heads);
    positive("channels", channels);
    if (padded_vocab_size < vocab_size)
      throw config_error("gpt2_config.padded_vocab_size " + std::to_string(padded_vocab_size) +
                         " is smaller than vocab_size " + std::to_string(vocab_size));
    if (padded_vocab_size % 128 != 0)
      throw config_error("gpt2_config.padded_vocab_size " + std::to_string(padded_vocab_size) +
                         " is not a multiple of 128");
    if (channels % num_heads != 0)
      throw config_error("gpt2_config.channels " + std::to_string(channels) +
                         " is not divisible by num_heads " + std::to_string(num_heads));
  }

  /// Elements of every parameter tensor, the padded wte rows and wpe included.
  std::size_t num_parameters() const {
    const std::size_t C = std::size_t(channels), L = std::size_t(num_layers);
    const std::size_t per_layer = 2 * C                // ln1w, ln1b
                                  + 3 * C * C + 3 * C  // qkvw, qkvb
                                  + C * C + C          // attprojw, attprojb
                                  + 2 * C              // ln2w, ln2b
                                  + 4 * C * C + 4 * C  // fcw, fcb
                                  + 4 * C * C + C;     // fcprojw, fcprojb
    return std::size_t(padded_vocab_size) * C + std::size_t(max_seq_len) * C + L * per_layer +
           2 * C;
  }

  /// Training FLOPs per token at sequence length T: 6·N + 12·L·C·T, N excluding wpe.
  double flops_per_token(int T) const {
    const double n = double(num_parameters()) - double(max_seq_len) * channels;
    return 6.0 * n + 12.0 * double(num_layers) * channels * T;
  }
};

/// Indices of the GPT-2 parameter tensors in llm.c's order: position i of gpt2_parameter_layout.
/// Both models index their offset tables with it (`using enum gpt2_tensor;` inside the class).
enum class gpt2_tensor : std::size_t {
  wte,
  wpe,
  ln1w,
  ln1b,
  qkvw,
  qkvb,
  attprojw,
  attprojb,
  ln2w,
  ln2b,
  fcw,
  fcb,
  fcprojw,
  fcprojb,
  lnfw,
  lnfb,
  tensor_count
};

/// The tensors of the flat parameter buffer in llm.c's order, offsets packed without gaps, each
/// with its role: wte and wpe embeddings, qkvw/attprojw/fcw/fcprojw matrices, their biases, and
/// the LayerNorm gains and shifts as norm.
inline std::vector<tensor_info> gpt2_parameter_layout(const gpt2_config& cfg) {
  const std::int64_t Vp = cfg.padded_vocab_size, maxT = cfg.max_seq_len, L = cfg.num_layers,
                     C = cfg.channels;
  layout_builder b;
  b.add("wte", {Vp, C}, tensor_role::embedding);
  b.add("wpe", {maxT, C}, tensor_role::embedding);
  b.add("ln1w", {L, C}, tensor_role::norm);
  b.add("ln1b", {L, C}, tensor_role::norm);
  b.add("qkvw", {L, 3 * C, C}, tensor_role::matrix, {C, C, C});  // q, k, v fused
  b.add("qkvb", {L, 3 * C}, tensor_role::bias);
  b.add("attprojw", {L, C, C}, tensor_role::matrix);
  b.add("attprojb", {L, C}, tensor_role::bias);
  b.add("ln2w", {L, C}, tensor_role::norm);
  b.add("ln2b", {L, C}, tensor_role::norm);
  b.add("fcw", {L, 4 * C, C}, tensor_role::matrix);
  b.add("fcb", {L, 4 * C}, tensor_role::bias);
  b.add("fcprojw", {L, C, 4 * C}, tensor_role::matrix);
  b.add("fcprojb", {L, C}, tensor_role::bias);
  b.add("lnfw", {C}, tensor_role::norm);
  b.add("lnfb", {C}, tensor_role::norm);
  // One entry per gpt2_tensor, in the same order (the models index offsets with it).
  static_assert(std::size_t(gpt2_tensor::tensor_count) == 16);
  return std::move(b).take();
}

/// GPT-2's gradient buckets in the order backward finishes them (core/step_protocol.hpp): the
/// final LayerNorm, then layer L-1 down to layer 0 (one range in each of the 12 per-layer tensors),
/// then the embeddings (wte also takes the LM head's gradient, so it is final only after the
/// encoder's backward). Both GPT-2 models publish bucket `gpt2_layer_bucket(cfg, l)` right after
/// layer l's backward.
inline std::vector<gradient_bucket> gpt2_gradient_buckets(const gpt2_config& cfg) {
  using enum gpt2_tensor;
  auto i = [](gpt2_tensor t) { return std::size_t(t); };
  return transformer_gradient_buckets(gpt2_parameter_layout(cfg), cfg.num_layers, "lnf",
                                      {i(lnfw), i(lnfb)}, i(ln1w), i(fcprojb), {i(wte), i(wpe)});
}

/// Index into gpt2_gradient_buckets of layer l's bucket.
inline std::size_t gpt2_layer_bucket(const gpt2_config& cfg, int l) noexcept {
  return transformer_layer_bucket(cfg.num_layers, l);
}

/// Index into gpt2_gradient_buckets of the embeddings' bucket (the last one published).
inline std::size_t gpt2_embedding_bucket(const gpt2_config& cfg) noexcept {
  return transformer_embedding_bucket(cfg.num_layers);
}

}  // namespace trainkit::model
