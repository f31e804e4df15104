// Tests for trainkit/optim/adamw_cpu.hpp and grad_clip.hpp: the update against a double-precision
// reference written here from the AdamW formulas, decay only on flagged tensors, clipping (the
// caller's threshold, through clip_then_update) folded into the update, thread-count independence,
// and resuming from state() bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "mock_model.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/concepts.hpp"
#include "trainkit/optim/grad_clip.hpp"

namespace tk = trainkit;
namespace to = trainkit::optim;
using trainkit_test::double_model;
using trainkit_test::quadratic_model;

static_assert(std::is_aggregate_v<to::adamw_config>);
static_assert(to::optimizer_for<to::adamw_cpu, quadratic_model<>>);
static_assert(to::optimizer_for<to::basic_adamw_cpu<double>, double_model>);
// Mismatched compositions must be rejected at compile time.
static_assert(!to::optimizer_for<to::adamw_cpu, quadratic_model<tk::device_memory>>,
              "a host optimizer must not accept a device-memory model");
static_assert(!to::optimizer_for<to::adamw_cpu, double_model>,
              "a float optimizer must not accept a double model");

namespace {

// AdamW in double, written from the paper's formulas (Loshchilov & Hutter, algorithm 2, with the
// learning rate multiplying the decay term as PyTorch and llm.c do).
struct reference_adamw {
  to::adamw_config cfg;
  double max_norm;          // the clipping threshold; 0 = off
  std::vector<bool> decay;  // per element
  std::vector<double> m, v;
  int t = 0;

  reference_adamw(const quadratic_model<>& model, to::adamw_config c, double clip)
      : cfg(c), max_norm(clip) {
    const std::size_t n = model.num_parameters();
    decay.assign(n, false);
    m.assign(n, 0.0);
    v.assign(n, 0.0);
    for (const auto& info : model.parameter_layout()) {
      for (std::size_t i = 0; i < info.numel(); ++i)
        decay[info.offset + i] = c.decay_roles.contains(info.role);
    }
  }

  // Returns the pre-clip norm.
  double step(std::vector<double>& p, const std::vector<float>& grad, double lr) {
    double sq = 0;
    for (float g : grad) sq += double(g) * g;
    const double norm = std::sqrt(sq);
    const double scale = (max_norm > 0 && norm > max_norm) ? max_norm / norm : 1.0;
    ++t;
    for (std::size_t i = 0; i < p.size(); ++i) {
      const double g = grad[i] * scale;
      m[i] = cfg.beta1 * m[i] + (1 - cfg.beta1) * g;
      v[i] = cfg.beta2 * v[i] + (1 - cfg.beta2) * g * g;
      const double m_hat = m[i] / (1 - std::pow(double(cfg.beta1), t));
      const double v_hat = v[i] / (1 - std::pow(double(cfg.beta2), t));
      const double wd = decay[i] ? double(cfg.weight_decay) : 0.0;
      p[i] -= lr * (m_hat / (std::sqrt(v_hat) + cfg.eps) + wd * p[i]);
    }
    return norm;
  }
};

std::vector<float> random_grads(std::size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> g(n);
  for (auto& x : g) x = normal(rng);
  return g;
}

void set_grads(quadratic_model<>& model, const std::vector<float>& g) {
  std::copy(g.begin(), g.end(), model.gradients().begin());
}

// Clipping at `max_norm` (the trainer's default threshold, 1) then the update: what the trainer's
// reduce::single step does, through the helper for callers without a trainer.
template <class Optimizer, class Model>
float clipped_step(Optimizer& opt, Model& model, float lr, double max_norm = 1.0) {
  return to::clip_then_update<tk::host_memory>(max_norm)(opt, model, lr);
}

double max_abs_diff(std::span<const float> a, const std::vector<double>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

}  // namespace

TEST(AdamwConfig, DefaultsAreValidAndComparable) {
  const to::adamw_config a;
  EXPECT_NO_THROW(a.validate());
  to::adamw_config b = a;
  EXPECT_EQ(a, b);
  b.beta2 = 0.999f;
  EXPECT_NE(a, b);
  EXPECT_NE(a.to_string().find("beta2=0.95"), std::string::npos) << a.to_string();
}

TEST(AdamwConfig, ValidateNamesTheBadFieldAndValue) {
  struct bad_case {
    to::adamw_config cfg;
    std::string expected;
  };
  const std::vector<bad_case> cases = {
      {{.beta1 = 1.0f}, "beta1 must be in [0,1): 1"},
      {{.beta1 = -0.1f}, "beta1 must be in [0,1): -0.1"},
      {{.beta2 = 1.5f}, "beta2 must be in [0,1): 1.5"},
      {{.beta2 = NAN}, "beta2"},
      {{.eps = 0.0f}, "eps must be"},
      {{.weight_decay = -0.5f}, "weight_decay must be finite and >= 0: -0.5"},
  };
  for (const auto& c : cases) {
    try {
      c.cfg.validate();
      ADD_FAILURE() << "no error for a config expected to fail with: " << c.expected;
    } catch (const tk::config_error& e) {
      EXPECT_NE(std::string(e.what()).find(c.expected), std::string::npos)
          << "message '" << e.what() << "' lacks '" << c.expected << "'";
    }
  }
  quadratic_model<> model;
  EXPECT_THROW(to::adamw_cpu(model, {.beta2 = 1.5f}), tk::config_error);
}

TEST(AdamwCpu, MatchesReferenceOverSeveralStepsWithoutClipping) {
  quadratic_model<> model(3);
  const to::adamw_config cfg{.weight_decay = 0.1f};
  to::adamw_cpu opt(model, cfg);
  reference_adamw ref(model, cfg, 0.0);
  std::vector<double> p(model.parameters().begin(), model.parameters().end());
  std::mt19937 rng(11);
  for (int s = 0; s < 6; ++s) {
    const auto g = random_grads(model.num_parameters(), rng, 1.0f + s);
    set_grads(model, g);
    const double lr = 1e-2 * (s + 1);
    const float norm = clipped_step(opt, model, float(lr), 0.0);
    const double ref_norm = ref.step(p, g, lr);
    EXPECT_NEAR(norm, ref_norm, 1e-6 * ref_norm) << "step " << s;
    EXPECT_LT(max_abs_diff(model.parameters(), p), 2e-6) << "step " << s;
  }
  EXPECT_EQ(opt.steps_taken(), 6u);
}

TEST(AdamwCpu, WeightDecayByDefaultOnlyOnMatrices) {
  // With zero gradients the moments stay zero, so the only change is the decay term.
  quadratic_model<> model(5);
  const to::adamw_config cfg{.weight_decay = 0.25f};
  to::adamw_cpu opt(model, cfg);
  const std::vector<float> before(model.parameters().begin(), model.parameters().end());
  model.zero_grad();
  const float lr = 0.1f;
  EXPECT_EQ(clipped_step(opt, model, lr), 0.0f);
  std::vector<bool> covered(before.size(), false);
  int decayed = 0, kept = 0;
  for (const auto& info : model.parameter_layout()) {
    for (std::size_t i = info.offset; i < info.offset + info.numel(); ++i) {
      covered[i] = true;
      const float now = model.parameters()[i];
      if (info.name == "w1" || info.name == "w2") {  // the matrices (default: llm.c's rule)
        const double expected = double(before[i]) * (1.0 - double(lr) * cfg.weight_decay);
        EXPECT_NEAR(now, expected, 1e-6 * std::abs(expected) + 1e-7)
            << info.name << "[" << i << "]";
        ++decayed;
      } else {
        EXPECT_EQ(now, before[i]) << info.name << "[" << i << "] must not decay";
        ++kept;
      }
    }
  }
  for (std::size_t i = 0; i < before.size(); ++i) {
    if (!covered[i]) {
      EXPECT_EQ(model.parameters()[i], before[i]) << "padding element " << i;
    }
  }
  EXPECT_GT(decayed, 0);
  EXPECT_GT(kept, 0);
}

TEST(AdamwCpu, DecayRolesChooseTheDecayedTensors) {
  // Biases only: the matrices keep their values, the biases shrink by lr * weight_decay.
  quadratic_model<> model(6);
  to::adamw_config cfg{.weight_decay = 0.5f};
  cfg.decay_roles = {tk::tensor_role::bias};
  to::adamw_cpu opt(model, cfg);
  const std::vector<float> before(model.parameters().begin(), model.parameters().end());
  model.zero_grad();
  const float lr = 0.2f;
  clipped_step(opt, model, lr);
  for (const auto& info : model.parameter_layout()) {
    const bool bias = info.name == "b1" || info.name == "b2";
    for (std::size_t i = info.offset; i < info.offset + info.numel(); ++i) {
      const double expected =
          bias ? double(before[i]) * (1.0 - double(lr) * cfg.weight_decay) : double(before[i]);
      EXPECT_NEAR(model.parameters()[i], expected, 1e-6 * std::abs(expected) + 1e-7)
          << info.name << "[" << i << "]";
    }
  }
}

TEST(AdamwCpu, ClippingReturnsPreClipNormAndAppliesClippedUpdate) {
  quadratic_model<> model(7);
  const to::adamw_config cfg{.weight_decay = 0.1f};
  const double max_norm = 1.0;
  to::adamw_cpu opt(model, cfg);
  reference_adamw clipped(model, cfg, max_norm);
  reference_adamw unclipped(model, cfg, 0.0);
  std::vector<double> p(model.parameters().begin(), model.parameters().end());
  std::vector<double> p_unclipped = p;
  std::mt19937 rng(13);
  // Alternate gradients far above the clip threshold with ones below it: Adam is invariant to a
  // constant gradient scale, so only a mix shows whether the clip was applied.
  const float scales[] = {10.0f, 0.01f, 5.0f, 0.02f};
  for (int s = 0; s < 4; ++s) {
    const auto g = random_grads(model.num_parameters(), rng, scales[s]);
    set_grads(model, g);
    const float norm = clipped_step(opt, model, 0.05f, max_norm);
    const double ref_norm = clipped.step(p, g, 0.05);
    unclipped.step(p_unclipped, g, 0.05);
    EXPECT_NEAR(norm, ref_norm, 1e-6 * ref_norm) << "step " << s;
    if (scales[s] > 1) {
      EXPECT_GT(norm, max_norm) << "the returned norm is the pre-clip one";
    }
    // Gradients are scaled inside the update, never in place.
    EXPECT_TRUE(std::equal(g.begin(), g.end(), model.gradients().begin())) << "step " << s;
    EXPECT_LT(max_abs_diff(model.parameters(), p), 2e-6) << "step " << s;
  }
  EXPECT_GT(max_abs_diff(model.parameters(), p_unclipped), 1e-3)
      << "the test cannot tell clipped from unclipped updates";
}

TEST(AdamwCpu, StateRoundTripResumesBitIdentically) {
  const to::adamw_config cfg{.weight_decay = 0.1f};
  quadratic_model<> uninterrupted(21), resumed(21);
  to::adamw_cpu opt_a(uninterrupted, cfg);
  std::mt19937 rng(17);
  std::vector<std::vector<float>> grads;
  for (int s = 0; s < 6; ++s) grads.push_back(random_grads(uninterrupted.num_parameters(), rng, 3));

  {  // The interrupted run: three steps, then its state is saved as bytes.
    to::adamw_cpu opt_b(resumed, cfg);
    for (int s = 0; s < 3; ++s) {
      set_grads(resumed, grads[s]);
      clipped_step(opt_b, resumed, 1e-2f);
    }
    std::map<std::string, std::vector<std::byte>> saved;
    for (const auto& t : opt_b.state()) saved[t.name].assign(t.data, t.data + t.bytes());
    ASSERT_EQ(saved.size(), 3u);
    ASSERT_EQ(saved.at("optim.m").size(), resumed.num_parameters() * sizeof(float));
    ASSERT_EQ(saved.at("optim.step").size(), sizeof(std::uint64_t));

    to::adamw_cpu fresh(resumed, cfg);  // a new process: moments zero, step 0
    EXPECT_EQ(fresh.steps_taken(), 0u);
    for (auto& t : fresh.state()) {
      ASSERT_EQ(saved.at(t.name).size(), t.bytes()) << t.name;
      std::memcpy(t.data, saved.at(t.name).data(), t.bytes());
    }
    EXPECT_EQ(fresh.steps_taken(), 3u);
    for (int s = 3; s < 6; ++s) {
      set_grads(resumed, grads[s]);
      clipped_step(fresh, resumed, 1e-2f);
    }
  }
  for (int s = 0; s < 6; ++s) {
    set_grads(uninterrupted, grads[s]);
    clipped_step(opt_a, uninterrupted, 1e-2f);
  }
  const auto a = uninterrupted.parameters();
  const auto b = resumed.parameters();
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size_bytes()), 0);
  EXPECT_EQ(opt_a.steps_taken(), 6u);
}

TEST(AdamwCpu, StateTensorsDescribeTheMoments) {
  quadratic_model<> model;
  to::adamw_cpu opt(model, {});
  const auto state = opt.state();
  ASSERT_EQ(state.size(), 3u);
  const auto n = std::int64_t(model.num_parameters());
  EXPECT_EQ(state[0].name, "optim.m");
  EXPECT_EQ(state[0].type, tk::dtype::f32);
  EXPECT_EQ(state[0].shape, std::vector<std::int64_t>{n});
  EXPECT_EQ(state[1].name, "optim.v");
  EXPECT_EQ(state[1].shape, std::vector<std::int64_t>{n});
  EXPECT_EQ(state[2].name, "optim.step");
  EXPECT_EQ(state[2].type, tk::dtype::u64);
  EXPECT_EQ(state[2].shape, std::vector<std::int64_t>{1});
  EXPECT_FALSE(state[0].on_device);
}

TEST(AdamwCpu, RejectsModelOfAnotherSizeAndBadLayouts) {
  quadratic_model<> small(1, 5), larger(1, 6);
  to::adamw_cpu opt(small, {});
  EXPECT_THROW(clipped_step(opt, larger, 1e-3f), tk::config_error);

  quadratic_model<> outside(1);
  outside.set_layout({{"w", {1000, 1000}, 0, tk::tensor_role::matrix}});
  try {
    to::adamw_cpu bad(outside, {});
    ADD_FAILURE() << "a tensor past the end of the buffer was accepted";
  } catch (const tk::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();
  }
  quadratic_model<> overlapping(1);
  overlapping.set_layout(
      {{"a", {10}, 0, tk::tensor_role::bias}, {"b", {10}, 5, tk::tensor_role::matrix}});
  EXPECT_THROW(to::adamw_cpu(overlapping, {}), tk::config_error);
}

TEST(GradClip, NormMatchesDoubleReferenceAcrossChunks) {
  std::mt19937 rng(3);
  const auto g = random_grads(3 * to::norm_chunk_elements + 17, rng, 0.5f);
  double sq = 0;
  for (float x : g) sq += double(x) * x;
  EXPECT_NEAR(to::global_norm(std::span<const float>(g)), std::sqrt(sq), 1e-12 * std::sqrt(sq));
  EXPECT_EQ(to::global_norm(std::span<const float>()), 0.0);
}

TEST(GradClip, FactorOnlyShrinksFiniteNormsAboveTheLimit) {
  EXPECT_DOUBLE_EQ(to::clip_factor(4.0, 1.0), 0.25);
  EXPECT_EQ(to::clip_factor(0.5, 1.0), 1.0);
  EXPECT_EQ(to::clip_factor(4.0, 0.0), 1.0);  // 0 = off
  EXPECT_EQ(to::clip_factor(std::nan(""), 1.0), 1.0);
  EXPECT_EQ(to::clip_factor(INFINITY, 1.0), 1.0);
}

#ifdef _OPENMP
TEST(AdamwCpu, ResultsDoNotDependOnThreadCount) {
  std::mt19937 rng(5);
  const auto big = random_grads(5 * to::norm_chunk_elements + 3, rng, 1.0f);
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const double one = to::global_norm(std::span<const float>(big));
  quadratic_model<> m1(9);
  to::adamw_cpu o1(m1, {});
  const auto g = random_grads(m1.num_parameters(), rng, 2.0f);
  set_grads(m1, g);
  const float n1 = clipped_step(o1, m1, 1e-2f);
  omp_set_num_threads(3);
  const double three = to::global_norm(std::span<const float>(big));
  quadratic_model<> m3(9);
  to::adamw_cpu o3(m3, {});
  set_grads(m3, g);
  const float n3 = clipped_step(o3, m3, 1e-2f);
  omp_set_num_threads(saved_threads);
  EXPECT_EQ(one, three);
  EXPECT_EQ(n1, n3);
  EXPECT_EQ(
      std::memcmp(m1.parameters().data(), m3.parameters().data(), m1.parameters().size_bytes()), 0);
}
#endif
