// tests/cuda/test_gpt2_golden.cu — gpt2_cuda and adamw_cuda against the golden fixtures
// (tests/fixtures/golden: PyTorch in float64 from the same llm.c model file and batch) at bf16
// tolerance. The CUDA model holds the file's weights rounded to bf16, so the bounds are those of
// the CPU comparison in test_gpt2_cuda.cu: loss within 1%, every gradient tensor with cosine
// > 0.99 and relative error < 5%; the AdamW update (parameters after 3 steps minus before, which
// cancels the bf16 rounding of the start) within 5% per tensor. Skips without a device
// (TRAINKIT_REQUIRE_GPU=1: fails).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "../fixtures/golden/golden_fixture.hpp"
#include "gpu_test_support.cuh"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/model/gpt2/cuda.hpp"
#include "trainkit/model/gpt2/llmc_file.hpp"
#include "trainkit/optim/adamw_cuda.hpp"

namespace {

using trainkit::test_golden::golden_fixture;
using trainkit::test_gpu::cosine;
using trainkit::test_gpu::fvec;
using trainkit::test_gpu::relative_error;

struct golden_run {
  golden_fixture g = trainkit::test_golden::load_golden();
  fvec weights = fvec(g.config.num_parameters());
  trainkit::cuda::device_buffer<std::int32_t> inputs, targets;

  golden_run() {
    trainkit::model::read_llmc_parameters(g.model_file, g.config, std::span<float>(weights));
    inputs = trainkit::test_gpu::to_device_raw(g.inputs);
    targets = trainkit::test_gpu::to_device_raw(g.targets);
  }
  trainkit::batch_view<trainkit::device_memory> batch() const {
    return {inputs.data(), targets.data(), g.batch, g.seq};
  }
};

fvec slice(const std::vector<float>& v, const trainkit::tensor_info& t) {
  return fvec(v.begin() + std::ptrdiff_t(t.offset),
              v.begin() + std::ptrdiff_t(t.offset + t.numel()));
}

TEST(Gpt2CudaGolden, LossAndEveryGradientMatchPyTorch) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  const golden_run r;
  trainkit::model::gpt2_cuda m(r.g.config, std::span<const float>(r.weights));
  const float loss = m.forward_backward(r.batch(), 1.0f);
  EXPECT_NEAR(loss, r.g.loss, 0.01 * r.g.loss);
  fvec grads(m.num_parameters());
  m.gradients_to_host(grads);
  for (const auto& t : m.parameter_layout()) {
    const fvec got = slice(grads, t), want = slice(r.g.grads, t);
    EXPECT_GT(cosine(got, want), 0.99) << t.name;
    EXPECT_LT(relative_error(got, want), 0.05) << t.name;
  }
}

TEST(Gpt2CudaGolden, ThreeAdamwStepsMatchPyTorch) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  const golden_run r;
  trainkit::model::gpt2_cuda m(r.g.config, std::span<const float>(r.weights));
  trainkit::optim::adamw_cuda opt(m, r.g.adamw);
  trainkit::optim::clip_then_update<trainkit::device_memory> step(r.g.grad_clip);
  const std::vector<float> before = opt.master_to_host();  // the bf16-rounded start
  for (int s = 0; s < r.g.steps; ++s) {
    m.zero_grad();
    const float loss = m.forward_backward(r.batch(), 1.0f);
    EXPECT_NEAR(loss, r.g.step_losses[std::size_t(s)], 0.01 * r.g.step_losses[std::size_t(s)])
        << "step " << s;
    (void)step(opt, m, r.g.lr);
  }
  const std::vector<float> after = opt.master_to_host();
  fvec got(after.size()), want(after.size());
  for (std::size_t i = 0; i < after.size(); ++i) {
    got[i] = after[i] - before[i];
    want[i] = r.g.params_after_3[i] - r.weights[i];
  }
  // The key bias's true gradient is 0 (softmax ignores a shift shared by all keys): rounding
  // noise decides its Adam steps, bounded by lr each (see tests/model/test_gpt2_golden.cpp).
  const std::size_t C = std::size_t(r.g.config.channels);
  const auto& qkvb = m.parameter_layout()[std::size_t(trainkit::model::gpt2_tensor::qkvb)];
  ASSERT_EQ(qkvb.name, "qkvb");
  for (std::size_t l = 0; l < std::size_t(r.g.config.num_layers); ++l) {
    for (std::size_t c = C; c < 2 * C; ++c) {
      const std::size_t i = qkvb.offset + l * 3 * C + c;
      EXPECT_LE(std::abs(got[i]), float(r.g.steps) * r.g.lr * 1.01f) << "key bias " << i;
      got[i] = want[i] = 0.0f;
    }
  }
  for (const auto& t : m.parameter_layout())
    EXPECT_LT(relative_error(slice(got, t), slice(want, t)), 0.05) << "update of " << t.name;
}

}  // namespace
