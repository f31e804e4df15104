// CPU tests of optim/detail/muon_cuda_twin.hpp, the host twin of muon_cuda's step (bf16 params and
// gradients, fp32 master and momentum, bf16 Newton–Schulz), against muon_cpu (fp32 throughout) and
// the PyTorch golden fixtures (float64) of tests/fixtures/muon. What bf16 costs is measured, not
// assumed: the tolerances below carry the figures they were set from. The GPU test
// (tests/optim/test_muon_cuda_step.cu) then holds muon_cuda to this twin.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "muon_fixtures.hpp"
#include "trainkit/optim/detail/muon_cuda_twin.hpp"
#include "trainkit/optim/muon_cpu.hpp"

using namespace muon_fixtures;
namespace td = trainkit::optim::detail;

namespace {

float bf16_of(float x) {
  return td::round_to_bf16(x);
}

std::vector<float> step_gradients(const nlohmann::json& meta, std::size_t n, int s) {
  return hashed_values(n, meta.at("grad_seed").get<int>() + s, meta.at("grad_scale"));
}

// Per tensor: ‖a_change − b_change‖ / ‖b_change‖ over the sampled elements, where x_change is x
// minus its start (each side its own start: the twin starts from bf16 parameters).
struct change_errors {
  std::vector<std::string> names;
  std::vector<double> rel;
  std::vector<bool> muon;  // the tensor's role is Muon's
};

// The twin's parameters after the fixture's steps (its master weights) and where it started.
struct twin_run {
  std::vector<float> start, master;
};

twin_run run_twin(const golden_case& g, const nlohmann::json& meta, const to::muon_config& config,
                  td::ns_coefficients k = td::muon_quintic) {
  td::muon_cuda_twin twin(g.model.layout, g.model.params, config, k);
  twin_run r;
  r.start.assign(twin.master().begin(), twin.master().end());
  const auto schedule = meta.at("schedule").get<std::vector<float>>();
  const auto clip = meta.at("clip").get<std::vector<double>>();
  for (int s = 0; s < meta.at("steps").get<int>(); ++s)
    twin.update(step_gradients(meta, g.model.params.size(), s), schedule[std::size_t(s)],
                float(clip[std::size_t(s)]));
  r.master.assign(twin.master().begin(), twin.master().end());
  return r;
}

change_errors against_fixture(const golden_case& g, const nlohmann::json& meta, const twin_run& r) {
  const std::size_t stride = meta.at("stride");
  change_errors e;
  for (const tk::tensor_info& t : g.model.layout) {
    double num = 0, den = 0;
    for (std::size_t i = (t.offset + stride - 1) / stride * stride; i < t.offset + t.numel();
         i += stride) {
      const double theirs = double(g.expected[i / stride]) - double(g.model.params[i]);
      const double ours = double(r.master[i]) - double(r.start[i]);
      num += (ours - theirs) * (ours - theirs);
      den += theirs * theirs;
    }
    e.names.push_back(t.name);
    e.rel.push_back(std::sqrt(num / den));
    e.muon.push_back(g.config.muon_roles.contains(t.role));
  }
  return e;
}

}  // namespace

// muon_cpu fed what the device sees (bf16 parameters and gradients) against the twin: AdamW's
// half is the same arithmetic on the same numbers, so equal to the bit; Muon's half differs by the
// bf16 momentum handed to Newton–Schulz and bf16 inside it.
TEST(MuonCudaTwin, AdamwHalfIsMuonCpusBitForBitAndMuonHalfWithinBf16) {
  const golden_file f = load();
  for (const golden_case& c : f.cases) {
    golden_case g = c;
    for (float& p : g.model.params) p = bf16_of(p);
    to::muon_cpu cpu(g.model, g.config);
    td::muon_cuda_twin twin(g.model.layout, g.model.params, g.config);
    const std::vector<float> start = g.model.params;
    const auto schedule = f.meta.at("schedule").get<std::vector<float>>();
    const auto clip = f.meta.at("clip").get<std::vector<double>>();
    tk::host_context ctx;
    for (int s = 0; s < f.meta.at("steps").get<int>(); ++s) {
      std::vector<float> grads = step_gradients(f.meta, g.model.params.size(), s);
      for (float& x : grads) x = bf16_of(x);
      g.model.grads = grads;
      cpu.update(g.model, schedule[std::size_t(s)], {double(float(clip[std::size_t(s)]))}, ctx);
      twin.update(grads, schedule[std::size_t(s)], float(clip[std::size_t(s)]));
    }
    for (const tk::tensor_info& t : g.model.layout) {
      double num = 0, den = 0;
      std::size_t differ = 0;
      for (std::size_t i = t.offset; i < t.offset + t.numel(); ++i) {
        const double a = double(twin.master()[i]) - start[i],
                     b = double(g.model.params[i]) - start[i];
        num += (a - b) * (a - b);
        den += b * b;
        differ += twin.master()[i] != g.model.params[i];
      }
      if (g.config.muon_roles.contains(t.role)) {
        // Measured: 5.0e-3 to 1.10e-2 over the three layouts. bf16 keeps 8 bits (ε = 3.9e-3) and
        // the quintic does not converge (it leaves singular values anywhere in about [0.7, 1.2]),
        // so a rounding in an early step moves the result by a few ε; the same 2e-2 as the CUDA
        // Newton–Schulz test against its twin (test_muon_cuda.cu).
        EXPECT_LT(std::sqrt(num / den), 2e-2) << g.name << " " << t.name;
      } else {
        EXPECT_EQ(differ, 0u) << g.name << " " << t.name;
      }
    }
  }
}

// The twin against PyTorch (float64) on the change over 3 steps, per tensor: the bf16 starting
// point does not move the change, bf16 gradients and Newton–Schulz do.
TEST(MuonCudaTwin, ThreeStepsMatchPyTorchWithinBf16) {
  const golden_file f = load();
  ASSERT_EQ(f.cases.size(), 3u);
  for (const golden_case& g : f.cases) {
    const change_errors e = against_fixture(g, f.meta, run_twin(g, f.meta, g.config));
    for (std::size_t t = 0; t < e.names.size(); ++t) {
      // Measured: Muon matrices 5.2e-3 to 1.16e-2 (bf16 Newton–Schulz, as above); AdamW tensors
      // 2.6e-4 to 5.0e-4 (bf16 gradients: m/√v hardly depends on the gradient's low bits).
      EXPECT_LE(e.rel[t], e.muon[t] ? 2e-2 : 2e-3) << g.name << " " << e.names[t];
    }
  }
}

// The same comparison can fail: Nesterov off (measured 0.18 to 0.29), or the quintic's b off by
// 1% (0.13 to 0.15), moves every matrix of the GPT-2 case well past the 2e-2 above.
TEST(MuonCudaTwin, ASlipIsCaught) {
  const golden_file f = load();
  const golden_case& g = f.cases.at(0);
  for (int variant = 0; variant < 2; ++variant) {
    to::muon_config config = g.config;
    td::ns_coefficients k = td::muon_quintic;
    if (variant == 0) config.nesterov = false;
    if (variant == 1) k.b *= 1.01f;
    const change_errors e = against_fixture(g, f.meta, run_twin(g, f.meta, config, k));
    for (std::size_t t = 0; t < e.names.size(); ++t)
      if (e.muon[t]) {
        EXPECT_GT(e.rel[t], 5e-2) << "variant " << variant << " " << e.names[t];
      }
  }
}
