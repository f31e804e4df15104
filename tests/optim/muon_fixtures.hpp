// tests/optim/muon_fixtures.hpp — the loader of tests/fixtures/muon (the PyTorch Muon golden
// values of make_muon_fixtures.py): layouts, configs, the hashed parameters and gradients, and the
// expected parameters after the steps. Shared by test_muon_golden.cpp (muon_cpu) and
// test_muon_cuda_twin.cpp (muon_cuda's host twin).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/optim/muon_config.hpp"

namespace muon_fixtures {

namespace tk = trainkit;
namespace to = trainkit::optim;
namespace fs = std::filesystem;

// The fixture script's hashed_values: (h / 2^32 − 0.5) · scale for a 32-bit hash of i and seed.
inline std::vector<float> hashed_values(std::size_t n, std::uint64_t seed, double scale) {
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

inline tk::tensor_role role_named(const std::string& s) {
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

inline golden_file load() {
  // $TRAINKIT_MUON_FIXTURES_DIR where the source tree is elsewhere (bench/gpu_check.sh sets it on
  // the device machine), else the source tree's copy.
  const char* env = std::getenv("TRAINKIT_MUON_FIXTURES_DIR");
  const fs::path dir =
      env && *env ? fs::path(env) : fs::path(TRAINKIT_SOURCE_DIR) / "tests" / "fixtures" / "muon";
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
    // The fixture's Muon peak over its schedule's peak (the generator's two rates).
    g.config.lr_ratio = double(float(k.at("lr"))) / double(float(f.meta.at("schedule_max_lr")));
    g.config.momentum = k.at("momentum");
    g.config.nesterov = k.at("nesterov");
    g.config.ns_steps = k.at("ns_steps");
    g.config.weight_decay = k.at("weight_decay");
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

}  // namespace muon_fixtures
