// Tests for trainkit/model/llama/config.hpp and llama/cpu.hpp: presets, validation naming the
// field, parameter layout and roles, FLOPs, buckets; finite-difference gradients of every tensor in
// every variant (SwiGLU / ReLU², QK-norm, tied head, GQA and multi-head); the RoPE kernel's
// rotate-half pairing against a direct formula; loss at initialisation, learning, micro-step
// accumulation, determinism, causality, input checks and sampling. Agreement with an independent
// implementation is test_llama_golden.cpp's job.
#include "trainkit/model/llama/cpu.hpp"  // first: the header compiles on its own
#include "trainkit/model/sampling.hpp"

#include <gtest/gtest.h>

#include "model_checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace tk = trainkit;
using tk::model::llama_config;
using tk::model::llama_mlp;
using tk::test_model::find_tensor;
using tk::test_model::random_batch;

namespace {

llama_config tiny_config() {  // small enough for finite differences on every tensor
  llama_config c = tk::test_model::with_shape(llama_config{}, {8, 37, 128, 2, 4, 16});
  c.num_kv_heads = 2;
  c.hidden_size = 12;
  c.rope_theta = 100.0f;  // angles that turn visibly within T = 5
  return c;
}

llama_config small_config() {  // big enough that the GEMMs and OpenMP loops split
  llama_config c = tk::test_model::with_shape(llama_config{}, {64, 1000, 1024, 2, 4, 128});
  c.num_kv_heads = 2;
  c.hidden_size = 320;
  return c;
}

// Random gains around 1 and weights of 0.3, padded rows non-zero too: a backward that mixes up
// tensors, or lets padded rows leak, shows up.
template <class M>
void randomise(M& m, std::uint32_t seed) {
  tk::test_model::randomise(
      m, seed, [](const tk::tensor_info& t) { return t.role == tk::tensor_role::norm; });
}

void check_finite_differences(const llama_config& cfg) {
  tk::model::basic_llama_cpu<double> m(cfg, 1);
  randomise(m, 2);
  const tk::host_batch batch = random_batch(2, 5, cfg.vocab_size, 3);
  m.zero_grad();
  m.forward_backward(tk::view_of(batch), 1.0f);
  const std::vector<double> analytic(m.gradients().begin(), m.gradients().end());
  std::mt19937 rng(4);
  const double h = 1e-5;
  for (const auto& t : m.parameter_layout()) {
    std::vector<std::size_t> picks;
    std::uniform_int_distribution<std::size_t> pick(0, t.numel() - 1);
    for (int i = 0; i < 30; ++i) picks.push_back(pick(rng));
    if (t.name == "wte")  // a row of a token that occurs: surely non-zero
      for (int c = 0; c < cfg.channels; ++c)
        picks.push_back(std::size_t(batch.inputs[0]) * cfg.channels + c);
    int nonzero = 0;
    for (std::size_t i : picks) {
      const double numeric = tk::test_model::central_difference(m, batch, t.offset + i, h);
      const double a = analytic[t.offset + i];
      const double err = tk::test_model::gradient_error(a, numeric);
      EXPECT_LT(err, 1e-5) << cfg.to_string() << ": " << t.name << "[" << i << "] analytic " << a
                           << " numeric " << numeric;
      nonzero += std::abs(a) > 1e-8;
    }
    if (t.name != "wte" && t.name != "lm_head") {
      EXPECT_GT(nonzero, 10) << t.name;
    }
  }
  // Padded vocabulary rows: no gradient, and no effect on the loss.
  for (const char* name : {"wte", "lm_head"}) {
    if (cfg.tied_embeddings && std::string(name) == "lm_head") continue;
    const auto& t = find_tensor(m.parameter_layout(), name);
    for (std::size_t i = std::size_t(cfg.vocab_size) * cfg.channels; i < t.numel(); ++i)
      ASSERT_EQ(analytic[t.offset + i], 0.0) << name << " padded element " << i;
  }
}

}  // namespace

TEST(LlamaConfig, PresetsAreWidth64PerLayerWithGroupedHeads) {
  const struct {
    const char* name;
    int L, H, KV, C, hs;
  } want[] = {{"d2", 2, 2, 1, 128, 64},
              {"d6", 6, 6, 3, 384, 64},
              {"d12", 12, 12, 6, 768, 64},
              {"d20", 20, 10, 5, 1280, 128},
              {"d24", 24, 12, 6, 1536, 128}};
  for (const auto& w : want) {
    const llama_config c = llama_config::preset(w.name);
    EXPECT_NO_THROW(c.validate()) << w.name;
    EXPECT_EQ(c.num_layers, w.L) << w.name;
    EXPECT_EQ(c.num_heads, w.H) << w.name;
    EXPECT_EQ(c.num_kv_heads, w.KV) << w.name;
    EXPECT_EQ(c.channels, w.C) << w.name;
    EXPECT_EQ(c.head_size(), w.hs) << w.name;
    EXPECT_EQ(c.hidden_size % 64, 0) << w.name;
    EXPECT_GE(c.hidden_size * 3, 8 * c.channels) << w.name;  // ≥ 8C/3
    EXPECT_EQ(c.padded_vocab_size, 50304);
    EXPECT_FALSE(c.tied_embeddings);
  }
  EXPECT_EQ(llama_config::preset("d12").hidden_size, 2048);
  try {
    (void)llama_config::preset("d7");
    FAIL() << "no exception";
  } catch (const tk::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("d20"), std::string::npos) << e.what();
  }
}

TEST(LlamaConfig, ValidateNamesTheField) {
  auto expect_field = [](llama_config c, const std::string& field) {
    try {
      c.validate();
      ADD_FAILURE() << "accepted; expected " << field;
    } catch (const tk::config_error& e) {
      EXPECT_NE(std::string(e.what()).find("llama_config." + field), std::string::npos) << e.what();
    }
  };
  const llama_config good = tiny_config();
  llama_config c = good;
  c.num_kv_heads = 3;  // does not divide 4
  expect_field(c, "num_kv_heads");
  c = good;
  c.num_kv_heads = 8;
  expect_field(c, "num_kv_heads");
  c = good;
  c.num_heads = 8;  // head size 2 is fine; 16/16 = 1 is odd
  EXPECT_NO_THROW(c.validate());
  c.num_heads = 16;
  c.num_kv_heads = 16;
  expect_field(c, "channels");
  c = good;
  c.padded_vocab_size = 100;
  expect_field(c, "padded_vocab_size");
  c = good;
  c.rope_theta = 0.5f;
  expect_field(c, "rope_theta");
  c = good;
  c.norm_eps = 0.0f;
  expect_field(c, "norm_eps");
  c = good;
  c.hidden_size = 0;
  expect_field(c, "hidden_size");
  EXPECT_THROW(tk::model::llama_cpu(llama_config{}, 1), tk::config_error);
}

TEST(LlamaConfig, LayoutRolesPartsAndCount) {
  llama_config c = tiny_config();
  const std::int64_t C = c.channels, hs = c.head_size(), F = c.hidden_size;
  auto layout = tk::model::llama_parameter_layout(c);
  ASSERT_EQ(layout.size(), 9u);
  std::size_t next = 0;
  for (const auto& t : layout) {
    EXPECT_EQ(t.offset, next) << t.name;
    next += t.numel();
    EXPECT_NE(t.role, tk::tensor_role::bias) << t.name << ": the family has no biases";
  }
  EXPECT_EQ(next, c.num_parameters());
  const auto& qkv = find_tensor(layout, "qkvw");
  EXPECT_EQ(qkv.row_parts, (std::vector<std::int64_t>{4 * hs, 2 * hs, 2 * hs}));
  EXPECT_EQ(qkv.shape, (std::vector<std::int64_t>{2, 8 * hs, C}));
  EXPECT_EQ(find_tensor(layout, "fcw").row_parts, (std::vector<std::int64_t>{F, F}));
  EXPECT_EQ(find_tensor(layout, "lm_head").role, tk::tensor_role::head);
  EXPECT_EQ(find_tensor(layout, "wte").role, tk::tensor_role::embedding);
  EXPECT_EQ(find_tensor(layout, "ln1w").role, tk::tensor_role::norm);
  EXPECT_EQ(find_tensor(layout, "fcprojw").role, tk::tensor_role::matrix);

  c.tied_embeddings = true;
  c.mlp = llama_mlp::relu_squared;
  layout = tk::model::llama_parameter_layout(c);
  EXPECT_EQ(layout.size(), 8u);  // no lm_head
  EXPECT_EQ(find_tensor(layout, "fcw").shape, (std::vector<std::int64_t>{2, F, C}));
  EXPECT_TRUE(find_tensor(layout, "fcw").row_parts.empty());
  EXPECT_EQ(layout.back().offset + layout.back().numel(), c.num_parameters());
}

TEST(LlamaConfig, FlopsCountTheHeadButNotTheLookup) {
  llama_config c = llama_config::preset("d12");
  const double N = double(c.num_parameters()), table = double(c.padded_vocab_size) * c.channels;
  EXPECT_DOUBLE_EQ(c.flops_per_token(1024), 6.0 * (N - table) + 12.0 * 12 * 768 * 1024);
  c.tied_embeddings = true;
  EXPECT_DOUBLE_EQ(c.flops_per_token(1024),
                   6.0 * double(c.num_parameters()) + 12.0 * 12 * 768 * 1024);
  EXPECT_DOUBLE_EQ(c.num_parameters(), N - table);
}

TEST(LlamaConfig, BucketsTileInBackwardOrder) {
  for (bool tied : {false, true}) {
    llama_config c = tiny_config();
    c.tied_embeddings = tied;
    const auto buckets = tk::model::llama_gradient_buckets(c);
    ASSERT_EQ(buckets.size(), 2u + 2u);
    EXPECT_NO_THROW(tk::model::check_buckets_tile(buckets, c.num_parameters(), "test"));
    EXPECT_EQ(buckets.front().name, "head");
    EXPECT_EQ(buckets.front().ranges.size(), tied ? 1u : 2u);
    EXPECT_EQ(buckets[tk::model::llama_layer_bucket(c, 1)].name, "layer 1");
    EXPECT_EQ(buckets[tk::model::llama_layer_bucket(c, 0)].ranges.size(), 6u);
    EXPECT_EQ(buckets[tk::model::llama_embedding_bucket(c)].name, "embeddings");
  }
}

TEST(LlamaKernels, RopeIsRotateHalfWithHfAngles) {
  const int T = 6, hs = 8, heads = 2;
  const float theta = 500.0f;
  const tk::model::detail::rope_table rope(T, hs, theta);
  std::vector<double> x(std::size_t(T) * heads * hs);
  std::mt19937 rng(1);
  std::normal_distribution<double> n;
  for (double& v : x) v = n(rng);
  std::vector<double> y = x;
  tk::model::detail::rope_rotate(y.data(), rope, T, T, heads, hs, heads * hs, false);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < hs / 2; ++i) {
        const double angle = t * std::pow(double(theta), -2.0 * i / hs);
        const double* v = x.data() + (t * heads + h) * hs;
        const double* w = y.data() + (t * heads + h) * hs;
        // Pairs (i, i + hs/2), as transformers' rotate_half, not adjacent (2i, 2i+1).
        EXPECT_NEAR(w[i], v[i] * std::cos(angle) - v[i + hs / 2] * std::sin(angle), 1e-5);
        EXPECT_NEAR(w[i + hs / 2], v[i + hs / 2] * std::cos(angle) + v[i] * std::sin(angle), 1e-5);
      }
  tk::model::detail::rope_rotate(y.data(), rope, T, T, heads, hs, heads * hs, true);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], 1e-6);  // float cos²+sin²
}

TEST(LlamaCpu, GradientsMatchFiniteDifferencesSwigluGqa) {
  check_finite_differences(tiny_config());
}

TEST(LlamaCpu, GradientsMatchFiniteDifferencesRelu2QkNormTied) {
  llama_config c = tiny_config();
  c.mlp = llama_mlp::relu_squared;
  c.qk_norm = true;
  c.tied_embeddings = true;
  check_finite_differences(c);
}

TEST(LlamaCpu, GradientsMatchFiniteDifferencesMultiHeadQkNorm) {
  llama_config c = tiny_config();
  c.num_kv_heads = c.num_heads;
  c.qk_norm = true;
  check_finite_differences(c);
}

TEST(LlamaCpu, LossAtInitialisationIsLogVocab) {
  tk::model::llama_cpu m(llama_config::preset("d2"), 42);
  const tk::host_batch batch = random_batch(2, 32, 50257, 5);
  const float loss = m.forward(tk::view_of(batch));
  EXPECT_NEAR(loss, std::log(50257.0), 0.03 * std::log(50257.0));
  const auto& lm = find_tensor(m.parameter_layout(), "lm_head");
  for (std::size_t i = std::size_t(50257) * 128; i < lm.numel(); ++i)
    ASSERT_EQ(m.parameters()[lm.offset + i], 0.0f) << "padded lm_head element " << i;
}

TEST(LlamaCpu, SgdOnAFixedBatchLowersTheLoss) {
  const llama_config cfg = small_config();
  tk::model::llama_cpu m(cfg, 7);
  const tk::host_batch batch = random_batch(2, 16, cfg.vocab_size, 8);
  const auto [first, last] = tk::test_model::sgd_on_one_batch(m, batch, 12, 1.0f);
  EXPECT_LT(last, 0.8f * first) << "first " << first << " last " << last;
}

TEST(LlamaCpu, MicroStepsAddBucketByBucketAndPublishEachOnce) {
  const llama_config cfg = small_config();
  tk::model::llama_cpu a(cfg, 11), b(cfg, 11);
  const tk::host_batch first = random_batch(2, 16, cfg.vocab_size, 12);
  const tk::host_batch second = random_batch(2, 16, cfg.vocab_size, 13);
  // b computes each micro-batch's gradient from zero; a accumulates through the protocol.
  b.zero_grad();
  b.forward_backward(tk::view_of(second), 0.5f);
  const std::vector<float> g2(b.gradients().begin(), b.gradients().end());
  b.zero_grad();
  b.forward_backward(tk::view_of(first), 0.5f);
  std::vector<int> published;
  struct recorder {
    static void ready(void* self, std::size_t i) {
      static_cast<std::vector<int>*>(self)->push_back(int(i));
    }
  };
  tk::host_context ctx;
  a.zero_grad(ctx);
  a.forward_backward(tk::view_of(first), {0.5f, 0, 2, {&published, &recorder::ready}}, ctx);
  EXPECT_TRUE(published.empty()) << "buckets are published on the last micro-step only";
  a.forward_backward(tk::view_of(second), {0.5f, 1, 2, {&published, &recorder::ready}}, ctx);
  std::vector<int> want(a.gradient_buckets().size());
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = int(i);
  EXPECT_EQ(published, want);
  for (std::size_t i = 0; i < g2.size(); ++i)
    ASSERT_EQ(a.gradients()[i], b.gradients()[i] + g2[i]) << i;  // bit for bit: (c0) + c1
  // The step's loss is the mean of the micro-steps' (b's last is the first micro-batch's).
  EXPECT_EQ(a.step_loss(), (double(float(b.last_loss())) + double(float(a.last_loss()))) / 2);
}

TEST(LlamaCpu, BitIdenticalRunToRunAndFloatNearDouble) {
  const llama_config cfg = small_config();
  const tk::host_batch batch = random_batch(4, 32, cfg.vocab_size, 13);
  tk::model::llama_cpu a(cfg, 5), b(cfg, 5);
  const float la = a.forward_backward(tk::view_of(batch), 1.0f);
  const float lb = b.forward_backward(tk::view_of(batch), 1.0f);
  EXPECT_EQ(std::memcmp(&la, &lb, sizeof la), 0);
  EXPECT_EQ(std::memcmp(a.gradients().data(), b.gradients().data(), a.gradients().size_bytes()), 0);
  a.zero_grad();
  const float la2 = a.forward_backward(tk::view_of(batch), 1.0f);
  EXPECT_EQ(std::memcmp(&la, &la2, sizeof la), 0);
  EXPECT_EQ(std::memcmp(a.gradients().data(), b.gradients().data(), a.gradients().size_bytes()), 0);

  tk::model::basic_llama_cpu<double> d(cfg, 5);
  const double ld = d.forward_backward(tk::view_of(batch), 1.0f);
  EXPECT_NEAR(la, ld, 1e-4 * ld);
  double max_abs = 0, max_diff = 0;
  for (std::size_t i = 0; i < d.gradients().size(); ++i) {
    max_abs = std::max(max_abs, std::abs(d.gradients()[i]));
    max_diff = std::max(max_diff, std::abs(double(a.gradients()[i]) - d.gradients()[i]));
  }
  EXPECT_LT(max_diff, 1e-3 * max_abs);
}

TEST(LlamaCpu, LogitsAreCausalAndGiveTheLoss) {
  const llama_config cfg = small_config();
  tk::model::llama_cpu m(cfg, 3);
  randomise(m, 4);
  tk::test_model::check_logits_give_loss_and_are_causal(m, cfg.vocab_size, cfg.padded_vocab_size);
}

TEST(LlamaCpu, RejectsBadBatchesAndCoversStateByLayout) {
  const llama_config cfg = tiny_config();
  tk::model::llama_cpu m(cfg, 1);
  tk::host_batch b = random_batch(1, 4, cfg.vocab_size, 1);
  b.targets[2] = cfg.vocab_size;
  tk::test_model::expect_config_error([&] { m.forward_backward(tk::view_of(b), 1.0f); },
                                      "vocab_size=37");
  const tk::host_batch long_batch = random_batch(1, cfg.max_seq_len + 1, cfg.vocab_size, 2);
  tk::test_model::expect_config_error([&] { m.forward(tk::view_of(long_batch)); },
                                      "llama_config.max_seq_len");
  tk::test_model::check_state_covers_layout(m);
}

TEST(LlamaCpu, GeneratesThroughTheSharedSampler) {
  const llama_config cfg = tiny_config();
  tk::model::llama_cpu m(cfg, 3);
  randomise(m, 6);
  const std::vector<std::int32_t> prompt{5, 9, 1};
  tk::model::sampling_config greedy;
  greedy.temperature = 0.0f;
  const auto out = tk::model::generate(m, prompt, 12, greedy);  // past max_seq_len: a window
  ASSERT_EQ(out.size(), 12u);
  // The first token is the argmax over the V real tokens of the prompt's last logits.
  const auto logits = m.forward_logits(prompt, 1, 3);
  const float* last = logits.data() + 2 * std::size_t(cfg.padded_vocab_size);
  EXPECT_EQ(out[0], std::int32_t(std::max_element(last, last + cfg.vocab_size) - last));
  for (std::int32_t t : out) EXPECT_LT(t, cfg.vocab_size);
  tk::model::sampling_config sampled;
  sampled.seed = 7;
  EXPECT_EQ(tk::model::generate(m, prompt, 12, sampled),
            tk::model::generate(m, prompt, 12, sampled));
}
