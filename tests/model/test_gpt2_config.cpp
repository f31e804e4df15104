// Tests for trainkit/model/gpt2/config.hpp: presets, validation, parameter counts, FLOPs and the
// llm.c parameter layout. Expected counts come from the architecture, not from the code under test.
#include "trainkit/model/gpt2/config.hpp"  // first: the header compiles on its own

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tk = trainkit;
using tk::model::gpt2_config;

namespace {

// Parameter count of GPT-2 counted block by block: embeddings, then per layer two LayerNorms
// (gain + bias), attention qkv and output projections, MLP up and down projections, then lnf.
std::size_t count_by_architecture(std::size_t V, std::size_t maxT, std::size_t L, std::size_t C) {
  const std::size_t embeddings = V * C + maxT * C;
  const std::size_t layernorm = C + C;
  const std::size_t attention = (C * 3 * C + 3 * C) + (C * C + C);
  const std::size_t mlp = (C * 4 * C + 4 * C) + (4 * C * C + C);
  return embeddings + L * (2 * layernorm + attention + mlp) + layernorm;
}

std::string message_of(const gpt2_config& c) {
  try {
    c.validate();
  } catch (const tk::config_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Gpt2Config, PresetShapes) {
  struct expect {
    const char* name;
    int L, H, C;
  };
  for (const expect& e :
       {expect{"d2", 2, 2, 128}, expect{"d6", 6, 6, 384}, expect{"d12", 12, 12, 768},
        expect{"d24", 24, 16, 1024}, expect{"d36", 36, 20, 1280}, expect{"d48", 48, 25, 1600}}) {
    const gpt2_config c = gpt2_config::preset(e.name);
    EXPECT_EQ(c.num_layers, e.L) << e.name;
    EXPECT_EQ(c.num_heads, e.H) << e.name;
    EXPECT_EQ(c.channels, e.C) << e.name;
    EXPECT_EQ(c.vocab_size, 50257);
    EXPECT_EQ(c.padded_vocab_size, 50304);
    EXPECT_EQ(c.max_seq_len, 1024);
    EXPECT_NO_THROW(c.validate()) << e.name;
    EXPECT_EQ(c.num_parameters(), count_by_architecture(50304, 1024, e.L, e.C)) << e.name;
  }
}

TEST(Gpt2Config, D12HasTheKnownParameterCount) {
  // GPT-2 small with the padded vocabulary: llm.c prints 124475904.
  EXPECT_EQ(gpt2_config::preset("d12").num_parameters(), 124475904u);
}

TEST(Gpt2Config, UnknownPresetListsTheValidOnes) {
  try {
    (void)gpt2_config::preset("d7");
    FAIL() << "no exception";
  } catch (const tk::config_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'d7'"), std::string::npos) << m;
    for (const char* n : {"d2", "d6", "d12", "d24", "d36", "d48"})
      EXPECT_NE(m.find(n), std::string::npos) << m;
  }
}

TEST(Gpt2Config, ValidateNamesTheField) {
  gpt2_config c = gpt2_config::preset("d6");
  c.channels = 385;  // not divisible by 6 heads
  EXPECT_NE(message_of(c).find("channels"), std::string::npos);
  c = gpt2_config::preset("d6");
  c.padded_vocab_size = 50300;  // not a multiple of 128
  EXPECT_NE(message_of(c).find("padded_vocab_size"), std::string::npos);
  c.padded_vocab_size = 50176;  // multiple of 128 but below vocab_size
  EXPECT_NE(message_of(c).find("padded_vocab_size"), std::string::npos);
  c = gpt2_config::preset("d6");
  c.num_layers = 0;
  EXPECT_NE(message_of(c).find("num_layers"), std::string::npos);
  c = gpt2_config::preset("d6");
  c.max_seq_len = -1;
  EXPECT_NE(message_of(c).find("max_seq_len"), std::string::npos);
  EXPECT_FALSE(message_of(gpt2_config{}).empty()) << "default has no layers: must not validate";
}

TEST(Gpt2Config, EqualityAndText) {
  gpt2_config a = gpt2_config::preset("d12"), b = a;
  EXPECT_EQ(a, b);
  b.num_heads = 6;
  EXPECT_NE(a, b);
  EXPECT_NE(a.to_string().find("C=768"), std::string::npos);
  EXPECT_NE(a.to_string(), b.to_string());
}

TEST(Gpt2Config, FlopsPerTokenFollowsPalmAppendixB) {
  const gpt2_config c = gpt2_config::preset("d12");
  const double n_without_wpe = double(count_by_architecture(50304, 1024, 12, 768)) - 1024.0 * 768;
  EXPECT_DOUBLE_EQ(c.flops_per_token(1024), 6 * n_without_wpe + 12.0 * 12 * 768 * 1024);
  // Attention term grows linearly with T.
  EXPECT_DOUBLE_EQ(c.flops_per_token(2) - c.flops_per_token(1), 12.0 * 12 * 768);
}

TEST(Gpt2Config, LayoutIsLlmcOrderPackedWithoutGaps) {
  gpt2_config c;
  c.num_layers = 3;
  c.num_heads = 2;
  c.channels = 16;
  c.vocab_size = 100;
  c.padded_vocab_size = 128;
  c.max_seq_len = 32;
  const auto layout = tk::model::gpt2_parameter_layout(c);
  const std::vector<std::string> names{"wte",      "wpe",      "ln1w", "ln1b", "qkvw", "qkvb",
                                       "attprojw", "attprojb", "ln2w", "ln2b", "fcw",  "fcb",
                                       "fcprojw",  "fcprojb",  "lnfw", "lnfb"};
  const std::int64_t L = 3, C = 16;
  const std::vector<std::vector<std::int64_t>> shapes{
      {128, C}, {32, C}, {L, C},        {L, C},     {L, 3 * C, C}, {L, 3 * C}, {L, C, C}, {L, C},
      {L, C},   {L, C},  {L, 4 * C, C}, {L, 4 * C}, {L, C, 4 * C}, {L, C},     {C},       {C}};
  ASSERT_EQ(layout.size(), names.size());
  std::size_t offset = 0;
  for (std::size_t i = 0; i < layout.size(); ++i) {
    EXPECT_EQ(layout[i].name, names[i]);
    EXPECT_EQ(layout[i].shape, shapes[i]) << names[i];
    EXPECT_EQ(layout[i].offset, offset) << names[i];
    offset += layout[i].numel();
    const std::string& n = names[i];
    const tk::tensor_role role = n == "wte" || n == "wpe" ? tk::tensor_role::embedding
                                 : n == "qkvw" || n == "attprojw" || n == "fcw" || n == "fcprojw"
                                     ? tk::tensor_role::matrix
                                 : n.starts_with("ln") ? tk::tensor_role::norm
                                                       : tk::tensor_role::bias;
    EXPECT_EQ(layout[i].role, role) << n;
    // Muon takes q, k and v as separate matrices: only qkvw declares fused parts.
    const std::vector<std::int64_t> parts =
        n == "qkvw" ? std::vector<std::int64_t>{C, C, C} : std::vector<std::int64_t>{};
    EXPECT_EQ(layout[i].row_parts, parts) << n;
    if (layout[i].role == tk::tensor_role::matrix) {
      EXPECT_EQ(layout[i].slices(), std::size_t(L)) << n;
      EXPECT_EQ(layout[i].rows() * layout[i].cols() * L, std::int64_t(layout[i].numel())) << n;
    }
  }
  EXPECT_EQ(offset, c.num_parameters());
  EXPECT_EQ(offset, count_by_architecture(128, 32, 3, 16));
}
