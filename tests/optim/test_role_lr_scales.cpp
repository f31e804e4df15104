// Tests of per-role learning rates (optim/role_lr_scales.hpp, adamw_config::lr_scales; issue 38's
// "separate learning rates per parameter group"): AdamW with a multiplier per role equals, element
// for element and bit for bit, plain AdamW run at the multiplied rate on that role's tensors (AdamW
// is elementwise, and adamw_cpu is pinned to torch.optim.AdamW by its own golden tests), every
// multiplier 1 is today's AdamW, and a bad multiplier is refused naming its role.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "trainkit/core/execution_context.hpp"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/decay_segments.hpp"
#include "trainkit/optim/muon_cpu.hpp"

namespace tk = trainkit;
namespace to = trainkit::optim;

namespace {

struct layout_model {
  using memory_space = tk::host_memory;
  using parameter_type = float;
  std::vector<tk::tensor_info> layout;
  std::vector<float> params, grads;
  std::span<const tk::tensor_info> parameter_layout() const { return layout; }
  std::span<float> parameters() { return params; }
  std::span<float> gradients() { return grads; }
  std::size_t num_parameters() const { return params.size(); }
};

std::vector<float> random_values(std::size_t n, unsigned seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// An embedding, a stacked matrix, a bias, a norm, a head and a gap of padding at the end.
layout_model small_model() {
  layout_model m;
  m.layout = {{"emb", {10, 8}, 0, tk::tensor_role::embedding},
              {"w", {2, 12, 8}, 80, tk::tensor_role::matrix},
              {"b", {2, 12}, 272, tk::tensor_role::bias},
              {"ln", {8}, 296, tk::tensor_role::norm},
              {"head", {10, 8}, 304, tk::tensor_role::head}};
  m.params = random_values(400, 1, 0.1f);
  m.grads.assign(400, 0.0f);
  return m;
}

template <class Opt>
void run(layout_model& m, Opt& opt, float lr_scale_of_run) {
  tk::host_context ctx;
  for (int s = 0; s < 3; ++s) {
    m.grads = random_values(m.params.size(), 10 + unsigned(s), 1.0f);
    opt.update(m, 1e-2f * float(3 - s) * lr_scale_of_run, {s == 1 ? 0.5 : 1.0}, ctx);
  }
}

}  // namespace

TEST(RoleLrScales, EachRoleMovesAsPlainAdamwAtItsRate) {
  to::adamw_config scaled;
  scaled.lr_scales = {.embedding = 3.0f, .matrix = 1.0f, .bias = 0.25f, .norm = 2.0f, .head = 0.5f};
  layout_model a = small_model();
  to::adamw_cpu opt(a, scaled);
  run(a, opt, 1.0f);
  for (const tk::tensor_info& t : small_model().layout) {
    // Plain AdamW given rate·multiplier: the schedule's value times the role's multiplier, the
    // product rounded once as adamw_cpu rounds it.
    layout_model b = small_model();
    to::adamw_cpu plain(b, to::adamw_config{});
    tk::host_context ctx;
    for (int s = 0; s < 3; ++s) {
      b.grads = random_values(b.params.size(), 10 + unsigned(s), 1.0f);
      plain.update(b, 1e-2f * float(3 - s) * scaled.lr_scales.of(t.role), {s == 1 ? 0.5 : 1.0},
                   ctx);
    }
    std::size_t differ = 0;
    for (std::size_t i = t.offset; i < t.offset + t.numel(); ++i)
      differ += a.params[i] != b.params[i];
    EXPECT_EQ(differ, 0u) << t.name;
  }
  // The padding moves at the unscaled rate (a gap has no role).
  layout_model c = small_model();
  to::adamw_cpu plain(c, to::adamw_config{});
  run(c, plain, 1.0f);
  for (std::size_t i = 384; i < 400; ++i) EXPECT_EQ(a.params[i], c.params[i]) << i;
  // And the multipliers do something: the embedding moved differently from plain AdamW.
  EXPECT_NE(std::vector<float>(a.params.begin(), a.params.begin() + 80),
            std::vector<float>(c.params.begin(), c.params.begin() + 80));
}

TEST(RoleLrScales, AllOneIsTodaysAdamwBitForBit) {
  layout_model a = small_model(), b = small_model();
  to::adamw_config ones;
  ones.lr_scales = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  to::adamw_cpu x(a, ones), y(b, to::adamw_config{});
  run(a, x, 1.0f);
  run(b, y, 1.0f);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(to::adamw_config{}.to_string().find("lr_scales"), std::string::npos);
}

// The Muon family's AdamW half takes the same multipliers (its packed layout keeps the roles);
// Muon's matrices keep Muon's own rate.
TEST(RoleLrScales, MuonsAdamwHalfFollowsThem) {
  layout_model a = small_model(), b = small_model();
  to::muon_config scaled, plain;
  scaled.adamw.lr_scales.embedding = 3.0f;
  to::muon_cpu x(a, scaled), y(b, plain);
  run(a, x, 1.0f);
  run(b, y, 1.0f);
  EXPECT_NE(std::vector<float>(a.params.begin(), a.params.begin() + 80),
            std::vector<float>(b.params.begin(), b.params.begin() + 80));
  EXPECT_EQ(std::vector<float>(a.params.begin() + 80, a.params.end()),
            std::vector<float>(b.params.begin() + 80, b.params.end()));
}

TEST(RoleLrScales, SegmentsCarryTheirRolesMultiplier) {
  const layout_model m = small_model();
  to::role_lr_scales s;
  s.head = 0.5f;
  const auto segments = to::decay_segments(m.layout, 400, {tk::tensor_role::matrix}, "test", s);
  ASSERT_EQ(segments.size(), 6u);
  EXPECT_EQ(segments[4].lr_scale, 0.5f);  // head
  EXPECT_EQ(segments[5].lr_scale, 1.0f);  // the gap
  EXPECT_EQ(segments[0].lr_scale, 1.0f);
}

TEST(RoleLrScales, ABadMultiplierNamesItsRole) {
  to::adamw_config c;
  c.lr_scales.head = 0.0f;
  try {
    c.validate();
    FAIL() << "no config_error";
  } catch (const tk::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("adamw_config.lr_scales.head"), std::string::npos)
        << e.what();
  }
  c.lr_scales.head = std::numeric_limits<float>::infinity();
  EXPECT_THROW(c.validate(), tk::config_error);
}
