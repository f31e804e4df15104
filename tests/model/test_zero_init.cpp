// Tests of zero-initialised output projections (model/recipe/zero_init.hpp; issue 38) on the Llama
// CPU family: exactly attprojw, fcprojw (and lm_head) become zero, and the model then starts as
// its theory says — every block the identity, and with a zero head every logit 0, so the loss is
// ln V exactly and only the head receives a gradient at the first step.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "trainkit/core/batch.hpp"
#include "trainkit/model/llama/cpu.hpp"
#include "trainkit/model/recipe/zero_init.hpp"

namespace tk = trainkit;
namespace tmod = trainkit::model;

namespace {

tmod::llama_config small_config() {
  tmod::llama_config c;
  c.max_seq_len = 32;
  c.vocab_size = 300;
  c.padded_vocab_size = 384;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.channels = 64;
  c.hidden_size = 160;
  return c;
}

tk::host_batch random_batch(int B, int T, int vocab, std::uint32_t seed) {
  tk::host_batch b(B, T);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> tok(0, vocab - 1);
  for (auto& x : b.inputs) x = tok(rng);
  for (auto& x : b.targets) x = tok(rng);
  return b;
}

}  // namespace

TEST(ZeroInit, ZeroesExactlyTheProjectionsAndTheHead) {
  tmod::basic_llama_cpu<double> m(small_config(), 1);
  const std::vector<double> before(m.parameters().begin(), m.parameters().end());
  const std::size_t n =
      tmod::recipe::zero_output_projections(m.parameters(), m.parameter_layout(), true);
  std::size_t expected = 0;
  for (const tk::tensor_info& t : m.parameter_layout()) {
    const bool zero = t.name == "attprojw" || t.name == "fcprojw" || t.name == "lm_head";
    if (zero) expected += t.numel();
    std::size_t zeros = 0, same = 0;
    for (std::size_t i = t.offset; i < t.offset + t.numel(); ++i) {
      zeros += m.parameters()[i] == 0.0;
      same += m.parameters()[i] == before[i];
    }
    if (zero)
      EXPECT_EQ(zeros, t.numel()) << t.name;
    else
      EXPECT_EQ(same, t.numel()) << t.name;  // untouched
  }
  EXPECT_EQ(n, expected);
}

// A zero head: logits all 0, so the loss is ln V (the V real tokens, padding masked) and the
// gradient reaches the head only (every other gradient passes through the zero head).
TEST(ZeroInit, AZeroHeadStartsAtLnVAndOnlyTheHeadLearnsFirst) {
  const auto cfg = small_config();
  tmod::basic_llama_cpu<double> m(cfg, 1);
  tmod::recipe::zero_output_projections(m.parameters(), m.parameter_layout(), true);
  const tk::host_batch batch = random_batch(2, 8, cfg.vocab_size, 3);
  m.zero_grad();
  const double loss = m.forward_backward(tk::view_of(batch), 1.0f);
  EXPECT_NEAR(loss, std::log(double(cfg.vocab_size)), 1e-5);  // the loss is returned as float
  for (const tk::tensor_info& t : m.parameter_layout()) {
    double norm = 0;
    for (std::size_t i = t.offset; i < t.offset + t.numel(); ++i)
      norm += m.gradients()[i] * m.gradients()[i];
    if (t.name == "lm_head")
      EXPECT_GT(norm, 0.0);
    else
      EXPECT_EQ(norm, 0.0) << t.name;
  }
}

// Zero projections only: every block is the identity, so the blocks' other weights do not matter:
// scrambling them leaves the loss unchanged to the bit.
TEST(ZeroInit, ZeroProjectionsMakeEveryBlockTheIdentity) {
  const auto cfg = small_config();
  tmod::basic_llama_cpu<double> a(cfg, 1), b(cfg, 1);
  std::mt19937 rng(7);
  std::normal_distribution<double> n(0.0, 0.5);
  for (const tk::tensor_info& t : b.parameter_layout())
    if (t.name == "qkvw" || t.name == "fcw" || t.name == "ln1w" || t.name == "ln2w")
      for (std::size_t i = t.offset; i < t.offset + t.numel(); ++i) b.parameters()[i] += n(rng);
  for (auto* m : {&a, &b})
    tmod::recipe::zero_output_projections(m->parameters(), m->parameter_layout(), false);
  const tk::host_batch batch = random_batch(2, 8, cfg.vocab_size, 4);
  const double la = a.forward(tk::view_of(batch)), lb = b.forward(tk::view_of(batch));
  EXPECT_EQ(la, lb);
  EXPECT_GT(std::abs(la - std::log(double(cfg.vocab_size))), 1e-3);  // the head is not zero
  // Without the zeroing the scrambled weights change the loss (the comparison can fail).
  tmod::basic_llama_cpu<double> c(cfg, 1), d(cfg, 1);
  for (std::size_t i = 0; i < d.parameters().size(); ++i) d.parameters()[i] = b.parameters()[i];
  const auto& layout = c.parameter_layout();
  for (const tk::tensor_info& t : layout)
    if (t.name == "attprojw" || t.name == "fcprojw")
      for (std::size_t i = t.offset; i < t.offset + t.numel(); ++i)
        d.parameters()[i] = c.parameters()[i];
  EXPECT_NE(c.forward(tk::view_of(batch)), d.forward(tk::view_of(batch)));
}

TEST(ZeroInit, AnUnknownLayoutOrATiedHeadIsRefused) {
  std::vector<float> p(100, 1.0f);
  const std::vector<tk::tensor_info> layout{{"w", {10, 10}, 0, tk::tensor_role::matrix}};
  EXPECT_THROW(tmod::recipe::zero_output_projections(std::span<float>(p), layout, false),
               tk::config_error);
  auto cfg = small_config();
  cfg.tied_embeddings = true;
  tmod::basic_llama_cpu<float> m(cfg, 1);
  EXPECT_THROW(tmod::recipe::zero_output_projections(m.parameters(), m.parameter_layout(), true),
               tk::config_error);
  EXPECT_NO_THROW(
      tmod::recipe::zero_output_projections(m.parameters(), m.parameter_layout(), false));
}
