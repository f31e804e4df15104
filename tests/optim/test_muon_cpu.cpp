// Tests for trainkit/optim/muon_cpu.hpp, muon_config.hpp and detail/newton_schulz.hpp: the
// iteration orthogonalises (singular values near 1, a tall matrix the transpose of its wide twin),
// the split by role (AdamW's half bit for bit adamw_cpu's, a fused slice the same as its parts
// given separately, a role change moving a tensor between the halves), validation naming fields,
// thread-count independence, and resuming from state() bit for bit.
#include <gtest/gtest.h>

#include <Eigen/Dense>

#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "mock_model.hpp"
#include "muon_fixtures.hpp"
#include "trainkit/model/gpt2/cpu.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/concepts.hpp"
#include "trainkit/optim/detail/newton_schulz.hpp"
#include "trainkit/optim/detail/newton_schulz_bf16.hpp"
#include "trainkit/optim/muon_cpu.hpp"

namespace tk = trainkit;
namespace to = trainkit::optim;
using trainkit_test::double_model;
using trainkit_test::quadratic_model;

static_assert(to::optimizer_for<to::muon_cpu, quadratic_model<>>);
static_assert(to::optimizer_for<to::muon_cpu, tk::model::gpt2_cpu>);
static_assert(!to::optimizer_for<to::muon_cpu, quadratic_model<tk::device_memory>>,
              "a host optimizer must not accept a device-memory model");
static_assert(!to::optimizer_for<to::muon_cpu, double_model>,
              "a float optimizer must not accept a double model");

namespace {

std::vector<float> random_values(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// A host model over any layout, gradients written by the test (the fixtures' own).
using muon_fixtures::layout_model;

// A GPT-2-like layout: an embedding, stacked fused qkv [2, 3·8, 8] with parts {8, 8, 8}, a bias, a
// norm and a tall stacked matrix [2, 12, 8], in that order.
layout_model small_model(unsigned seed) {
  layout_model m;
  m.layout = {{"emb", {10, 8}, 0, tk::tensor_role::embedding},
              {"qkv", {2, 24, 8}, 80, tk::tensor_role::matrix, {8, 8, 8}},
              {"b", {2, 24}, 464, tk::tensor_role::bias},
              {"ln", {8}, 512, tk::tensor_role::norm},
              {"fc", {2, 12, 8}, 520, tk::tensor_role::matrix}};
  m.params = random_values(712, seed, 0.1f);
  m.grads.assign(712, 0.0f);
  return m;
}

void run_steps(layout_model& m, to::muon_cpu& opt, int steps, unsigned seed) {
  tk::host_context ctx;
  for (int s = 0; s < steps; ++s) {
    m.grads = random_values(m.params.size(), seed + unsigned(s));
    opt.update(m, 1e-3f * float(s + 1), {s == 1 ? 0.5 : 1.0}, ctx);
  }
}

}  // namespace

TEST(NewtonSchulz, SingularValuesEndNearOne) {
  for (auto [rows, cols] : {std::pair{24, 40}, std::pair{40, 24}, std::pair{32, 32}}) {
    const std::vector<float> g = random_values(std::size_t(rows * cols), 3);
    std::vector<float> out(g.size());
    to::detail::newton_schulz_workspace<float> ws;
    to::detail::newton_schulz(g.data(), out.data(), rows, cols, 5, ws);
    Eigen::MatrixXd o(rows, cols);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) o(r, c) = out[std::size_t(r * cols + c)];
    const Eigen::VectorXd sv = Eigen::JacobiSVD<Eigen::MatrixXd>(o).singularValues();
    // The quintic with Keller Jordan's coefficients leaves them in about [0.68, 1.13].
    EXPECT_GT(sv.minCoeff(), 0.5) << rows << "x" << cols;
    EXPECT_LT(sv.maxCoeff(), 1.25) << rows << "x" << cols;
    EXPECT_LT(sv.minCoeff(), 0.95) << "an exact polar factor would mean a different iteration";
  }
}

TEST(NewtonSchulz, TallIsTheTransposeOfWide) {
  const int rows = 12, cols = 20;
  const std::vector<float> g = random_values(std::size_t(rows * cols), 4);
  std::vector<float> gt(g.size());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) gt[std::size_t(c * rows + r)] = g[std::size_t(r * cols + c)];
  std::vector<float> wide(g.size()), tall(g.size());
  to::detail::newton_schulz_workspace<float> ws;
  to::detail::newton_schulz(g.data(), wide.data(), rows, cols, 5, ws);
  to::detail::newton_schulz(gt.data(), tall.data(), cols, rows, 5, ws);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      ASSERT_EQ(wide[std::size_t(r * cols + c)], tall[std::size_t(c * rows + r)]) << r << "," << c;
}

TEST(MuonConfig, DefaultsArePublishedMuonAndValid) {
  const to::muon_config c;
  EXPECT_NO_THROW(c.validate());
  // Muon's published 0.02 at a 6e-4 schedule peak, as one ratio.
  EXPECT_EQ(float(double(6e-4f) * c.lr_ratio), 0.02f);
  EXPECT_EQ(c.momentum, 0.95f);
  EXPECT_TRUE(c.nesterov);
  EXPECT_EQ(c.ns_steps, 5);
  EXPECT_TRUE(c.muon_roles.contains(tk::tensor_role::matrix));
  EXPECT_FALSE(c.muon_roles.contains(tk::tensor_role::head));
  EXPECT_NE(c.to_string().find("momentum=0.95"), std::string::npos) << c.to_string();
  to::muon_config d = c;
  EXPECT_EQ(c, d);
  d.ns_steps = 4;
  EXPECT_NE(c, d);
}

TEST(MuonConfig, ValidateNamesTheBadField) {
  struct bad_case {
    to::muon_config cfg;
    std::string expected;
  };
  std::vector<bad_case> cases = {
      {{.lr_ratio = 0.0}, "muon_config.lr_ratio must be finite and > 0: 0"},
      {{.lr_ratio = NAN}, "muon_config.lr_ratio"},
      {{.lr_ratio = INFINITY}, "muon_config.lr_ratio"},
      {{.momentum = 1.0f}, "muon_config.momentum must be in [0,1): 1"},
      {{.momentum = -0.5f}, "muon_config.momentum"},
      {{.ns_steps = 0}, "muon_config.ns_steps must be in [1,100]: 0"},
      {{.weight_decay = -1.0f}, "muon_config.weight_decay"},
      {{.muon_roles = {tk::tensor_role::matrix, tk::tensor_role::bias}}, "muon_config.muon_roles"},
  };
  to::muon_config bad_adamw;
  bad_adamw.adamw.beta2 = 1.5f;
  cases.push_back({bad_adamw, "muon_config.adamw"});
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
  EXPECT_THROW(to::muon_cpu(model, {.momentum = 2.0f}), tk::config_error);
}

TEST(MuonCpu, FindsMatricesByRoleSliceAndPart) {
  const layout_model m = small_model(1);
  to::muon_cpu opt(m, {});
  const auto mats = opt.matrices();
  ASSERT_EQ(mats.size(), 8u);  // 2 layers × (q, k, v) + 2 layers × fc
  EXPECT_EQ(mats[0], (to::muon_matrix{80, 0, 8, 8}));
  EXPECT_EQ(mats[2], (to::muon_matrix{208, 128, 8, 8}));  // layer 0's v
  EXPECT_EQ(mats[3], (to::muon_matrix{272, 192, 8, 8}));  // layer 1's q
  EXPECT_EQ(mats[6], (to::muon_matrix{520, 384, 12, 8}));
  EXPECT_EQ(mats[7], (to::muon_matrix{616, 480, 12, 8}));
  EXPECT_EQ(opt.adamw_elements(), 712u - 576u);

  layout_model bad = small_model(1);
  bad.layout[1].row_parts = {8, 8};
  EXPECT_THROW(to::muon_cpu(bad, {}), tk::config_error);
  layout_model flat = small_model(1);
  flat.layout[3].role = tk::tensor_role::matrix;  // a 1-D tensor in a Muon role
  try {
    to::muon_cpu opt2(flat, {});
    ADD_FAILURE() << "a 1-D matrix must be refused";
  } catch (const tk::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("'ln'"), std::string::npos) << e.what();
  }
}

TEST(MuonCpu, AdamwHalfIsAdamwCpuBitForBit) {
  // The elements outside the matrices move exactly as adamw_cpu moves them.
  layout_model a = small_model(2), b = small_model(2);
  to::muon_config cfg;
  cfg.adamw.weight_decay = 0.3f;
  to::muon_cpu muon(a, cfg);
  to::adamw_cpu adamw(b, cfg.adamw);
  tk::host_context ctx;
  for (int s = 0; s < 3; ++s) {
    a.grads = b.grads = random_values(a.params.size(), 10 + unsigned(s));
    muon.update(a, 1e-2f, {0.7}, ctx);
    adamw.update(b, 1e-2f, {0.7}, ctx);
  }
  std::vector<bool> in_matrix(a.params.size(), false);
  for (const to::muon_matrix& m : muon.matrices())
    for (std::size_t i = m.offset; i < m.offset + m.numel(); ++i) in_matrix[i] = true;
  int compared = 0, moved = 0;
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    if (in_matrix[i]) {
      moved += a.params[i] != b.params[i];
      continue;
    }
    ASSERT_EQ(a.params[i], b.params[i]) << "element " << i;
    ++compared;
  }
  EXPECT_EQ(compared, 136);
  EXPECT_GT(moved, 500) << "the matrices must follow Muon, not AdamW";
  EXPECT_EQ(muon.steps_taken(), 3u);
}

TEST(MuonCpu, FusedSliceEqualsItsPartsGivenSeparately) {
  layout_model fused = small_model(3), split = small_model(3);
  // The same buffer with qkv described as six tensors of [8, 8] (layer, part).
  split.layout.erase(split.layout.begin() + 1);
  for (int i = 0; i < 6; ++i)
    split.layout.push_back(
        {"qkv" + std::to_string(i), {8, 8}, std::size_t(80 + 64 * i), tk::tensor_role::matrix});
  to::muon_cpu a(fused, {}), b(split, {});
  run_steps(fused, a, 3, 20);
  run_steps(split, b, 3, 20);
  EXPECT_EQ(fused.params, split.params);
}

TEST(MuonCpu, RoleNotNameOrShapeChoosesTheHalf) {
  // Renaming changes nothing; giving the tall matrix the head role moves it to AdamW.
  layout_model a = small_model(4), renamed = small_model(4), head = small_model(4);
  for (auto& t : renamed.layout) t.name += "_x";
  head.layout[4].role = tk::tensor_role::head;
  to::muon_cpu oa(a, {}), orn(renamed, {}), oh(head, {});
  run_steps(a, oa, 2, 30);
  run_steps(renamed, orn, 2, 30);
  run_steps(head, oh, 2, 30);
  EXPECT_EQ(a.params, renamed.params);
  EXPECT_EQ(oh.matrices().size(), 6u);
  EXPECT_NE(std::memcmp(a.params.data() + 520, head.params.data() + 520, 192 * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(a.params.data(), head.params.data(), 520 * sizeof(float)), 0);
}

TEST(MuonCpu, UpdateScaleAndDecayFollowThePublishedRule) {
  // Zero momentum history, one step: p ← p·(1 − η·λ) − η·√max(1, rows/cols)·NS(g), checked on
  // the tall fc matrices against newton_schulz itself (the golden test pins the iteration).
  layout_model m = small_model(5);
  const std::vector<float> before = m.params;
  to::muon_config cfg{.weight_decay = 0.5f};
  cfg.nesterov = false;
  cfg.momentum = 0.0f;  // u = g exactly
  to::muon_cpu opt(m, cfg);
  m.grads = random_values(m.params.size(), 40);
  tk::host_context ctx;
  opt.update(m, 6e-4f, {1.0}, ctx);  // the default ratio at a 6e-4 schedule rate: Muon's is 0.02
  std::vector<float> o(96);
  to::detail::newton_schulz_workspace<float> ws;
  to::detail::newton_schulz(m.grads.data() + 520, o.data(), 12, 8, 5, ws);
  const double rate = 0.02, scale = std::sqrt(12.0 / 8.0);
  for (std::size_t k = 0; k < 96; ++k) {
    const double expected = before[520 + k] * (1 - rate * 0.5) - rate * scale * o[k];
    EXPECT_NEAR(m.params[520 + k], expected, 1e-6) << k;
  }
}

TEST(MuonCpu, ThreadCountDoesNotChangeTheResult) {
#ifdef _OPENMP
  const int saved = omp_get_max_threads();
  layout_model one = small_model(6), two = small_model(6);
  to::muon_cpu a(one, {}), b(two, {});
  omp_set_num_threads(1);
  run_steps(one, a, 3, 50);
  omp_set_num_threads(2);
  run_steps(two, b, 3, 50);
  omp_set_num_threads(saved);
  EXPECT_EQ(one.params, two.params);
#else
  GTEST_SKIP() << "built without OpenMP";
#endif
}

TEST(MuonCpu, ResumeFromStateIsBitIdentical) {
  layout_model straight = small_model(7), resumed = small_model(7);
  to::muon_cpu a(straight, {});
  run_steps(straight, a, 2, 60);
  // A second optimizer receives the first's state (as a checkpointer copies it) after 2 steps.
  resumed.params = straight.params;
  to::muon_cpu b(resumed, {});
  auto from = a.state();
  auto to_ = b.state();
  ASSERT_EQ(from.size(), to_.size());
  for (std::size_t i = 0; i < from.size(); ++i) {
    ASSERT_EQ(from[i].name, to_[i].name);
    ASSERT_EQ(from[i].bytes(), to_[i].bytes());
    std::memcpy(to_[i].data, from[i].data, from[i].bytes());
  }
  std::vector<std::string> names;
  for (const auto& t : from) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"optim.adamw.m", "optim.adamw.v", "optim.step",
                                             "optim.muon.momentum"}));
  run_steps(straight, a, 2, 70);
  run_steps(resumed, b, 2, 70);
  EXPECT_EQ(straight.params, resumed.params);
  EXPECT_EQ(b.steps_taken(), 4u);
}

TEST(MuonShards, ContiguousBalancedAndTiling) {
  const layout_model m = small_model(8);
  to::muon_cpu opt(m, {});
  for (int world : {1, 2, 3, 8, 12}) {
    const auto shards = to::muon_shards(opt.matrices(), world, 5);
    ASSERT_EQ(shards.size(), std::size_t(world));
    std::size_t next = 0;
    for (const auto& r : shards) {
      EXPECT_EQ(r.first, next) << world;
      EXPECT_LE(r.first, r.last);
      next = r.last;
    }
    EXPECT_EQ(next, opt.matrices().size()) << world;
  }
  // Two ranks: q, k, v of both layers (6 of 8 · 8 · 8) weigh about what the two 12 × 8 fc do
  // not, so the cut falls after the qkv matrices' cost passes half the total.
  const auto two = to::muon_shards(opt.matrices(), 2, 5);
  double cost[2] = {0, 0};
  for (int r = 0; r < 2; ++r)
    for (std::size_t i = two[std::size_t(r)].first; i < two[std::size_t(r)].last; ++i)
      cost[r] += to::detail::newton_schulz_flops(opt.matrices()[i].rows, opt.matrices()[i].cols, 5);
  EXPECT_LT(std::abs(cost[0] - cost[1]), 0.35 * (cost[0] + cost[1]));
  EXPECT_THROW(to::muon_shards(opt.matrices(), 0, 5), tk::config_error);
}

TEST(MuonCpu, OwnedSharesTogetherAreTheWholeUpdate) {
  // Two instances owning complementary matrices, their matrices put together, give the one
  // instance's parameters bit for bit; each keeps only its own matrices' momentum.
  layout_model whole = small_model(9), part0 = small_model(9), part1 = small_model(9);
  to::muon_cpu all(whole, {});
  const auto shards = to::muon_shards(all.matrices(), 2, 5);
  to::muon_cpu a(part0, {}, shards[0]), b(part1, {}, shards[1]);
  EXPECT_EQ(a.momentum_range().offset, 0u);
  EXPECT_EQ(a.momentum_range().count, b.momentum_range().offset);
  EXPECT_EQ(a.momentum_range().count + b.momentum_range().count, all.momentum_elements());
  for (int s = 0; s < 3; ++s) {
    run_steps(whole, all, 1, 90 + unsigned(s));
    run_steps(part0, a, 1, 90 + unsigned(s));
    run_steps(part1, b, 1, 90 + unsigned(s));
    // The "gather": each matrix from its owner, into both.
    for (int r = 0; r < 2; ++r) {
      const layout_model& from = r == 0 ? part0 : part1;
      for (std::size_t i = shards[std::size_t(r)].first; i < shards[std::size_t(r)].last; ++i) {
        const to::muon_matrix& m = all.matrices()[i];
        for (layout_model* into : {&part0, &part1})
          std::copy_n(from.params.begin() + std::ptrdiff_t(m.offset), m.numel(),
                      into->params.begin() + std::ptrdiff_t(m.offset));
      }
    }
    ASSERT_EQ(part0.params, whole.params) << "step " << s;
    ASSERT_EQ(part1.params, whole.params) << "step " << s;
  }
  EXPECT_THROW(to::muon_cpu(whole, {}, to::muon_matrix_range{3, 9}), tk::config_error);
}

TEST(NewtonSchulz, Bf16TwinRoundsAndStaysNearTheFp32Iteration) {
  // The host twin of the CUDA iteration: near the fp32 iteration (bf16 costs about 1%), but not
  // equal to it — it does round — and its output is bf16-representable.
  for (auto [rows, cols] : {std::pair{24, 40}, std::pair{40, 24}}) {
    const std::vector<float> g = random_values(std::size_t(rows * cols), 12, 0.02f);
    std::vector<float> fp32(g.size()), bf(g.size());
    to::detail::newton_schulz_workspace<float> ws;
    to::detail::newton_schulz(g.data(), fp32.data(), rows, cols, 5, ws);
    to::detail::newton_schulz_bf16_reference(g.data(), bf.data(), rows, cols, 5);
    double num = 0, den = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      num += (double(bf[i]) - fp32[i]) * (double(bf[i]) - fp32[i]);
      den += double(fp32[i]) * fp32[i];
      ASSERT_EQ(bf[i], to::detail::round_to_bf16(bf[i])) << i;
    }
    EXPECT_LT(std::sqrt(num / den), 3e-2) << rows << "x" << cols;
    EXPECT_GT(std::sqrt(num / den), 1e-4) << rows << "x" << cols;
  }
}
