// GPU test for trainkit/optim/muon_cuda.hpp: three updates of a d2 gpt2_cuda from fixed random
// gradients (never zeros) and a clipping factor of 0.8 in device memory, against the host twin of
// the whole step (optim/detail/muon_cuda_twin.hpp, run by muon_twin_reference.cpp), which the CPU
// tests hold to muon_cpu and to the PyTorch fixtures. The model's parameters are poisoned (NaN)
// between the optimizer's construction and the first update: every element must be rewritten from
// the master weights. And muon_cuda on the GPT-2 cases of the PyTorch fixtures (tests/fixtures/
// muon) at the tolerances its twin meets there on the CPU. Skips without a device (ctest label
// `gpu`). Never run on a GPU yet.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "../cuda/gpu_test_env.hpp"
#include "muon_fixtures.hpp"
#include "muon_twin_reference.hpp"
#include "trainkit/core/bf16.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/execution_context.hpp"
#include "trainkit/model/gpt2/cuda.hpp"
#include "trainkit/optim/concepts.hpp"
#include "trainkit/optim/muon_cuda.hpp"

namespace tk = trainkit;
namespace to = trainkit::optim;

static_assert(to::optimizer_for<to::muon_cuda, tk::model::gpt2_cuda>,
              "muon_cuda must satisfy optimizer_for<gpt2_cuda>");

namespace {

std::vector<float> download(const tk::model::gpt2_cuda& model) {
  std::vector<float> out(model.num_parameters());
  model.copy_parameters_to_host(out);
  return out;
}

}  // namespace

TEST(MuonCuda, ThreeUpdatesMatchTheHostTwin) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  tk::model::gpt2_cuda model(tk::model::gpt2_config::preset("d2"), /*seed=*/11);
  to::muon_config config;
  config.weight_decay = 0.1f;  // exercise the decoupled decay of both halves
  config.adamw.weight_decay = 0.1f;
  config.lr_ratio = double(0.02f) / double(1e-3f);  // Muon's 0.02 at a 1e-3 schedule peak
  const std::vector<float> start = download(model);
  to::muon_cuda opt(model, config);
  EXPECT_EQ(opt.shape_groups(), 3u);  // C×C (q, k, v, attention projection), 4C×C, C×4C
  const std::size_t n = model.num_parameters();

  tk::cuda::execution_context ctx;
  tk::cuda::device_buffer<float> clip(2);
  const std::vector<float> norm_and_factor{1.25f, 0.8f};
  tk::cuda::copy_to_device(clip.data(), std::span<const float>(norm_and_factor), ctx.stream());
  TRAINKIT_CUDA_CHECK(
      cudaMemsetAsync(model.parameters().data(), 0xff, n * 2, ctx.stream()));  // NaN

  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.01f);
  std::vector<std::vector<float>> grads;
  const std::vector<float> lrs{1e-3f, 8e-4f, 5e-4f}, factors{0.8f, 0.8f, 0.8f};
  for (int s = 0; s < 3; ++s) {
    std::vector<float> g(n);
    std::vector<tk::bf16> gb(n);
    for (std::size_t i = 0; i < n; ++i) {
      gb[i] = tk::bf16::from_float(normal(rng));
      g[i] = gb[i].to_float();
    }
    grads.push_back(g);
    tk::cuda::copy_to_device(model.gradients().data(), std::span<const tk::bf16>(gb), ctx.stream());
    opt.update(model, lrs[std::size_t(s)], {clip.data()}, ctx);
  }
  ctx.synchronize();
  EXPECT_EQ(opt.steps_taken(), 3u);

  const std::vector<float> twin = muon_twin_reference::master_after(model.parameter_layout(), start,
                                                                    config, grads, lrs, factors);
  const std::vector<float> master = opt.master_to_host(), params = download(model);
  for (const tk::tensor_info& t : model.parameter_layout()) {
    double num = 0, den = 0;
    std::size_t not_rounded = 0;
    for (std::size_t i = t.offset; i < t.offset + t.numel(); ++i) {
      const double ours = double(master[i]) - tk::bf16::from_float(start[i]).to_float();
      const double theirs = double(twin[i]) - tk::bf16::from_float(start[i]).to_float();
      num += (ours - theirs) * (ours - theirs);
      den += theirs * theirs;
      not_rounded += params[i] != tk::bf16::from_float(master[i]).to_float();
    }
    // The model holds bf16(master), every element rewritten after the poison.
    EXPECT_EQ(not_rounded, 0u) << t.name;
    if (config.muon_roles.contains(t.role)) {
      // The same roundings as the twin, fp32 sums in another order inside bf16 GEMMs: the
      // Newton–Schulz test's 2e-2 (test_muon_cuda.cu).
      EXPECT_LT(std::sqrt(num / den), 2e-2) << t.name;
    } else {
      // adamw_cuda's kernel is adamw_cpu's formula without FMA contraction: a bit or two.
      EXPECT_LT(std::sqrt(num / den), 1e-5) << t.name;
    }
  }
}

TEST(MuonCuda, StateNamesFollowMuonCpu) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  tk::model::gpt2_cuda model(tk::model::gpt2_config::preset("d2"), /*seed=*/11);
  to::muon_cuda opt(model, to::muon_config{});
  std::vector<std::string> names;
  for (const tk::state_tensor& t : opt.state()) names.push_back(t.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"optim.adamw.master", "optim.adamw.m", "optim.adamw.v",
                                      "optim.step", "optim.muon.momentum", "optim.muon.master"}));
}

// The GPT-2 cases of the PyTorch fixtures (Nesterov with 5 steps, and without with fewer) on a
// gpt2_cuda of the fixture's shape: the change over 3 steps per tensor within what the twin
// reaches on the CPU (test_muon_cuda_twin.cpp: Muon < 2e-2, AdamW < 2e-3).
TEST(MuonCuda, Gpt2FixturesWithinTheTwinsTolerance) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  const muon_fixtures::golden_file f = muon_fixtures::load();
  const tk::model::gpt2_config cfg{.max_seq_len = 16,
                                   .vocab_size = 64,
                                   .padded_vocab_size = 64,
                                   .num_layers = 2,
                                   .num_heads = 2,
                                   .channels = 64};
  const auto schedule = f.meta.at("schedule").get<std::vector<float>>();
  const auto clip = f.meta.at("clip").get<std::vector<double>>();
  const std::size_t stride = f.meta.at("stride");
  int cases = 0;
  for (const muon_fixtures::golden_case& g : f.cases) {
    if (g.name.rfind("gpt2", 0) != 0) continue;  // the Llama layout has no CUDA model here
    ++cases;
    tk::model::gpt2_cuda model(cfg, /*seed=*/1);
    ASSERT_EQ(model.num_parameters(), g.model.params.size()) << g.name;
    ASSERT_TRUE(std::ranges::equal(model.parameter_layout(), g.model.layout)) << g.name;
    model.copy_parameters_from_host(g.model.params);  // rounded to bf16
    to::muon_cuda opt(model, g.config);
    tk::cuda::execution_context ctx;
    tk::cuda::device_buffer<float> factor(2);
    for (int s = 0; s < f.meta.at("steps").get<int>(); ++s) {
      const std::vector<float> norm_and_factor{0.0f, float(clip[std::size_t(s)])};
      tk::cuda::copy_to_device(factor.data(), std::span<const float>(norm_and_factor),
                               ctx.stream());
      const std::vector<float> grads = muon_fixtures::hashed_values(
          g.model.params.size(), f.meta.at("grad_seed").get<int>() + s, f.meta.at("grad_scale"));
      std::vector<tk::bf16> gb(grads.size());
      for (std::size_t i = 0; i < gb.size(); ++i) gb[i] = tk::bf16::from_float(grads[i]);
      tk::cuda::copy_to_device(model.gradients().data(), std::span<const tk::bf16>(gb),
                               ctx.stream());
      opt.update(model, schedule[std::size_t(s)], {factor.data()}, ctx);
    }
    ctx.synchronize();
    const std::vector<float> master = opt.master_to_host();
    for (const tk::tensor_info& t : g.model.layout) {
      double num = 0, den = 0;
      for (std::size_t i = (t.offset + stride - 1) / stride * stride; i < t.offset + t.numel();
           i += stride) {
        const double start = tk::bf16::from_float(g.model.params[i]).to_float();
        const double theirs = double(g.expected[i / stride]) - double(g.model.params[i]);
        const double ours = double(master[i]) - start;
        num += (ours - theirs) * (ours - theirs);
        den += theirs * theirs;
      }
      EXPECT_LT(std::sqrt(num / den), g.config.muon_roles.contains(t.role) ? 2e-2 : 2e-3)
          << g.name << " " << t.name;
    }
  }
  EXPECT_EQ(cases, 2);
}
