// trainkit/model/llama/hf.hpp — Hugging Face LlamaForCausalLM folders: export and import.
//
// A folder `AutoModelForCausalLM.from_pretrained(DIR)` loads: config.json (model_type llama),
// model.safetensors and, when asked, GPT-2's tokenizer files (trainkit's only tokenizer; written as
// gpt2/hf.hpp writes them). The mapping from trainkit's layout (llama/config.hpp; docs/formats.md):
//   - HF's Linear weights are (out, in) as trainkit's, so nothing is transposed: every HF tensor is
//     one contiguous block of the flat buffer; the fused q|k|v rows of qkvw[l] split into q_proj,
//     k_proj and v_proj, the gate|up rows of fcw[l] into gate_proj and up_proj;
//   - HF's embed_tokens and lm_head have the V real rows (trainkit pads to Vp; import zeroes the
//     padded rows); a tied model stores no lm_head (one stored on import must equal embed_tokens);
//   - HF's RoPE is rotate-half over (i, i + hs/2) on q_proj's and k_proj's outputs as they are,
//     which is what trainkit computes, so the weights need no permutation.
// Variants transformers' Llama cannot compute (ReLU², QK-norm, the speedrun recipe's value
// embeddings, U-net skips, logit soft-cap and sliding windows) are refused at export with a
// config_error naming the llama_config field; a config.json trainkit does not compute the same way
// (another activation, biases, RoPE scaling, a head_dim other than hidden/heads) is refused at
// import with a format_error naming the file and field. Export writes F32 (bit-exact round trip)
// or BF16; import reads F32, BF16 or F16. The plumbing is every family's:
// transformer/hf_common.hpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/io/safetensors_read.hpp"
#include "trainkit/model/llama/config.hpp"
#include "trainkit/model/llama/cpu.hpp"
#include "trainkit/model/transformer/hf_common.hpp"

namespace trainkit::model {

/// An entry of the Llama's Hugging Face map (transformer/hf_common.hpp): never transposed.
using hf_llama_tensor = hf_tensor;

/// The Hugging Face tensors of a Llama of shape `cfg`, in HF's order; lm_head only when untied.
inline std::vector<hf_llama_tensor> hf_llama_layout(const llama_config& cfg) {
  const auto layout = llama_parameter_layout(cfg);
  auto at = [&](llama_tensor t) { return layout[std::size_t(t)].offset; };
  const std::int64_t C = cfg.channels, V = cfg.vocab_size, F = cfg.hidden_size,
                     hs = cfg.head_size(), Q = cfg.num_heads * hs, K = cfg.num_kv_heads * hs,
                     D = cfg.qkv_rows(), R = cfg.fc_rows();
  std::vector<hf_llama_tensor> out;
  out.push_back({"model.embed_tokens.weight", {V, C}, at(llama_tensor::wte)});
  for (int l = 0; l < cfg.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::size_t L = std::size_t(l);
    const std::size_t qkv = at(llama_tensor::qkvw) + L * std::size_t(D * C);
    const std::size_t fc = at(llama_tensor::fcw) + L * std::size_t(R * C);
    out.push_back({p + "input_layernorm.weight", {C}, at(llama_tensor::ln1w) + L * std::size_t(C)});
    out.push_back({p + "self_attn.q_proj.weight", {Q, C}, qkv});
    out.push_back({p + "self_attn.k_proj.weight", {K, C}, qkv + std::size_t(Q * C)});
    out.push_back({p + "self_attn.v_proj.weight", {K, C}, qkv + std::size_t((Q + K) * C)});
    out.push_back({p + "self_attn.o_proj.weight",
                   {C, C},
                   at(llama_tensor::attprojw) + L * std::size_t(C * C)});
    out.push_back(
        {p + "post_attention_layernorm.weight", {C}, at(llama_tensor::ln2w) + L * std::size_t(C)});
    out.push_back({p + "mlp.gate_proj.weight", {F, C}, fc});
    out.push_back({p + "mlp.up_proj.weight", {F, C}, fc + std::size_t(F * C)});
    out.push_back(
        {p + "mlp.down_proj.weight", {C, F}, at(llama_tensor::fcprojw) + L * std::size_t(C * F)});
  }
  out.push_back({"model.norm.weight", {C}, at(llama_tensor::lnfw)});
  if (!cfg.tied_embeddings) out.push_back({"lm_head.weight", {V, C}, at(llama_tensor::lm_head)});
  return out;
}

/// Throws config_error naming the llama_config field of a variant transformers' LlamaForCausalLM
/// cannot compute (ReLU² MLP, QK-norm, the recipe's value embeddings, U-net skips, logit cap,
/// sliding windows); validates `cfg` first.
inline void check_hf_llama_exportable(const llama_config& cfg) {
  cfg.validate();
  if (cfg.mlp != llama_mlp::swiglu)
    throw config_error("llama_config.mlp is " + std::string(llama_mlp_name(cfg.mlp)) +
                       ": Hugging Face's LlamaForCausalLM computes SwiGLU only, so this model "
                       "cannot be exported as one");
  if (cfg.qk_norm)
    throw config_error(
        "llama_config.qk_norm is on: Hugging Face's LlamaForCausalLM has no "
        "QK-norm, so this model cannot be exported as one");
  // The speedrun recipe's parts that change what the model computes (a zero init does not).
  const llama_recipe& r = cfg.recipe;
  const char* part = r.value_embeddings > 0 ? "value_embeddings"
                     : r.unet_skips         ? "unet_skips"
                     : r.logit_cap > 0.0f   ? "logit_cap"
                     : r.windows.on()       ? "windows"
                                            : nullptr;
  if (part)
    throw config_error("llama_config.recipe." + std::string(part) +
                       " is on: Hugging Face's LlamaForCausalLM has no value embeddings, U-net "
                       "skips, logit soft-cap or sliding windows, so this model cannot be "
                       "exported as one");
}

/// config.json for LlamaForCausalLM of shape `cfg`. RoPE θ is written both as transformers 5's
/// rope_parameters and as 4.x's rope_theta; bos/eos are GPT-2's <|endoftext|> (50256) only when
/// the vocabulary has that token.
inline nlohmann::json hf_llama_config_json(const llama_config& cfg, io::safetensors_dtype dtype) {
  const nlohmann::json eot = cfg.vocab_size > 50256 ? nlohmann::json(50256) : nlohmann::json();
  const char* type = dtype == io::safetensors_dtype::bf16 ? "bfloat16" : "float32";
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", cfg.vocab_size},
          {"hidden_size", cfg.channels},
          {"intermediate_size", cfg.hidden_size},
          {"num_hidden_layers", cfg.num_layers},
          {"num_attention_heads", cfg.num_heads},
          {"num_key_value_heads", cfg.num_kv_heads},
          {"head_dim", cfg.head_size()},
          {"max_position_embeddings", cfg.max_seq_len},
          {"hidden_act", "silu"},
          {"rms_norm_eps", double(cfg.norm_eps)},
          {"rope_theta", double(cfg.rope_theta)},
          {"rope_scaling", nullptr},
          {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", double(cfg.rope_theta)}}},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"mlp_bias", false},
          {"pretraining_tp", 1},
          {"initializer_range", 0.02},
          {"tie_word_embeddings", cfg.tied_embeddings},
          {"use_cache", true},
          {"bos_token_id", eot},
          {"eos_token_id", eot},
          {"torch_dtype", type},
          {"dtype", type}};
}

/// Writes a LlamaForCausalLM folder for `params` (trainkit layout, shape `cfg`) into `dir`
/// (created if missing). Throws config_error for a variant HF cannot represent (naming the
/// llama_config field), a bad dtype or parameter count; io_error when a file cannot be written.
template <class Scalar>
void write_hf_llama(const std::filesystem::path& dir, const llama_config& cfg,
                    std::span<const Scalar> params, const hf_export_options& options = {}) {
  check_hf_llama_exportable(cfg);
  detail::prepare_hf_export(dir, cfg, params.size(), options.dtype, "write_hf_llama");
  write_hf_tensors<Scalar>(dir, hf_llama_layout(cfg), params, options.dtype);
  detail::write_text(dir / "config.json", hf_llama_config_json(cfg, options.dtype).dump(2) + "\n");
  if (!options.vocab_dir.empty())  // GPT-2's tokenizer, trainkit's only one
    write_hf_gpt2_tokenizer(dir, options.vocab_dir, cfg.max_seq_len);
}

/// The trainkit shape of the Llama in `dir`/config.json: Vp = V rounded up to a multiple of 128,
/// maxT from max_position_embeddings, θ from rope_parameters (transformers 5) or rope_theta (4.x),
/// default 10000. format_error naming the file and field for anything trainkit's Llama does not
/// compute the same way.
inline llama_config read_hf_llama_config(const std::filesystem::path& dir) {
  const detail::hf_config_reader r(dir, "Llama");
  const nlohmann::json& j = r.json();
  r.require_model_type("llama");
  auto need_int = [&](const char* field) { return r.need_int(field); };
  auto refuse_unless = [&](bool ok, const char* field, const std::string& want) {
    r.refuse_unless(ok, field, want);
  };
  auto number = [&](const nlohmann::json& v, const char* field) { return r.number(v, field); };
  llama_config cfg;
  cfg.vocab_size = need_int("vocab_size");
  cfg.channels = need_int("hidden_size");
  cfg.hidden_size = need_int("intermediate_size");
  cfg.num_layers = need_int("num_hidden_layers");
  cfg.num_heads = need_int("num_attention_heads");
  cfg.num_kv_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                         ? need_int("num_key_value_heads")
                         : cfg.num_heads;
  cfg.max_seq_len = need_int("max_position_embeddings");
  cfg.padded_vocab_size = (cfg.vocab_size + 127) / 128 * 128;
  cfg.norm_eps = j.contains("rms_norm_eps") ? float(number(j["rms_norm_eps"], "rms_norm_eps"))
                                            : 1e-6f;  // transformers' default
  cfg.tied_embeddings = j.value("tie_word_embeddings", false);
  cfg.rope_theta = 10000.0f;
  if (j.contains("rope_theta") && !j["rope_theta"].is_null())
    cfg.rope_theta = float(number(j["rope_theta"], "rope_theta"));
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    const auto& rp = j["rope_parameters"];
    if (rp.contains("rope_type") && rp["rope_type"] != "default")
      refuse_unless(false, "rope_parameters", "plain RoPE (rope_type \"default\")");
    if (rp.contains("rope_theta")) cfg.rope_theta = float(number(rp["rope_theta"], "rope_theta"));
  }
  if (j.contains("rope_scaling"))
    refuse_unless(j["rope_scaling"].is_null(), "rope_scaling", "RoPE without scaling");
  if (j.contains("hidden_act"))
    refuse_unless(j["hidden_act"] == "silu", "hidden_act", "SwiGLU (hidden_act \"silu\")");
  if (j.contains("attention_bias"))
    refuse_unless(j["attention_bias"] == false, "attention_bias", "attention without biases");
  if (j.contains("mlp_bias"))
    refuse_unless(j["mlp_bias"] == false, "mlp_bias", "an MLP without biases");
  if (j.contains("pretraining_tp"))
    refuse_unless(j["pretraining_tp"] == 1, "pretraining_tp", "unsplit projections (1)");
  if (j.contains("head_dim") && !j["head_dim"].is_null())
    refuse_unless(cfg.num_heads > 0 && j["head_dim"].is_number_integer() &&
                      j["head_dim"].get<int>() * cfg.num_heads == cfg.channels,
                  "head_dim", "head_dim = hidden_size / num_attention_heads");
  return r.validated(cfg);
}

/// Reads `dir`/model.safetensors into `params` (trainkit layout of shape `cfg`, as
/// read_hf_llama_config gives it). Rotary inv_freq buffers of older exports are ignored; a tied
/// model's stored lm_head.weight must equal embed_tokens. format_error names the file and tensor
/// that is missing, misshapen, unknown or untied.
template <class Scalar>
void read_hf_llama_parameters(const std::filesystem::path& dir, const llama_config& cfg,
                              std::span<Scalar> params) {
  detail::check_hf_import_size(cfg, params.size(), "read_hf_llama_parameters");
  io::safetensors_file file = open_hf_safetensors(dir);
  const std::string where = hf_safetensors_name(dir);
  const auto layout = hf_llama_layout(cfg);
  read_hf_tensors(file, where, std::span<const hf_tensor>(layout), params,
                  [&](const std::string& name) { return file.find(name); });
  for (const io::safetensors_tensor& s : file.tensors()) {
    const std::string& n = s.name;
    if (n.size() >= 8 && n.compare(n.size() - 8, 8, "inv_freq") == 0) continue;  // RoPE buffers
    if (std::any_of(layout.begin(), layout.end(),
                    [&](const hf_llama_tensor& t) { return t.name == n; }))
      continue;
    if (n == "lm_head.weight" && cfg.tied_embeddings) {
      if (!hf_head_matches(file, std::span<const Scalar>(params), /*wte at*/ 0,
                           std::size_t(cfg.vocab_size) * std::size_t(cfg.channels)))
        throw format_error(where +
                           ": lm_head.weight differs from embed_tokens, but config.json "
                           "says tie_word_embeddings");
      continue;
    }
    throw format_error(where + ": unexpected tensor '" + n + "' for a LlamaForCausalLM of shape " +
                       cfg.to_string());
  }
}

/// A CPU model with the shape and weights of the Hugging Face Llama folder `dir`.
template <class Scalar = float>
basic_llama_cpu<Scalar> load_hf_llama_cpu(const std::filesystem::path& dir) {
  return load_hf_model<basic_llama_cpu<Scalar>>(dir, read_hf_llama_config,
                                                read_hf_llama_parameters<Scalar>);
}

/// Exports `model` as a Hugging Face folder (throws as write_hf_llama).
template <class Scalar>
void save_hf_llama(const std::filesystem::path& dir, const basic_llama_cpu<Scalar>& model,
                   const hf_export_options& options = {}) {
  write_hf_llama(dir, model.config(), model.parameters(), options);
}

}  // namespace trainkit::model
