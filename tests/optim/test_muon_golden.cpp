// Golden tests for trainkit/optim/muon_cpu.hpp: the parameters after 3 steps from fixed gradients
// against an independent PyTorch implementation of the published Muon (plus torch.optim.AdamW for
// the other roles), written by tests/fixtures/muon/make_muon_fixtures.py in float64, for a GPT-2
// layout (fused q/k/v, stacked layers, tall and wide matrices), the same with Nesterov off and
// fewer Newton–Schulz steps, and a Llama-family layout (GQA's uneven q/k/v parts, SwiGLU, an
// untied head). The test builds each layout from the fixture's tensor_info (names, shapes, roles,
// row_parts) and checks that the GPT-2 one is gpt2_parameter_layout's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "trainkit/core/tensor.hpp"
#include "trainkit/model/gpt2_config.hpp"
#include "trainkit/optim/muon_cpu.hpp"

namespace tk = trainkit;
namespace to = trainkit::optim;
namespace fs = std::filesystem;

namespace {

// The fixture script's hashed_values: (h / 2^32 − 0.5) · scale for a 32-bit hash of i and seed.
std::vector<float> hashed_values(std::size_t n, std::uint64_t seed, double scale) {
  std::vector<float> out(n);
  constexpr std::uint64_t mask = 0xFFFFFFFFull;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t h = (std::uint64_t(i) * 0x9E3779B1ull + seed * 0x85EBCA77ull) & mask;
    h ^= h >> 16;
    h = (h * 0x7FEB352Dull) & mask;
    h ^= h >> 15;
    h = (h * 0x846CA68Bull) & mask;
    h ^= h >> 16;
    out[i] = static_cast<float>((double(h) / 4294967296.0 - 0.5) * scale);
  }
  return out;
}

tk::tensor_role role_named(const std::string& s) {
  for (tk::tensor_role r : tk::all_tensor_roles)
    if (tk::tensor_role_name(r) == s) return r;
  throw std::runtime_error("unknown role " + s);
}

// A host model over a fixture's layout: flat buffers, gradients written by the test.
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

struct golden_case {
  std::string name;
  layout_model model;
  to::muon_config config;
  std::vector<float> expected;  // parameters after the steps, every `stride`-th element
};

struct golden_file {
  nlohmann::json meta;
  std::vector<golden_case> cases;
};

golden_file load() {
  const fs::path dir = fs::path(TRAINKIT_SOURCE_DIR) / "tests" / "fixtures" / "muon";
  std::ifstream js(dir / "muon_fixtures.json");
  if (!js) throw std::runtime_error("cannot open " + (dir / "muon_fixtures.json").string());
  golden_file f;
  f.meta = nlohmann::json::parse(js);
  std::ifstream bin(dir / "muon_fixtures.bin", std::ios::binary);
  if (!bin) throw std::runtime_error("cannot open muon_fixtures.bin");
  for (const auto& c : f.meta.at("cases")) {
    golden_case g;
    g.name = c.at("name");
    for (const auto& t : c.at("layout"))
      g.model.layout.push_back({t.at("name"), t.at("shape").get<std::vector<std::int64_t>>(),
                                t.at("offset").get<std::size_t>(), role_named(t.at("role")),
                                t.at("row_parts").get<std::vector<std::int64_t>>()});
    const std::size_t total = c.at("total");
    g.model.params = hashed_values(total, f.meta.at("param_seed"), f.meta.at("param_scale"));
    g.model.grads.assign(total, 0.0f);
    const auto& k = c.at("config");
    g.config.lr = k.at("lr");
    g.config.momentum = k.at("momentum");
    g.config.nesterov = k.at("nesterov");
    g.config.ns_steps = k.at("ns_steps");
    g.config.weight_decay = k.at("weight_decay");
    g.config.schedule_max_lr = f.meta.at("schedule_max_lr");
    g.config.adamw.beta1 = k.at("beta1");
    g.config.adamw.beta2 = k.at("beta2");
    g.config.adamw.eps = k.at("eps");
    g.config.adamw.weight_decay = k.at("adamw_weight_decay");
    const auto& a = c.at("params_after");
    g.expected.resize(a.at("count").get<std::size_t>());
    bin.seekg(std::streamoff(a.at("offset").get<std::size_t>() * sizeof(float)));
    bin.read(reinterpret_cast<char*>(g.expected.data()),
             std::streamsize(g.expected.size() * sizeof(float)));
    if (!bin) throw std::runtime_error("muon_fixtures.bin: short array for " + g.name);
    f.cases.push_back(std::move(g));
  }
  return f;
}

// Runs the fixture's steps with `config` and returns, per tensor, ‖ours − theirs‖ / ‖theirs‖ over
// the sampled elements of the parameters and of their change since the start.
struct errors {
  std::vector<std::string> names;
  std::vector<double> params, change;
};

errors run_case(golden_case g, const nlohmann::json& meta, const to::muon_config& config) {
  const std::vector<float> start = g.model.params;
  to::muon_cpu opt(g.model, config);
  tk::host_context ctx;
  const auto schedule = meta.at("schedule").get<std::vector<float>>();
  const auto clip = meta.at("clip").get<std::vector<double>>();
  for (int s = 0; s < meta.at("steps").get<int>(); ++s) {
    g.model.grads = hashed_values(g.model.params.size(), meta.at("grad_seed").get<int>() + s,
                                  meta.at("grad_scale"));
    opt.update(g.model, schedule[std::size_t(s)], {clip[std::size_t(s)]}, ctx);
  }
  const std::size_t stride = meta.at("stride");
  errors e;
  for (const tk::tensor_info& t : g.model.layout) {
    double dp = 0, np = 0, nc = 0;
    for (std::size_t i = (t.offset + stride - 1) / stride * stride; i < t.offset + t.numel();
         i += stride) {
      const double ours = g.model.params[i], theirs = g.expected[i / stride];
      dp += (ours - theirs) * (ours - theirs);
      np += theirs * theirs;
      const double moved = theirs - double(start[i]);
      nc += moved * moved;
    }
    e.names.push_back(t.name);
    e.params.push_back(std::sqrt(dp / np));
    e.change.push_back(std::sqrt(dp / nc));  // the changes differ as the parameters do
  }
  return e;
}

}  // namespace

TEST(MuonGolden, FixtureLayoutIsGpt2sLayout) {
  const golden_file f = load();
  const tk::model::gpt2_config cfg{.max_seq_len = 16,
                                   .vocab_size = 64,
                                   .padded_vocab_size = 64,
                                   .num_layers = 2,
                                   .num_heads = 2,
                                   .channels = 64};
  EXPECT_EQ(f.cases.at(0).name, "gpt2");
  EXPECT_EQ(f.cases.at(0).model.layout, tk::model::gpt2_parameter_layout(cfg));
}

TEST(MuonGolden, ThreeStepsMatchPyTorchWithin1e5) {
  const golden_file f = load();
  ASSERT_EQ(f.cases.size(), 3u);
  for (const golden_case& g : f.cases) {
    const errors e = run_case(g, f.meta, g.config);
    for (std::size_t t = 0; t < e.names.size(); ++t) {
      EXPECT_LE(e.params[t], 1e-5) << g.name << " " << e.names[t];
      // The change over the 3 steps (a few % of a parameter) is within 1e-5 of its own size too
      // (measured: ~2e-6; the parameters ~1e-7).
      EXPECT_LE(e.change[t], 1e-5) << g.name << " " << e.names[t];
    }
  }
}

TEST(MuonGolden, ASlipInTheSettingsIsCaught) {
  // The comparison can fail: the same gradients with Nesterov off, or one Newton–Schulz step
  // fewer, land measurably away from the fixture on every matrix.
  const golden_file f = load();
  const golden_case& g = f.cases.at(0);
  for (int variant = 0; variant < 2; ++variant) {
    to::muon_config slipped = g.config;
    if (variant == 0) slipped.nesterov = false;
    if (variant == 1) slipped.ns_steps = 4;
    const errors e = run_case(g, f.meta, slipped);
    for (std::size_t t = 0; t < e.names.size(); ++t)
      if (e.names[t] == "qkvw" || e.names[t] == "fcw" || e.names[t] == "fcprojw") {
        EXPECT_GT(e.params[t], 1e-4) << "variant " << variant << " " << e.names[t];
      }
  }
}
