// tests/model/test_gpt2_golden.cpp — gpt2_cpu and adamw_cpu against an independent implementation:
// the golden fixtures (tests/fixtures/golden, PyTorch in float64 from the same llm.c model file
// and batch). The other CPU model tests check gradients against the model's own forward, so a
// slip in the forward (a LayerNorm epsilon, a GELU constant, a scale) would pass them; here the
// logits, the loss, every parameter's gradient and the parameters after 3 AdamW steps must match
// to fp32 accuracy (≤ 1e-5 relative per tensor).
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "../fixtures/golden/golden_fixture.hpp"
#include "trainkit/core/batch.hpp"
#include "trainkit/model/gpt2/config.hpp"
#include "trainkit/model/gpt2/cpu.hpp"
#include "trainkit/model/gpt2/llmc_file.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/grad_clip.hpp"

namespace {

using trainkit::test_golden::golden_fixture;
using trainkit::test_golden::relative_error;

constexpr double fp32_tolerance = 1e-5;

trainkit::batch_view<trainkit::host_memory> batch_of(const golden_fixture& g) {
  return {g.inputs.data(), g.targets.data(), g.batch, g.seq};
}

// Per tensor of the layout, so a failure names the tensor.
void expect_per_tensor(const trainkit::model::gpt2_config& cfg, std::span<const float> got,
                       const std::vector<float>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& t : trainkit::model::gpt2_parameter_layout(cfg))
    EXPECT_LE(relative_error(got.data() + t.offset, want.data() + t.offset, t.numel()), tol)
        << what << " of " << t.name;
}

TEST(Gpt2Golden, LogitsAndLossMatchPyTorch) {
  const golden_fixture g = trainkit::test_golden::load_golden();
  auto m = trainkit::model::load_llmc_gpt2_cpu<float>(g.model_file);
  ASSERT_EQ(m.config().channels, g.config.channels);
  const auto logits = m.forward_logits(g.inputs, g.batch, g.seq);
  ASSERT_EQ(logits.size(), g.logits.size());
  EXPECT_LE(relative_error(logits.data(), g.logits.data(), logits.size()), fp32_tolerance);
  const float loss = m.forward(batch_of(g));
  EXPECT_NEAR(loss, g.loss, fp32_tolerance * g.loss);
}

TEST(Gpt2Golden, EveryParameterGradientMatchesPyTorch) {
  const golden_fixture g = trainkit::test_golden::load_golden();
  auto m = trainkit::model::load_llmc_gpt2_cpu<float>(g.model_file);
  m.zero_grad();
  const float loss = m.forward_backward(batch_of(g), 1.0f);
  EXPECT_NEAR(loss, g.loss, fp32_tolerance * g.loss);
  expect_per_tensor(m.config(), m.gradients(), g.grads, fp32_tolerance, "gradient");
}

TEST(Gpt2Golden, ParametersAfterThreeAdamwStepsMatchPyTorch) {
  const golden_fixture g = trainkit::test_golden::load_golden();
  auto m = trainkit::model::load_llmc_gpt2_cpu<float>(g.model_file);
  trainkit::optim::adamw_cpu opt(m, g.adamw);
  trainkit::optim::clip_then_update<trainkit::host_memory> step(g.grad_clip);
  for (int s = 0; s < g.steps; ++s) {
    m.zero_grad();
    const float loss = m.forward_backward(batch_of(g), 1.0f);
    EXPECT_NEAR(loss, g.step_losses[std::size_t(s)], fp32_tolerance * g.step_losses[std::size_t(s)])
        << "step " << s;
    (void)step(opt, m, g.lr);
  }
  // The key bias is the exception: its true gradient is exactly 0 (a constant added to every key
  // shifts all of a query's scores equally, and softmax ignores that), so fp32 leaves rounding
  // noise of ~1e-9 there, which Adam's g/(√v + ε) turns into steps of up to lr; float64 leaves
  // ~1e-17, i.e. no step. Its slice is checked against that bound, everything else at fp32.
  const auto& cfg = m.config();
  const std::size_t C = std::size_t(cfg.channels);
  const std::span<const float> p = m.parameters();
  std::vector<float> got(p.begin(), p.end()), want = g.params_after_3;
  const auto layout = trainkit::model::gpt2_parameter_layout(cfg);
  const auto& qkvb = layout[std::size_t(trainkit::model::gpt2_tensor::qkvb)];
  ASSERT_EQ(qkvb.name, "qkvb");
  for (std::size_t l = 0; l < std::size_t(cfg.num_layers); ++l) {
    for (std::size_t c = C; c < 2 * C; ++c) {
      const std::size_t i = qkvb.offset + l * 3 * C + c;
      EXPECT_LE(std::abs(got[i] - want[i]), float(g.steps) * g.lr * 1.01f) << "key bias " << i;
      got[i] = want[i];
    }
  }
  expect_per_tensor(cfg, got, want, fp32_tolerance, "parameter");
}

}  // namespace
