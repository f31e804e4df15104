// tests/model/test_hf_llama.cpp — Hugging Face LlamaForCausalLM folders: the fp32 round trip is
// bit-identical (untied and tied), the stored layout is HF's (q/k/v and gate/up split out of the
// fused tensors, unpadded tables), the logits of an independent numpy Llama over the exported
// folder match trainkit's CPU model (transformers' own load is checked too where it is importable),
// variants HF cannot compute are refused at export naming the field, and configs trainkit cannot
// compute are refused at import.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "hf_checks.hpp"
#include "trainkit/model/llama/hf.hpp"
#include "trainkit/tokenizer/vocab_files.hpp"

namespace {

namespace fs = std::filesystem;
using trainkit::format_error;
using trainkit::model::llama_config;
using trainkit::model::llama_cpu;
using trainkit::model::llama_tensor;

fs::path scratch(const std::string& name) {
  return trainkit::test_hf::scratch("llama", name);
}

llama_config small_config(bool tied = false) {
  llama_config c;
  c.max_seq_len = 16;
  c.vocab_size = 97;
  c.padded_vocab_size = 128;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.channels = 32;
  c.hidden_size = 48;
  c.rope_theta = 300.0f;  // off the default, so a reader that ignores it shows
  c.norm_eps = 1e-5f;
  c.tied_embeddings = tied;
  return c;
}

/// Every parameter random and distinct (gains too), padded rows zero.
llama_cpu random_model(const llama_config& cfg, std::uint32_t seed) {
  llama_cpu m(cfg, trainkit::model::zero_parameters);
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 0.2f);
  for (const auto& t : m.parameter_layout()) {
    const bool table = t.name == "wte" || t.name == "lm_head";
    const std::size_t real = table ? std::size_t(cfg.vocab_size) * cfg.channels : t.numel();
    for (std::size_t i = 0; i < real; ++i)
      m.parameters()[t.offset + i] = (t.role == trainkit::tensor_role::norm ? 1.0f : 0.0f) + n(rng);
  }
  return m;
}

TEST(HfLlama, Fp32RoundTripIsBitIdentical) {
  for (bool tied : {false, true}) {
    const llama_config cfg = small_config(tied);
    const llama_cpu a = random_model(cfg, 1);
    const fs::path d = scratch(tied ? "roundtrip_tied" : "roundtrip");
    trainkit::model::save_hf_llama(d, a);
    const llama_cpu b = trainkit::model::load_hf_llama_cpu(d);
    EXPECT_EQ(b.config(), cfg) << b.config().to_string();
    ASSERT_EQ(b.parameters().size(), a.parameters().size());
    EXPECT_TRUE(std::equal(a.parameters().begin(), a.parameters().end(), b.parameters().begin()));
  }
}

TEST(HfLlama, StoresHfLayout) {
  const llama_config cfg = small_config();
  const llama_cpu m = random_model(cfg, 2);
  const fs::path d = scratch("layout");
  trainkit::model::save_hf_llama(d, m);
  trainkit::io::safetensors_file f(d / "model.safetensors");
  EXPECT_EQ(f.tensors().size(), 1 + 9 * std::size_t(cfg.num_layers) + 2);
  const auto layout = trainkit::model::llama_parameter_layout(cfg);
  auto tk = [&](llama_tensor t) { return m.parameters().data() + layout[std::size_t(t)].offset; };
  const std::size_t C = 32, hs = 8, D = (4 + 2 * 2) * hs, F = 48;
  // Layer 1's k_proj: rows [H·hs, (H+KV)·hs) of qkvw[1].
  const auto* k = f.find("model.layers.1.self_attn.k_proj.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->shape, (std::vector<std::int64_t>{16, 32}));
  const auto kv = f.read("model.layers.1.self_attn.k_proj.weight");
  EXPECT_EQ(kv[3 * C + 5], tk(llama_tensor::qkvw)[D * C + (32 + 3) * C + 5]);
  // Layer 0's up_proj: rows [F, 2F) of fcw[0].
  const auto up = f.read("model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(up.size(), F * C);
  EXPECT_EQ(up[7 * C + 2], tk(llama_tensor::fcw)[(F + 7) * C + 2]);
  const auto* head = f.find("lm_head.weight");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->shape, (std::vector<std::int64_t>{cfg.vocab_size, cfg.channels}));
  const nlohmann::json j =
      nlohmann::json::parse(trainkit::tokenizer::read_text_file(d / "config.json"));
  EXPECT_EQ(j["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(j["num_key_value_heads"], 2);
  EXPECT_EQ(j["rope_parameters"]["rope_theta"], 300.0);
  EXPECT_EQ(j["tie_word_embeddings"], false);
}

TEST(HfLlama, RefusesVariantsHfCannotComputeNamingTheField) {
  llama_config cfg = small_config();
  cfg.mlp = trainkit::model::llama_mlp::relu_squared;
  auto expect_refused = [](const llama_config& c, const std::string& field) {
    try {
      trainkit::model::save_hf_llama(scratch("refuse_export"), random_model(c, 3));
      ADD_FAILURE() << "exported; expected a refusal naming " << field;
    } catch (const trainkit::config_error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  expect_refused(cfg, "llama_config.mlp");
  cfg = small_config();
  cfg.qk_norm = true;
  expect_refused(cfg, "llama_config.qk_norm");
}

// Exports a model, runs trainkit's CPU forward on fixed tokens and has `mode` (numpy or
// transformers) recompute the logits from the folder alone.
void check_logits_with(const std::string& mode, bool tied) {
  const llama_config cfg = small_config(tied);
  llama_cpu m = random_model(cfg, 5);
  const fs::path d = scratch("logits_" + mode + (tied ? "_tied" : ""));
  const auto vocab = trainkit::tokenizer::bundled_vocab_dir();
  ASSERT_TRUE(vocab.has_value());
  trainkit::test_hf::check_exported_logits(
      "model/hf_llama_check.py", mode, d, m, cfg.vocab_size, cfg.padded_vocab_size, 11,
      [&](const fs::path& out) {
        trainkit::model::save_hf_llama(out, m, {trainkit::io::safetensors_dtype::f32, *vocab});
      });
}

TEST(HfLlama, NumpyLlamaOverTheExportGivesTrainkitsLogits) {
  check_logits_with("numpy", false);
  check_logits_with("numpy", true);
}

// Skips where transformers + torch are not importable (CI does not install torch).
TEST(HfLlama, TransformersLoadsTheExportWithTrainkitsLogits) {
  check_logits_with("transformers", false);
}

TEST(HfLlama, ImportRefusesWhatTrainkitCannotCompute) {
  const llama_config cfg = small_config();
  const fs::path d = scratch("refuse");
  trainkit::model::save_hf_llama(d, random_model(cfg, 6));
  const nlohmann::json good =
      nlohmann::json::parse(trainkit::tokenizer::read_text_file(d / "config.json"));
  trainkit::test_hf::expect_edits_refused(
      d, good,
      {{"hidden_act", "gelu", "hidden_act"},
       {"attention_bias", true, "attention_bias"},
       {"mlp_bias", true, "mlp_bias"},
       {"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}, "rope_scaling"},
       {"head_dim", 16, "head_dim"},
       {"model_type", "gpt2", "model_type"},
       {"num_key_value_heads", 3, "num_kv_heads"},
       {"num_hidden_layers", trainkit::test_hf::erased, "num_hidden_layers"},
       // Tied in config.json, but the file's lm_head differs from the embedding.
       {"tie_word_embeddings", true, "lm_head.weight differs from embed_tokens"}},
      [](const fs::path& dir) { (void)trainkit::model::load_hf_llama_cpu(dir); });
  std::ofstream(d / "config.json", std::ios::trunc) << good.dump();
  EXPECT_NO_THROW((void)trainkit::model::load_hf_llama_cpu(d)) << "control: the good config loads";
}

}  // namespace
