// tests/model/test_llama_golden.cpp — llama_cpu and adamw_cpu against an independent
// implementation: the golden fixtures of tests/fixtures/llama (transformers' LlamaForCausalLM in
// float64 with GQA, RoPE θ 5000, SwiGLU, an untied head; make_llama_golden.py). test_llama_cpu.cpp
// checks gradients against the model's own forward, so a slip in the forward (RoPE's pairing, the
// 1/√hs of the scores, ε inside or outside the root, the GQA head mapping) would pass it; here the
// logits, the loss, every parameter's gradient and the parameters after 3 AdamW steps must match to
// fp32 accuracy (≤ 1e-5 relative per tensor).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "../fixtures/golden/golden_fixture.hpp"
#include "../fixtures/llama/llama_golden_fixture.hpp"
#include "trainkit/core/batch.hpp"
#include "trainkit/model/llama/cpu.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/grad_clip.hpp"

namespace {

using trainkit::test_golden::llama_golden_fixture;
using trainkit::test_golden::relative_error;

constexpr double fp32_tolerance = 1e-5;

trainkit::batch_view<trainkit::host_memory> batch_of(const llama_golden_fixture& g) {
  return {g.inputs.data(), g.targets.data(), g.batch, g.seq};
}

trainkit::model::llama_cpu model_of(const llama_golden_fixture& g) {
  trainkit::model::llama_cpu m(g.config, trainkit::model::zero_parameters);
  EXPECT_EQ(m.parameters().size(), g.params.size()) << "fixture and layout disagree on the count";
  std::copy(g.params.begin(), g.params.end(), m.parameters().begin());
  return m;
}

void expect_per_tensor(const trainkit::model::llama_config& cfg, std::span<const float> got,
                       const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& t : trainkit::model::llama_parameter_layout(cfg))
    EXPECT_LE(relative_error(got.data() + t.offset, want.data() + t.offset, t.numel()),
              fp32_tolerance)
        << what << " of " << t.name;
}

TEST(LlamaGolden, LogitsAndLossMatchTransformers) {
  const llama_golden_fixture g = trainkit::test_golden::load_llama_golden();
  auto m = model_of(g);
  const auto logits = m.forward_logits(g.inputs, g.batch, g.seq);
  const std::size_t V = std::size_t(g.config.vocab_size),
                    Vp = std::size_t(g.config.padded_vocab_size);
  ASSERT_EQ(logits.size() / Vp * V, g.logits.size());
  std::vector<float> real;  // the V token columns of each row; the padded ones are zero
  for (std::size_t r = 0; r < logits.size() / Vp; ++r) {
    real.insert(real.end(), logits.begin() + std::ptrdiff_t(r * Vp),
                logits.begin() + std::ptrdiff_t(r * Vp + V));
    for (std::size_t c = V; c < Vp; ++c) ASSERT_EQ(logits[r * Vp + c], 0.0f);
  }
  EXPECT_LE(relative_error(real.data(), g.logits.data(), real.size()), fp32_tolerance);
  const float loss = m.forward(batch_of(g));
  EXPECT_NEAR(loss, g.loss, fp32_tolerance * g.loss);
}

TEST(LlamaGolden, EveryParameterGradientMatchesTransformers) {
  const llama_golden_fixture g = trainkit::test_golden::load_llama_golden();
  auto m = model_of(g);
  m.zero_grad();
  const float loss = m.forward_backward(batch_of(g), 1.0f);
  EXPECT_NEAR(loss, g.loss, fp32_tolerance * g.loss);
  expect_per_tensor(m.config(), m.gradients(), g.grads, "gradient");
}

// The head-size-64 set (make_llama_golden.py --hs64) the CUDA model is held to (test_cuda_llama):
// llama_cpu matches it too, so the two tests share a reference that does not depend on either.
TEST(LlamaGolden, HeadSize64SetMatchesTransformers) {
  const llama_golden_fixture g = trainkit::test_golden::load_llama_golden("hs64");
  EXPECT_EQ(g.config.head_size(), 64);
  EXPECT_TRUE(g.params_after_3.empty());
  auto m = model_of(g);
  const auto logits = m.forward_logits(g.inputs, g.batch, g.seq);
  const std::size_t V = std::size_t(g.config.vocab_size),
                    Vp = std::size_t(g.config.padded_vocab_size);
  std::vector<float> real;
  for (std::size_t r = 0; r < logits.size() / Vp; ++r)
    real.insert(real.end(), logits.begin() + std::ptrdiff_t(r * Vp),
                logits.begin() + std::ptrdiff_t(r * Vp + V));
  ASSERT_EQ(real.size(), g.logits.size());
  EXPECT_LE(relative_error(real.data(), g.logits.data(), real.size()), fp32_tolerance);
  m.zero_grad();
  const float loss = m.forward_backward(batch_of(g), 1.0f);
  EXPECT_NEAR(loss, g.loss, fp32_tolerance * g.loss);
  expect_per_tensor(m.config(), m.gradients(), g.grads, "gradient");
}

TEST(LlamaGolden, ParametersAfterThreeAdamwStepsMatchTorch) {
  const llama_golden_fixture g = trainkit::test_golden::load_llama_golden();
  auto m = model_of(g);
  trainkit::optim::adamw_cpu opt(m, g.adamw);
  trainkit::optim::clip_then_update<trainkit::host_memory> step(g.grad_clip);
  for (int s = 0; s < g.steps; ++s) {
    m.zero_grad();
    const float loss = m.forward_backward(batch_of(g), 1.0f);
    EXPECT_NEAR(loss, g.step_losses[std::size_t(s)], fp32_tolerance * g.step_losses[std::size_t(s)])
        << "step " << s;
    (void)step(opt, m, g.lr);
  }
  expect_per_tensor(m.config(), m.parameters(), g.params_after_3, "parameter");
}

}  // namespace
