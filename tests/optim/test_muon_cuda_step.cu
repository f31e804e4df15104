// GPU test for trainkit/optim/muon_cuda.hpp: three updates of a d2 gpt2_cuda from fixed random
// gradients (never zeros) and a clipping factor of 0.8 in device memory, against the host twin of
// the whole step (optim/detail/muon_cuda_twin.hpp, run by muon_twin_reference.cpp), which the CPU
// tests hold to muon_cpu and to the PyTorch fixtures. The model's parameters are poisoned (NaN)
// between the optimizer's construction and the first update: every element must be rewritten from
// the master weights. Skips without a device (ctest label `gpu`). Never run on a GPU yet.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "../cuda/gpu_test_env.hpp"
#include "muon_twin_reference.hpp"
#include "trainkit/core/bf16.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/execution_context.hpp"
#include "trainkit/model/gpt2_cuda.hpp"
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
  config.schedule_max_lr = 1e-3f;
  const std::vector<float> start = download(model);
  to::muon_cuda opt(model, config);
  EXPECT_EQ(opt.shape_groups(), 3u);  // C×C (q, k, v, attention projection), 4C×C, C×4C
  const std::size_t n = model.num_parameters();

  tk::cuda::execution_context ctx;
  tk::cuda::device_buffer<float> clip(2);
  const std::vector<float> norm_and_factor{1.25f, 0.8f};
  tk::cuda::copy_to_device(clip.data(), std::span<const float>(norm_and_factor), ctx.stream());
  TRAINKIT_CUDA_CHECK(cudaMemset(model.parameters().data(), 0xff, n * 2));  // NaN

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
