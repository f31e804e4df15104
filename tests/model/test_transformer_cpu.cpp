// Tests for trainkit/model/transformer/cpu.hpp: what the shared CPU transformer promises every
// family, checked over three of them (GPT-2, Llama, and the rope_gpt2 fixture): buckets published
// once each, in backward's order, only on the step's last micro-step and only once final; the
// step protocol equal, bit for bit, to the convenience calls; forward's loss recomputed from
// forward_logits with gradients untouched; bad batches refused naming the model and the config
// field; state() walking the layout. Each family's own maths is its own test's job
// (test_gpt2_cpu, test_llama_cpu, test_rope_gpt2 and the golden fixtures).
#include "trainkit/model/transformer/cpu.hpp"  // first: the header compiles on its own

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "rope_gpt2/rope_gpt2.hpp"
#include "trainkit/core/batch.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/model/gpt2/cpu.hpp"
#include "trainkit/model/llama/cpu.hpp"

namespace tk = trainkit;
namespace tkm = trainkit::model;

namespace {

template <class Model>
struct family;

template <>
struct family<tkm::gpt2_cpu> {
  static tkm::gpt2_config config() {
    tkm::gpt2_config c;
    c.max_seq_len = 16;
    c.vocab_size = 53;
    c.padded_vocab_size = 128;
    c.num_layers = 2;
    c.num_heads = 2;
    c.channels = 16;
    return c;
  }
};

template <>
struct family<tkm::llama_cpu> {
  static tkm::llama_config config() {
    tkm::llama_config c;
    c.max_seq_len = 16;
    c.vocab_size = 53;
    c.padded_vocab_size = 128;
    c.num_layers = 2;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.channels = 16;
    c.hidden_size = 24;
    return c;
  }
};

template <>
struct family<rope_gpt2::model<float>> {
  static rope_gpt2::config config() {
    rope_gpt2::config c;
    c.max_seq_len = 16;
    c.vocab_size = 53;
    c.padded_vocab_size = 64;
    c.num_layers = 2;
    c.num_heads = 2;
    c.channels = 16;
    return c;
  }
};

tk::host_batch random_batch(int B, int T, int vocab, std::uint32_t seed) {
  tk::host_batch b(B, T);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> tok(0, vocab - 1);
  for (auto& t : b.inputs) t = tok(rng);
  for (auto& t : b.targets) t = tok(rng);
  return b;
}

// Records each published bucket and a copy of its gradients at that moment.
template <class Model>
struct recorder {
  Model* model = nullptr;
  std::vector<std::size_t> order;
  std::vector<std::vector<float>> at_publication;
  static void ready(void* self, std::size_t i) {
    auto& r = *static_cast<recorder*>(self);
    r.order.push_back(i);
    std::vector<float> copy;
    for (const tk::gradient_range& g : r.model->gradient_buckets()[i].ranges)
      copy.insert(copy.end(), r.model->gradients().begin() + std::ptrdiff_t(g.offset),
                  r.model->gradients().begin() + std::ptrdiff_t(g.offset + g.count));
    r.at_publication.push_back(std::move(copy));
  }
};

}  // namespace

template <class Model>
class TransformerCpu : public ::testing::Test {};
using Families = ::testing::Types<tkm::gpt2_cpu, tkm::llama_cpu, rope_gpt2::model<float>>;
TYPED_TEST_SUITE(TransformerCpu, Families);

TYPED_TEST(TransformerCpu, PublishesEveryBucketOnceInOrderOnlyWhenFinal) {
  const auto cfg = family<TypeParam>::config();
  TypeParam m(cfg, 1);
  const tk::host_batch a = random_batch(2, 8, cfg.vocab_size, 2), b = random_batch(2, 8, 53, 3);
  recorder<TypeParam> rec{&m, {}, {}};
  tk::host_context ctx;
  m.zero_grad(ctx);
  m.forward_backward(tk::view_of(a), {0.5f, 0, 2, {&rec, &recorder<TypeParam>::ready}}, ctx);
  EXPECT_TRUE(rec.order.empty()) << "a bucket published before the step's last micro-step";
  m.forward_backward(tk::view_of(b), {0.5f, 1, 2, {&rec, &recorder<TypeParam>::ready}}, ctx);
  ASSERT_EQ(rec.order.size(), m.gradient_buckets().size());
  for (std::size_t i = 0; i < rec.order.size(); ++i) EXPECT_EQ(rec.order[i], i);
  EXPECT_EQ(rec.order.size(), std::size_t(cfg.num_layers) + 2);  // head, layers, embeddings
  // What a reducer read at publication is what the step ends with.
  for (std::size_t i = 0; i < rec.order.size(); ++i) {
    std::size_t k = 0;
    for (const tk::gradient_range& g : m.gradient_buckets()[i].ranges)
      for (std::size_t j = 0; j < g.count; ++j, ++k)
        ASSERT_EQ(rec.at_publication[i][k], m.gradients()[g.offset + j])
            << "bucket " << m.gradient_buckets()[i].name << " changed after publication";
  }
}

TYPED_TEST(TransformerCpu, ProtocolEqualsTheConvenienceCallsBitForBit) {
  const auto cfg = family<TypeParam>::config();
  TypeParam p(cfg, 4), c(cfg, 4);
  const tk::host_batch a = random_batch(2, 8, cfg.vocab_size, 5);
  const tk::host_batch b = random_batch(2, 8, cfg.vocab_size, 6);
  tk::host_context ctx;
  p.zero_grad(ctx);
  p.forward_backward(tk::view_of(a), {0.5f, 0, 2, {}}, ctx);
  p.forward_backward(tk::view_of(b), {0.5f, 1, 2, {}}, ctx);
  c.zero_grad();
  const float la = c.forward_backward(tk::view_of(a), 0.5f);
  const float lb = c.forward_backward(tk::view_of(b), 0.5f);
  EXPECT_TRUE(std::equal(p.gradients().begin(), p.gradients().end(), c.gradients().begin()));
  EXPECT_EQ(p.step_loss(), (double(la) + double(lb)) / 2);
}

TYPED_TEST(TransformerCpu, ForwardLeavesGradientsAndMatchesItsLogits) {
  const auto cfg = family<TypeParam>::config();
  TypeParam m(cfg, 7);
  const tk::host_batch batch = random_batch(2, 8, cfg.vocab_size, 8);
  m.zero_grad();
  const float loss = m.forward(tk::view_of(batch));
  EXPECT_TRUE(
      std::all_of(m.gradients().begin(), m.gradients().end(), [](float g) { return g == 0.0f; }));
  const auto logits = m.forward_logits(batch.inputs, 2, 8);
  const std::size_t Vp = std::size_t(cfg.padded_vocab_size);
  ASSERT_EQ(logits.size(), 16 * Vp);
  double sum = 0;  // cross-entropy over the V real columns only
  for (std::size_t r = 0; r < 16; ++r) {
    const float* row = logits.data() + r * Vp;
    const double mx = *std::max_element(row, row + cfg.vocab_size);
    double z = 0;
    for (int v = 0; v < cfg.vocab_size; ++v) z += std::exp(row[v] - mx);
    sum += std::log(z) - (row[batch.targets[r]] - mx);
  }
  EXPECT_NEAR(loss, sum / 16, 1e-4);
}

TYPED_TEST(TransformerCpu, RefusesBadBatchesNamingTheModelAndTheField) {
  const auto cfg = family<TypeParam>::config();
  TypeParam m(cfg, 1);
  const std::string name(TypeParam::block_type::model_name);
  const std::string field = std::string(TypeParam::block_type::config_name) + ".max_seq_len";
  const tk::host_batch too_long = random_batch(1, cfg.max_seq_len + 1, cfg.vocab_size, 1);
  try {
    m.forward(tk::view_of(too_long));
    ADD_FAILURE() << "T > max_seq_len accepted";
  } catch (const tk::config_error& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
  tk::host_batch bad = random_batch(1, 4, cfg.vocab_size, 1);
  bad.targets[2] = cfg.vocab_size;  // a padded row is not a token
  try {
    m.forward_backward(tk::view_of(bad), 1.0f);
    ADD_FAILURE() << "a target outside the vocabulary accepted";
  } catch (const tk::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("target token"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("vocab_size"), std::string::npos) << e.what();
  }
}

TYPED_TEST(TransformerCpu, StateWalksTheLayout) {
  const auto cfg = family<TypeParam>::config();
  TypeParam m(cfg, 1);
  const auto state = m.state();
  ASSERT_EQ(state.size(), m.parameter_layout().size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(state[i].name, "model." + m.parameter_layout()[i].name);
    EXPECT_EQ(state[i].data,
              reinterpret_cast<std::byte*>(m.parameters().data() + m.parameter_layout()[i].offset));
    EXPECT_EQ(state[i].numel(), m.parameter_layout()[i].numel());
    total += m.parameter_layout()[i].numel();
  }
  EXPECT_EQ(total, m.num_parameters());
}
