// tests/model/test_hf_gpt2.cpp — Hugging Face GPT-2 folders: the fp32 round trip is bit-identical,
// the stored layout is HF's (Conv1D transposed, unpadded wte, no lm_head), the logits of an
// independent numpy GPT-2 over the exported folder match trainkit's CPU model (transformers'
// own load is checked too where it is importable), and configs trainkit cannot compute are refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "hf_checks.hpp"
#include "trainkit/model/gpt2/hf.hpp"
#include "trainkit/tokenizer/vocab_files.hpp"

namespace {

namespace fs = std::filesystem;
using trainkit::format_error;
using trainkit::model::gpt2_config;
using trainkit::model::gpt2_cpu;
using trainkit::model::gpt2_tensor;

fs::path scratch(const std::string& name) {
  return trainkit::test_hf::scratch("gpt2", name);
}

gpt2_config small_config() {
  gpt2_config c;
  c.max_seq_len = 16;
  c.vocab_size = 97;
  c.padded_vocab_size = 128;
  c.num_layers = 2;
  c.num_heads = 4;
  c.channels = 32;
  return c;
}

/// A model whose every parameter (biases and LayerNorm included) is random and distinct, so a
/// mapping that swaps, drops or mis-transposes any tensor changes something; padded rows zero.
gpt2_cpu random_model(const gpt2_config& cfg, std::uint32_t seed) {
  gpt2_cpu m(cfg, trainkit::model::zero_parameters);
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 0.1f);
  for (float& p : m.parameters()) p = n(rng);
  const auto wte = trainkit::model::gpt2_parameter_layout(cfg)[std::size_t(gpt2_tensor::wte)];
  for (std::size_t i = std::size_t(cfg.vocab_size) * cfg.channels; i < wte.numel(); ++i)
    m.parameters()[wte.offset + i] = 0.0f;
  return m;
}

void write_json(const fs::path& p, const nlohmann::json& j) {
  std::ofstream(p) << j.dump();
}

TEST(HfGpt2, Fp32RoundTripIsBitIdentical) {
  const gpt2_config cfg = small_config();
  const gpt2_cpu a = random_model(cfg, 1);
  const fs::path d = scratch("roundtrip");
  trainkit::model::save_hf_gpt2(d, a);
  const gpt2_cpu b = trainkit::model::load_hf_gpt2_cpu(d);
  EXPECT_EQ(b.config(), cfg);
  ASSERT_EQ(b.parameters().size(), a.parameters().size());
  EXPECT_TRUE(std::equal(a.parameters().begin(), a.parameters().end(), b.parameters().begin()));
}

TEST(HfGpt2, StoresHfLayout) {
  const gpt2_config cfg = small_config();
  const gpt2_cpu m = random_model(cfg, 2);
  const fs::path d = scratch("layout");
  trainkit::model::save_hf_gpt2(d, m);
  trainkit::io::safetensors_file f(d / "model.safetensors");
  EXPECT_EQ(f.find("lm_head.weight"), nullptr);  // tied: not stored
  EXPECT_EQ(f.tensors().size(), 2 + 12 * std::size_t(cfg.num_layers) + 2);
  const auto layout = trainkit::model::gpt2_parameter_layout(cfg);
  auto tk = [&](gpt2_tensor t) { return m.parameters().data() + layout[std::size_t(t)].offset; };
  const std::size_t C = std::size_t(cfg.channels);

  const auto* wte = f.find("transformer.wte.weight");
  ASSERT_NE(wte, nullptr);
  EXPECT_EQ(wte->shape, (std::vector<std::int64_t>{cfg.vocab_size, cfg.channels}));
  const auto wte_v = f.read("transformer.wte.weight");
  EXPECT_TRUE(std::equal(wte_v.begin(), wte_v.end(), tk(gpt2_tensor::wte)));

  // Layer 1's c_attn is Conv1D (in=C, out=3C): HF (r, c) = trainkit qkvw[1] (c, r).
  const auto* qkv = f.find("transformer.h.1.attn.c_attn.weight");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->shape, (std::vector<std::int64_t>{cfg.channels, 3 * cfg.channels}));
  const auto qkv_v = f.read("transformer.h.1.attn.c_attn.weight");
  const float* qkvw1 = tk(gpt2_tensor::qkvw) + 3 * C * C;
  for (std::size_t r = 0; r < C; ++r)
    for (std::size_t c = 0; c < 3 * C; ++c)
      ASSERT_EQ(qkv_v[r * 3 * C + c], qkvw1[c * C + r]) << r << "," << c;
  // mlp.c_proj is (in=4C, out=C).
  const auto proj_v = f.read("transformer.h.1.mlp.c_proj.weight");
  const float* fcprojw1 = tk(gpt2_tensor::fcprojw) + 4 * C * C;
  EXPECT_EQ(proj_v[5 * C + 3], fcprojw1[3 * 4 * C + 5]);
  EXPECT_EQ(f.read("transformer.h.1.ln_2.bias")[7], tk(gpt2_tensor::ln2b)[C + 7]);

  const nlohmann::json j =
      nlohmann::json::parse(trainkit::tokenizer::read_text_file(d / "config.json"));
  EXPECT_EQ(j["architectures"][0], "GPT2LMHeadModel");
  EXPECT_EQ(j["vocab_size"], cfg.vocab_size);
  EXPECT_EQ(j["n_positions"], cfg.max_seq_len);
}

TEST(HfGpt2, Bf16ExportRoundsEveryWeight) {
  const gpt2_config cfg = small_config();
  const gpt2_cpu a = random_model(cfg, 3);
  const fs::path d = scratch("bf16");
  trainkit::model::save_hf_gpt2(d, a, {trainkit::io::safetensors_dtype::bf16, {}});
  const gpt2_cpu b = trainkit::model::load_hf_gpt2_cpu(d);
  for (std::size_t i = 0; i < a.parameters().size(); ++i)
    ASSERT_EQ(b.parameters()[i], trainkit::bf16::from_float(a.parameters()[i]).to_float()) << i;
}

TEST(HfGpt2, TokenizerFilesAreGpt2s) {
  const auto vocab = trainkit::tokenizer::bundled_vocab_dir();
  ASSERT_TRUE(vocab.has_value());
  const fs::path d = scratch("tokenizer");
  trainkit::model::save_hf_gpt2(d, random_model(small_config(), 4),
                                {trainkit::io::safetensors_dtype::f32, *vocab});
  EXPECT_EQ(trainkit::tokenizer::read_text_file(d / "vocab.json"),
            trainkit::tokenizer::read_text_file(*vocab / "encoder.json"));
  EXPECT_EQ(trainkit::tokenizer::read_text_file(d / "merges.txt"),
            trainkit::tokenizer::read_text_file(*vocab / "vocab.bpe"));
  EXPECT_TRUE(fs::exists(d / "tokenizer_config.json"));
}

// Exports a model, runs trainkit's CPU forward on fixed tokens and has `mode` (numpy or
// transformers) recompute the logits from the folder alone.
void check_logits_with(const std::string& mode) {
  const gpt2_config cfg = small_config();
  gpt2_cpu m = random_model(cfg, 5);
  const fs::path d = scratch("logits_" + mode);
  const auto vocab = trainkit::tokenizer::bundled_vocab_dir();
  ASSERT_TRUE(vocab.has_value());
  trainkit::test_hf::check_exported_logits(
      "model/hf_gpt2_check.py", mode, d, m, cfg.vocab_size, cfg.padded_vocab_size, 9,
      [&](const fs::path& out) {
        trainkit::model::save_hf_gpt2(out, m, {trainkit::io::safetensors_dtype::f32, *vocab});
      });
}

TEST(HfGpt2, NumpyGpt2OverTheExportGivesTrainkitsLogits) {
  check_logits_with("numpy");
}

// Skips where transformers + torch are not importable (CI does not install torch: too heavy).
TEST(HfGpt2, TransformersLoadsTheExportWithTrainkitsLogits) {
  check_logits_with("transformers");
}

TEST(HfGpt2, RefusesWhatTrainkitCannotCompute) {
  const gpt2_config cfg = small_config();
  const fs::path d = scratch("refuse");
  trainkit::model::save_hf_gpt2(d, random_model(cfg, 6));
  const nlohmann::json good =
      nlohmann::json::parse(trainkit::tokenizer::read_text_file(d / "config.json"));
  trainkit::test_hf::expect_edits_refused(
      d, good,
      {{"activation_function", "relu", "activation_function"},
       {"layer_norm_epsilon", 1e-6, "layer_norm_epsilon"},
       {"n_inner", 64, "n_inner"},
       {"tie_word_embeddings", false, "tie_word_embeddings"},
       {"model_type", "llama", "model_type"},
       {"n_layer", trainkit::test_hf::erased, "n_layer"}},
      [](const fs::path& dir) { (void)trainkit::model::read_hf_gpt2_config(dir); });
  // A number beyond double's range: nlohmann's out_of_range, reported as a format_error too.
  std::ofstream(d / "config.json", std::ios::trunc) << R"({"n_layer": 1E400})";
  try {
    (void)trainkit::model::read_hf_gpt2_config(d);
    ADD_FAILURE() << "a number out of double's range was accepted";
  } catch (const format_error& e) {
    EXPECT_NE(std::string(e.what()).find("is not valid JSON"), std::string::npos) << e.what();
  }
  write_json(d / "config.json", good);

  // An untied lm_head and a missing tensor, in files the reference layout would otherwise accept.
  trainkit::io::safetensors_file f(d / "model.safetensors");
  std::vector<std::vector<float>> values;
  std::vector<trainkit::io::safetensors_entry> entries;
  for (const auto& t : f.tensors()) values.push_back(f.read(t.name));
  auto rewrite = [&](bool drop_ln_f, bool add_head) {
    entries.clear();
    for (std::size_t i = 0; i < values.size(); ++i) {
      const auto& t = f.tensors()[i];
      if (drop_ln_f && t.name == "transformer.ln_f.bias") continue;
      entries.push_back(trainkit::io::safetensors_entry_of(t.name, t.dtype, t.shape, values[i]));
    }
    static std::vector<float> head(std::size_t(cfg.vocab_size) * cfg.channels, 0.5f);
    if (add_head)
      entries.push_back(trainkit::io::safetensors_entry_of("lm_head.weight",
                                                           trainkit::io::safetensors_dtype::f32,
                                                           {cfg.vocab_size, cfg.channels}, head));
    trainkit::io::write_safetensors(d / "model2.safetensors", entries);
    fs::rename(d / "model2.safetensors", d / "model.safetensors");
  };
  auto expect_load_refused = [&](const std::string& needle) {
    try {
      (void)trainkit::model::load_hf_gpt2_cpu(d);
      ADD_FAILURE() << "accepted; expected '" << needle << "'";
    } catch (const format_error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  rewrite(false, true);
  expect_load_refused("lm_head.weight differs from wte");
  rewrite(true, false);
  expect_load_refused("no tensor 'transformer.ln_f.bias'");
}

}  // namespace
