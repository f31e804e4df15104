// GPU tests of trainkit/optim/adamw_cuda.hpp against adamw_cpu (optim_reference.cpp, g++) on random
// data over several steps: with and without clipping, a layout mixing decayed and undecayed
// tensors with gaps and odd sizes (segments that end mid-chunk). The fp32 master weights must
// match the CPU optimizer's parameters within fp32 rounding (the kernel repeats adamw_cpu's
// operation order without FMA contraction, so in practice they agree to the last bit or two), the
// norms too, and the model's bf16 parameters (NaN-poisoned before each step) must be the master
// weights rounded to nearest. Also: state() tensors, stochastic rounding within one bf16 ulp, the
// concept check with gpt2_cuda. Every device test skips without a CUDA device.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_test_support.cuh"
#include "optim_reference.hpp"
#include "trainkit/model/gpt2/cuda.hpp"
#include "trainkit/optim/adamw_cuda.hpp"
#include "trainkit/optim/concepts.hpp"

static_assert(
    trainkit::optim::optimizer_for<trainkit::optim::adamw_cuda, trainkit::model::gpt2_cuda>,
    "adamw_cuda must satisfy optimizer_for<gpt2_cuda>");

// A named namespace: nvcc warns (#177) about the unused members of a type in an anonymous one.
namespace adamw_cuda_test {

using namespace trainkit::test_gpu;
using trainkit::bf16;
using trainkit::tensor_info;
using trainkit::optim::adamw_config;
using trainkit::optim::adamw_cuda;

/// A device "model" that is only bf16 parameters, bf16 gradients and a layout.
struct buffer_model {
  using memory_space = trainkit::device_memory;
  using parameter_type = bf16;

  std::vector<tensor_info> layout;
  trainkit::cuda::device_buffer<bf16> params, grads;

  float forward_backward(trainkit::batch_view<trainkit::device_memory>, float) {
    throw std::logic_error("unused");
  }
  float forward(trainkit::batch_view<trainkit::device_memory>) { throw std::logic_error("unused"); }
  void zero_grad() {}
  double flops_per_token(int) const { return 0.0; }
  std::span<const tensor_info> parameter_layout() const { return layout; }
  std::span<bf16> parameters() { return params.device_span(); }
  std::span<bf16> gradients() { return grads.device_span(); }
  std::size_t num_parameters() const { return params.size(); }
  std::vector<trainkit::state_tensor> state() { return {}; }
};
static_assert(trainkit::optim::optimizer_for<adamw_cuda, buffer_model>);

/// Tensors with odd sizes, a gap no tensor names (offset 7000..7100) and an unnamed tail; the
/// decayed ones span several 2048-element chunks and end mid-chunk.
std::vector<tensor_info> test_layout(std::size_t& total) {
  std::vector<tensor_info> l;
  using trainkit::tensor_role;
  l.push_back({"w1", {3, 1000}, 0, tensor_role::matrix});       // 3000
  l.push_back({"b1", {17}, 3000, tensor_role::bias});           // 17
  l.push_back({"w2", {79, 50}, 3017, tensor_role::embedding});  // 3950 -> 6967
  l.push_back({"ln", {33}, 6967, tensor_role::norm});           // 33 -> 7000
  l.push_back({"w3", {2049, 3}, 7100, tensor_role::matrix});    // 6147 -> 13247
  l.push_back({"one", {1}, 13247, tensor_role::bias});          // 13248
  total = 13248 + 301;                                          // unnamed tail
  return l;
}

struct case_result {
  std::vector<float> gpu_master, cpu_params;
};

void run_against_cpu(const adamw_config& cfg, float max_norm, float grad_stddev, int steps,
                     std::uint64_t seed) {
  std::size_t n = 0;
  const auto layout = test_layout(n);
  std::mt19937_64 rng(seed);
  const fvec init = random_bf16(n, rng, 0.5f);  // bf16-exact, so both start from the same fp32
  std::vector<fvec> grads;
  std::vector<float> lrs;
  for (int s = 0; s < steps; ++s) {
    grads.push_back(random_bf16(n, rng, grad_stddev));
    lrs.push_back(1e-2f * float(s + 1) / float(steps));
  }
  const auto cpu = trainkit::test_ref::adamw_cpu_steps(layout, init, grads, lrs, cfg, max_norm);

  buffer_model m{layout, to_device(init), to_device(grads[0])};
  adamw_cuda opt(m, cfg);
  trainkit::optim::clip_then_update<trainkit::device_memory> clipped_update(max_norm);
  EXPECT_EQ(opt.master_to_host(), init) << "master weights start as the bf16 parameters";
  for (int s = 0; s < steps; ++s) {
    SCOPED_TRACE("step " + std::to_string(s + 1));
    m.grads = to_device(grads[std::size_t(s)]);
    m.params = poisoned(n);  // every parameter must be rewritten from the master weights
    const float norm = clipped_update(opt, m, lrs[std::size_t(s)]);
    EXPECT_NEAR(norm, cpu.norms[std::size_t(s)], 1e-5 * cpu.norms[std::size_t(s)]);
    const std::vector<float> master = opt.master_to_host();
    const fvec& want = cpu.params[std::size_t(s)];
    std::size_t bad = 0;
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double d = std::fabs(double(master[i]) - want[i]);
      worst = std::max(worst, d);
      if (!(d <= 1e-6 * std::fabs(want[i]) + 1e-7)) ++bad;  // a wrong decay mask: ~1e-4
    }
    EXPECT_EQ(bad, 0u) << "elements off by more than fp32 rounding; worst |diff| " << worst;
    const fvec p = to_host(m.params);
    std::size_t misrounded = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (!(p[i] == round_bf16(master[i]))) ++misrounded;
    EXPECT_EQ(misrounded, 0u) << "bf16 parameters must be the master weights rounded to nearest";
  }
  EXPECT_EQ(opt.steps_taken(), std::uint64_t(steps));
}

TEST(AdamwCuda, MatchesCpuWithoutClipping) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  adamw_config cfg;
  cfg.weight_decay = 0.1f;
  run_against_cpu(cfg, 0.0f, 1.0f, 6, 1);
}

TEST(AdamwCuda, MatchesCpuWithClipping) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  adamw_config cfg;
  cfg.weight_decay = 0.1f;
  // A threshold of 1: norms here are ~100, so the factor is far from 1 on every step.
  run_against_cpu(cfg, 1.0f, 1.0f, 6, 2);
}

TEST(AdamwCuda, MatchesCpuWithStrongDecayAndOtherBetas) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  adamw_config cfg;
  cfg.beta1 = 0.8f;
  cfg.beta2 = 0.99f;
  cfg.eps = 1e-6f;
  cfg.weight_decay = 3.0f;  // decay dominates the update: a wrong mask cannot hide
  run_against_cpu(cfg, 50.0f, 0.3f, 5, 3);
}

TEST(AdamwCuda, StateTensorsViewTheOptimizer) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::size_t n = 0;
  const auto layout = test_layout(n);
  std::mt19937_64 rng(4);
  buffer_model m{layout, to_device(random_bf16(n, rng)), to_device(random_bf16(n, rng))};
  adamw_cuda opt(m, adamw_config{});
  (void)trainkit::optim::clip_then_update<trainkit::device_memory>(1.0)(opt, m, 1e-3f);
  const auto st = opt.state();
  ASSERT_EQ(st.size(), 4u);
  const char* names[] = {"optim.master", "optim.m", "optim.v", "optim.step"};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(st[std::size_t(i)].name, names[i]);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(st[std::size_t(i)].on_device);
    EXPECT_EQ(st[std::size_t(i)].type, trainkit::dtype::f32);
    EXPECT_EQ(st[std::size_t(i)].numel(), n);
  }
  EXPECT_FALSE(st[3].on_device);
  EXPECT_EQ(*reinterpret_cast<const std::uint64_t*>(st[3].data), 1u);
  // The master tensor is the optimizer's storage: its bytes are master_to_host().
  std::vector<float> via_state(n);
  trainkit::cuda::copy_to_host(std::span<float>(via_state),
                               reinterpret_cast<const float*>(st[0].data));
  EXPECT_EQ(via_state, opt.master_to_host());
}

TEST(AdamwCuda, StochasticRoundingStaysWithinOneUlp) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::size_t n = 0;
  const auto layout = test_layout(n);
  std::mt19937_64 rng(5);
  buffer_model m{layout, to_device(random_bf16(n, rng)), to_device(random_bf16(n, rng))};
  adamw_cuda opt(m, adamw_config{}, {.stochastic_rounding = true, .seed = 9});
  (void)trainkit::optim::clip_then_update<trainkit::device_memory>(1.0)(opt, m, 1e-2f);
  const auto master = opt.master_to_host();
  const fvec p = to_host(m.params);
  std::size_t differs_from_nearest = 0, outside = 0;
  for (std::size_t i = 0; i < n; ++i) {
    // Stochastic rounding gives one of the two bf16 values around the master weight.
    const std::uint32_t u = std::bit_cast<std::uint32_t>(master[i]);
    const float toward_zero = bf16::from_bits(std::uint16_t(u >> 16)).to_float();
    const float away = bf16::from_bits(std::uint16_t((u >> 16) + 1)).to_float();
    if (!(p[i] == toward_zero || p[i] == away)) ++outside;
    if (p[i] != round_bf16(master[i])) ++differs_from_nearest;
  }
  EXPECT_EQ(outside, 0u);
  EXPECT_GT(differs_from_nearest, n / 20) << "stochastic rounding should not equal nearest";
}

TEST(AdamwCuda, RejectsAModelOfAnotherSize) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::size_t n = 0;
  const auto layout = test_layout(n);
  std::mt19937_64 rng(6);
  buffer_model m{layout, to_device(random_bf16(n, rng)), to_device(random_bf16(n, rng))};
  adamw_cuda opt(m, adamw_config{});
  buffer_model other{layout, to_device(random_bf16(n + 1, rng)),
                     to_device(random_bf16(n + 1, rng))};
  EXPECT_THROW(
      (void)trainkit::optim::clip_then_update<trainkit::device_memory>(1.0)(opt, other, 1e-3f),
      trainkit::config_error);
}

}  // namespace adamw_cuda_test
