// trainkit/model/gpt2/hf.hpp — Hugging Face GPT2LMHeadModel folders: export and import.
//
// A folder `AutoModelForCausalLM.from_pretrained(DIR)` and `AutoTokenizer.from_pretrained(DIR)`
// load: config.json (model_type gpt2), model.safetensors, and the tokenizer files vocab.json and
// merges.txt (byte-for-byte GPT-2's encoder.json and vocab.bpe) with tokenizer_config.json.
// The mapping from trainkit's (llm.c's) parameter layout (docs/formats.md):
//   - HF's attention and MLP weights are Conv1D, stored (in, out): the transpose of llm.c's
//     (out, in) qkvw, attprojw, fcw and fcprojw; per layer, so the stacked (L, ...) tensors split
//     into transformer.h.{l}.*;
//   - HF's wte has the unpadded vocabulary V rows (trainkit pads to Vp; the padded rows are not
//     tokens and are written nowhere; import sets them to zero);
//   - lm_head is tied to wte and not stored (an untied lm_head is refused on import).
// Export writes fp32 (bit-exact round trip) or bf16; import reads F32, BF16 or F16. The plumbing
// (safetensors, config.json errors, tokenizer files) is every family's: transformer/hf_common.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/io/safetensors_read.hpp"
#include "trainkit/model/gpt2/config.hpp"
#include "trainkit/model/gpt2/cpu.hpp"
#include "trainkit/model/transformer/hf_common.hpp"

namespace trainkit::model {

/// An entry of GPT-2's Hugging Face map (transformer/hf_common.hpp).
using hf_gpt2_tensor = hf_tensor;

/// The Hugging Face tensors of a GPT-2 of shape `cfg`, in HF's order (wte, wpe, h.0 ..., ln_f).
inline std::vector<hf_gpt2_tensor> hf_gpt2_layout(const gpt2_config& cfg) {
  const auto layout = gpt2_parameter_layout(cfg);
  auto at = [&](gpt2_tensor t) { return layout[std::size_t(t)].offset; };
  const std::int64_t C = cfg.channels, V = cfg.vocab_size;
  std::vector<hf_gpt2_tensor> out;
  out.push_back({"transformer.wte.weight", {V, C}, at(gpt2_tensor::wte), false});
  out.push_back({"transformer.wpe.weight", {cfg.max_seq_len, C}, at(gpt2_tensor::wpe), false});
  for (int l = 0; l < cfg.num_layers; ++l) {
    const std::string h = "transformer.h." + std::to_string(l) + ".";
    const std::size_t L = std::size_t(l);
    auto vec = [&](const std::string& name, gpt2_tensor t, std::int64_t n) {
      out.push_back({h + name, {n}, at(t) + L * std::size_t(n), false});
    };
    // Conv1D weight (in, out) over trainkit's (out, in) block of the stacked tensor.
    auto conv = [&](const std::string& name, gpt2_tensor t, std::int64_t in, std::int64_t o) {
      out.push_back({h + name, {in, o}, at(t) + L * std::size_t(in * o), true});
    };
    vec("ln_1.weight", gpt2_tensor::ln1w, C);
    vec("ln_1.bias", gpt2_tensor::ln1b, C);
    conv("attn.c_attn.weight", gpt2_tensor::qkvw, C, 3 * C);
    vec("attn.c_attn.bias", gpt2_tensor::qkvb, 3 * C);
    conv("attn.c_proj.weight", gpt2_tensor::attprojw, C, C);
    vec("attn.c_proj.bias", gpt2_tensor::attprojb, C);
    vec("ln_2.weight", gpt2_tensor::ln2w, C);
    vec("ln_2.bias", gpt2_tensor::ln2b, C);
    conv("mlp.c_fc.weight", gpt2_tensor::fcw, C, 4 * C);
    vec("mlp.c_fc.bias", gpt2_tensor::fcb, 4 * C);
    conv("mlp.c_proj.weight", gpt2_tensor::fcprojw, 4 * C, C);
    vec("mlp.c_proj.bias", gpt2_tensor::fcprojb, C);
  }
  out.push_back({"transformer.ln_f.weight", {C}, at(gpt2_tensor::lnfw), false});
  out.push_back({"transformer.ln_f.bias", {C}, at(gpt2_tensor::lnfb), false});
  return out;
}

/// config.json for GPT2LMHeadModel of shape `cfg` (GPT-2's fixed choices spelled out);
/// bos/eos are GPT-2's <|endoftext|> (50256) only when the vocabulary has that token.
inline nlohmann::json hf_gpt2_config_json(const gpt2_config& cfg, io::safetensors_dtype dtype) {
  const nlohmann::json eot = cfg.vocab_size > 50256 ? nlohmann::json(50256) : nlohmann::json();
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", cfg.vocab_size},
          {"n_positions", cfg.max_seq_len},
          {"n_ctx", cfg.max_seq_len},
          {"n_embd", cfg.channels},
          {"n_layer", cfg.num_layers},
          {"n_head", cfg.num_heads},
          {"n_inner", nullptr},
          {"activation_function", "gelu_new"},
          {"layer_norm_epsilon", 1e-5},
          {"resid_pdrop", 0.0},
          {"embd_pdrop", 0.0},
          {"attn_pdrop", 0.0},
          {"initializer_range", 0.02},
          {"scale_attn_weights", true},
          {"scale_attn_by_inverse_layer_idx", false},
          {"reorder_and_upcast_attn", false},
          {"tie_word_embeddings", true},
          {"bos_token_id", eot},
          {"eos_token_id", eot},
          {"torch_dtype", dtype == io::safetensors_dtype::bf16 ? "bfloat16" : "float32"}};
}

/// Writes a GPT2LMHeadModel folder for `params` (trainkit layout, shape `cfg`) into `dir`
/// (created if missing). Throws config_error for a bad dtype or parameter count, io_error when a
/// file cannot be written.
template <class Scalar>
void write_hf_gpt2(const std::filesystem::path& dir, const gpt2_config& cfg,
                   std::span<const Scalar> params, const hf_export_options& options = {}) {
  cfg.validate();
  detail::prepare_hf_export(dir, cfg, params.size(), options.dtype, "write_hf_gpt2");
  write_hf_tensors<Scalar>(dir, hf_gpt2_layout(cfg), params, options.dtype);
  detail::write_text(dir / "config.json", hf_gpt2_config_json(cfg, options.dtype).dump(2) + "\n");
  if (!options.vocab_dir.empty()) write_hf_gpt2_tokenizer(dir, options.vocab_dir, cfg.max_seq_len);
}

/// The trainkit shape of the GPT-2 in `dir`/config.json: V from vocab_size, Vp = V rounded up to
/// a multiple of 128, maxT from n_positions. format_error naming the file and field for anything
/// trainkit's GPT-2 does not compute the same way (activation, epsilon, inner width, untied
/// embeddings, scaled or reordered attention).
inline gpt2_config read_hf_gpt2_config(const std::filesystem::path& dir) {
  const detail::hf_config_reader r(dir, "GPT-2");
  const nlohmann::json& j = r.json();
  r.require_model_type("gpt2");
  auto need_int = [&](const char* field) { return r.need_int(field); };
  auto refuse_unless = [&](bool ok, const char* field, const std::string& want) {
    r.refuse_unless(ok, field, want);
  };
  gpt2_config cfg;
  cfg.vocab_size = need_int("vocab_size");
  cfg.max_seq_len = need_int("n_positions");
  cfg.channels = need_int("n_embd");
  cfg.num_layers = need_int("n_layer");
  cfg.num_heads = need_int("n_head");
  cfg.padded_vocab_size = (cfg.vocab_size + 127) / 128 * 128;
  if (j.contains("activation_function")) {
    const auto& a = j["activation_function"];
    refuse_unless(a == "gelu_new" || a == "gelu_pytorch_tanh", "activation_function",
                  "GELU with the tanh approximation (gelu_new)");
  }
  if (j.contains("layer_norm_epsilon"))
    refuse_unless(j["layer_norm_epsilon"].is_number() &&
                      std::abs(j["layer_norm_epsilon"].get<double>() - 1e-5) < 1e-12,
                  "layer_norm_epsilon", "LayerNorm with epsilon 1e-5");
  if (j.contains("n_inner"))
    refuse_unless(j["n_inner"].is_null() || (j["n_inner"].is_number_integer() &&
                                             j["n_inner"].get<int>() == 4 * cfg.channels),
                  "n_inner", "an MLP of width 4 * n_embd");
  if (j.contains("tie_word_embeddings"))
    refuse_unless(j["tie_word_embeddings"] == true, "tie_word_embeddings", "lm_head tied to wte");
  if (j.contains("scale_attn_weights"))
    refuse_unless(j["scale_attn_weights"] == true, "scale_attn_weights",
                  "attention scaled by 1/sqrt(head size)");
  if (j.contains("scale_attn_by_inverse_layer_idx"))
    refuse_unless(j["scale_attn_by_inverse_layer_idx"] == false, "scale_attn_by_inverse_layer_idx",
                  "no per-layer attention scaling");
  if (j.contains("reorder_and_upcast_attn"))
    refuse_unless(j["reorder_and_upcast_attn"] == false, "reorder_and_upcast_attn",
                  "attention in the model's precision");
  return r.validated(cfg);
}

/// Reads `dir`/model.safetensors into `params` (trainkit layout of shape `cfg`, as
/// read_hf_gpt2_config gives it). Names with or without the "transformer." prefix are accepted;
/// the attention-mask buffers (.attn.bias, .attn.masked_bias) are ignored; lm_head.weight, when
/// stored, must equal wte. format_error names the file and tensor that is missing, misshapen,
/// unknown or untied.
template <class Scalar>
void read_hf_gpt2_parameters(const std::filesystem::path& dir, const gpt2_config& cfg,
                             std::span<Scalar> params) {
  detail::check_hf_import_size(cfg, params.size(), "read_hf_gpt2_parameters");
  io::safetensors_file file = open_hf_safetensors(dir);
  const std::string where = hf_safetensors_name(dir);
  auto find = [&](const std::string& name) -> const io::safetensors_tensor* {
    if (auto* t = file.find(name)) return t;
    return file.find(name.substr(std::string("transformer.").size()));
  };
  const auto layout = hf_gpt2_layout(cfg);
  read_hf_tensors(file, where, std::span<const hf_tensor>(layout), params, find);
  for (const io::safetensors_tensor& s : file.tensors()) {
    const std::string& n = s.name;
    auto ends_with = [&](std::string_view suffix) {
      return n.size() >= suffix.size() &&
             n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends_with(".attn.bias") || ends_with(".attn.masked_bias")) continue;  // mask buffers
    if (n == "lm_head.weight") {
      const std::size_t wte = gpt2_parameter_layout(cfg)[std::size_t(gpt2_tensor::wte)].offset;
      if (!hf_head_matches(file, std::span<const Scalar>(params), wte,
                           std::size_t(cfg.vocab_size) * std::size_t(cfg.channels)))
        throw format_error(where + ": lm_head.weight differs from wte; trainkit's GPT-2 ties them");
      continue;
    }
    const std::string full = n.rfind("transformer.", 0) == 0 ? n : "transformer." + n;
    if (std::none_of(layout.begin(), layout.end(),
                     [&](const hf_gpt2_tensor& t) { return t.name == full; }))
      throw format_error(where + ": unexpected tensor '" + n + "' for a GPT2LMHeadModel of shape " +
                         cfg.to_string());
  }
}

/// Exports `model` as a Hugging Face folder.
template <class Scalar>
void save_hf_gpt2(const std::filesystem::path& dir, const basic_gpt2_cpu<Scalar>& model,
                  const hf_export_options& options = {}) {
  write_hf_gpt2(dir, model.config(), model.parameters(), options);
}

/// A CPU model with the shape and weights of the Hugging Face GPT-2 folder `dir`.
template <class Scalar = float>
basic_gpt2_cpu<Scalar> load_hf_gpt2_cpu(const std::filesystem::path& dir) {
  return load_hf_model<basic_gpt2_cpu<Scalar>>(dir, read_hf_gpt2_config,
                                               read_hf_gpt2_parameters<Scalar>);
}

}  // namespace trainkit::model
