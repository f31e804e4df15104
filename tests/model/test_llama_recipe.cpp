// tests/model/test_llama_recipe.cpp — the speedrun recipe's model parts wired into the Llama CPU
// family (llama_config::recipe; issue 38):
//   - the whole model with every part on (value embeddings, U-net skips, logit soft-cap, sliding
//     windows mid-schedule, with QK-norm and GQA) against an independent PyTorch implementation
//     (tests/fixtures/recipe/make_llama_recipe_fixture.py, float64): the loss, the capped logits
//     and every parameter's gradient, float at the Llama golden test's 1e-5 and double closer;
//   - each part off, or on at its neutral point, is today's model bit for bit (loss and gradients);
//   - the zero-init option zeroes exactly the output projections and keeps every other draw;
//   - the layout (roles, buckets, offsets of a tied model), validation naming the field, and
//     export-hf's refusal.
// Through the trainer (the step it tells the model, resume): test_llama_recipe_training.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "llama_recipe_config.hpp"  // small_config
#include "trainkit/model/llama/cpu.hpp"
#include "trainkit/model/llama/hf.hpp"

namespace {

namespace tk = trainkit;
namespace tmod = trainkit::model;
namespace fs = std::filesystem;
using llama_recipe_test::small_config;
using tmod::llama_tensor;

// ---- the PyTorch fixture ------------------------------------------------------------------------

struct recipe_fixture {
  tmod::llama_config config;
  std::int64_t step = 0;
  std::vector<int> windows;
  int batch = 0, seq = 0;
  std::vector<std::int32_t> inputs, targets;
  double loss = 0;
  std::vector<float> params;
  std::vector<double> logits, grads;
};

const recipe_fixture& fixture() {
  static const recipe_fixture f = [] {
    const fs::path dir = fs::path(TRAINKIT_SOURCE_DIR) / "tests" / "fixtures" / "recipe";
    std::ifstream js(dir / "llama_recipe.json");
    if (!js) throw std::runtime_error("cannot open llama_recipe.json");
    const auto j = nlohmann::json::parse(js);
    recipe_fixture r;
    const auto& s = j.at("shape");
    tmod::llama_config& c = r.config;
    c.num_layers = s.at("num_layers");
    c.num_heads = s.at("num_heads");
    c.num_kv_heads = s.at("num_kv_heads");
    c.channels = s.at("channels");
    c.hidden_size = s.at("hidden_size");
    c.vocab_size = s.at("vocab_size");
    c.padded_vocab_size = s.at("padded_vocab_size");
    c.max_seq_len = s.at("max_seq_len");
    c.rope_theta = s.at("rope_theta");
    c.norm_eps = s.at("norm_eps");
    c.tied_embeddings = s.at("tied_embeddings");
    c.qk_norm = s.at("qk_norm");
    EXPECT_EQ(s.at("mlp"), "swiglu");
    const auto& rj = j.at("recipe");
    c.recipe.value_embeddings = rj.at("value_embeddings");
    c.recipe.unet_skips = rj.at("unet_skips");
    c.recipe.logit_cap = rj.at("logit_cap");
    const auto& w = rj.at("windows");
    c.recipe.windows.short_window = w.at("short_window");
    c.recipe.windows.long_window = w.at("long_window");
    c.recipe.windows.start = w.at("start");
    c.recipe.windows.grow_steps = w.at("grow_steps");
    c.recipe.windows.block = w.at("block");
    c.recipe.windows.pattern = w.at("pattern");
    r.step = j.at("step");
    r.windows = j.at("windows").get<std::vector<int>>();
    r.batch = j.at("batch");
    r.seq = j.at("seq");
    r.inputs = j.at("inputs").get<std::vector<std::int32_t>>();
    r.targets = j.at("targets").get<std::vector<std::int32_t>>();
    r.loss = j.at("loss");
    std::ifstream bin(dir / "llama_recipe.bin", std::ios::binary);
    if (!bin) throw std::runtime_error("cannot open llama_recipe.bin");
    auto read = [&](const char* name, auto& out) {
      const auto& a = j.at("arrays").at(name);
      out.resize(a.at("count").get<std::size_t>());
      bin.seekg(a.at("byte_offset").get<std::streamoff>());
      bin.read(reinterpret_cast<char*>(out.data()), std::streamsize(out.size() * sizeof(out[0])));
      if (!bin) throw std::runtime_error(std::string("llama_recipe.bin: short ") + name);
    };
    read("params", r.params);
    read("logits", r.logits);
    read("grads", r.grads);
    // The fixture states the layout itself; it must be trainkit's, tensor by tensor.
    const auto layout = tmod::llama_parameter_layout(c);
    const auto& tensors = j.at("tensors");
    EXPECT_EQ(tensors.size(), layout.size());
    for (std::size_t i = 0; i < std::min(tensors.size(), layout.size()); ++i) {
      EXPECT_EQ(tensors[i].at("name"), layout[i].name);
      EXPECT_EQ(tensors[i].at("shape").get<std::vector<std::int64_t>>(), layout[i].shape);
    }
    return r;
  }();
  return f;
}

double relative_error(const double* got, const double* want, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    num = std::max(num, std::abs(got[i] - want[i]));
    den = std::max(den, std::abs(want[i]));
  }
  return den > 0 ? num / den : num;
}

template <class Scalar>
void expect_matches_pytorch(double tol) {
  const recipe_fixture& f = fixture();
  tmod::basic_llama_cpu<Scalar> m(f.config, tmod::zero_parameters);
  ASSERT_EQ(m.num_parameters(), f.params.size());
  std::copy(f.params.begin(), f.params.end(), m.parameters().begin());
  m.set_step(f.step);
  const tk::batch_view<tk::host_memory> batch{f.inputs.data(), f.targets.data(), f.batch, f.seq};
  m.zero_grad();
  m.forward_backward(batch, 1.0f);
  EXPECT_NEAR(m.last_loss(), f.loss, tol * f.loss);
  for (const tk::tensor_info& t : m.parameter_layout()) {
    std::vector<double> got(m.gradients().begin() + std::ptrdiff_t(t.offset),
                            m.gradients().begin() + std::ptrdiff_t(t.offset + t.numel()));
    EXPECT_LE(relative_error(got.data(), f.grads.data() + t.offset, t.numel()), tol) << t.name;
  }
  // The logits samplers see are the capped ones the loss is of.
  const auto logits = m.forward_logits(f.inputs, f.batch, f.seq);
  const int V = f.config.vocab_size, Vp = f.config.padded_vocab_size;
  std::vector<double> real;
  for (std::size_t r = 0; r < f.inputs.size(); ++r)
    for (int v = 0; v < V; ++v)
      real.push_back(double(logits[r * std::size_t(Vp) + std::size_t(v)]));
  EXPECT_LE(relative_error(real.data(), f.logits.data(), real.size()), tol);
}

TEST(LlamaRecipe, WholeModelMatchesPyTorchFloat) {
  expect_matches_pytorch<float>(1e-5);
}
// Double: the RoPE table is float32 in both (as transformers computes it), whose cos and sin may
// differ by an ulp between libm and PyTorch: ~6e-8 relative; the rest is double.
TEST(LlamaRecipe, WholeModelMatchesPyTorchDouble) {
  expect_matches_pytorch<double>(1e-6);
}

TEST(LlamaRecipe, WindowsFollowTheSchedule) {
  const recipe_fixture& f = fixture();
  const tmod::llama_config& c = f.config;
  for (int l = 0; l < c.num_layers; ++l) {
    EXPECT_EQ(c.attention_window(l, f.step), f.windows[std::size_t(l)]) << l;
    const bool is_long = c.recipe.windows.pattern[std::size_t(l) % 4] == 'L';
    EXPECT_EQ(c.attention_window(l, std::numeric_limits<std::int64_t>::max()),
              is_long ? c.recipe.windows.long_window : c.recipe.windows.short_window);
  }
}

// ---- off is today's model -----------------------------------------------------------------------

struct pass_result {
  double loss;
  std::vector<float> grads;
};

struct batch_data {
  int B = 2, T = 12;
  std::vector<std::int32_t> inputs, targets;
  batch_data() {
    for (int i = 0; i < B * T; ++i) {
      inputs.push_back(std::int32_t((i * 37 + 11) % 100));
      targets.push_back(std::int32_t((i * 53 + 7) % 100));
    }
  }
  tk::batch_view<tk::host_memory> view() const { return {inputs.data(), targets.data(), B, T}; }
};

// One forward/backward of `m` (two micro-steps: the accumulation path runs too).
pass_result run(tmod::llama_cpu& m) {
  const batch_data b;
  m.zero_grad();
  pass_result r;
  r.loss = m.forward_backward(b.view(), 0.5f);
  m.forward_backward(b.view(), 0.5f);
  r.grads.assign(m.gradients().begin(), m.gradients().end());
  return r;
}

bool same_bits(const float* a, const float* b, std::size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

// A model of `cfg` whose common tensors hold `off`'s parameters and whose recipe tensors are
// `fill`.
tmod::llama_cpu with_parameters_of(const tmod::llama_cpu& off, const tmod::llama_config& cfg,
                                   float lambda0, float lambda1, float skip_weight) {
  tmod::llama_cpu m(cfg, tmod::zero_parameters);
  std::copy(off.parameters().begin(), off.parameters().end(), m.parameters().begin());
  for (const tk::tensor_info& t : m.parameter_layout()) {
    auto p = m.parameters().subspan(t.offset, t.numel());
    if (t.name == "ve_lambdas")
      for (std::size_t i = 0; i < p.size(); ++i) p[i] = i % 2 == 0 ? lambda0 : lambda1;
    if (t.name == "unet_weights") std::fill(p.begin(), p.end(), skip_weight);
    if (t.name == "value_embeds")
      for (std::size_t i = 0; i < p.size(); ++i) p[i] = 0.01f * float(int(i % 13) - 6);
  }
  return m;
}

TEST(LlamaRecipe, EachPartAtItsNeutralPointIsTheOffModelBitForBit) {
  const tmod::llama_config off_cfg = small_config();
  tmod::llama_cpu off(off_cfg, 7);
  const pass_result want = run(off);
  const std::size_t n = off.num_parameters();

  struct variant {
    const char* name;
    tmod::llama_config cfg;
    float lambda0 = 1, lambda1 = 0, skip = 0;
  };
  std::vector<variant> variants;
  {
    variant v{"windows as long as the sequence", off_cfg};
    v.cfg.recipe.windows = {.short_window = 12, .long_window = 16, .block = 1};
    variants.push_back(v);
  }
  {
    variant v{"value embeddings with lambda (1, 0)", off_cfg};
    v.cfg.recipe.value_embeddings = 2;
    variants.push_back(v);
  }
  {
    variant v{"U-net skips with weight 0", off_cfg};
    v.cfg.recipe.unet_skips = true;
    variants.push_back(v);
  }
  {
    variant v{"logit cap 0", off_cfg};
    v.cfg.recipe.logit_cap = 0.0f;
    variants.push_back(v);
  }
  for (const variant& v : variants) {
    tmod::llama_cpu m = with_parameters_of(off, v.cfg, v.lambda0, v.lambda1, v.skip);
    const pass_result got = run(m);
    EXPECT_EQ(std::memcmp(&got.loss, &want.loss, sizeof(double)), 0) << v.name;
    EXPECT_TRUE(same_bits(got.grads.data(), want.grads.data(), n)) << v.name;
  }
  // The neutral points are points: moved off them, the model changes.
  tmod::llama_config windowed = off_cfg;
  windowed.recipe.windows = {.short_window = 4, .long_window = 16, .block = 1};
  tmod::llama_cpu w = with_parameters_of(off, windowed, 1, 0, 0);
  EXPECT_NE(run(w).loss, want.loss);
  tmod::llama_config embedded = off_cfg;
  embedded.recipe.value_embeddings = 1;
  tmod::llama_cpu e = with_parameters_of(off, embedded, 1, 0.5f, 0);
  EXPECT_NE(run(e).loss, want.loss);
  tmod::llama_config skipped = off_cfg;
  skipped.recipe.unet_skips = true;
  tmod::llama_cpu s = with_parameters_of(off, skipped, 1, 0, 0.5f);
  EXPECT_NE(run(s).loss, want.loss);
  tmod::llama_config capped = off_cfg;
  capped.recipe.logit_cap = 0.5f;
  tmod::llama_cpu cap = with_parameters_of(off, capped, 1, 0, 0);
  EXPECT_NE(run(cap).loss, want.loss);
}

TEST(LlamaRecipe, OffLayoutAndStringAreTodays) {
  const tmod::llama_config c = small_config();
  EXPECT_FALSE(c.recipe.on());
  const auto layout = tmod::llama_parameter_layout(c);
  ASSERT_EQ(layout.size(), 9u);
  EXPECT_EQ(layout.back().name, "lm_head");
  EXPECT_EQ(c.to_string(),
            "L=4 H=4 KV=2 C=32 F=64 V=100 Vp=128 maxT=16 theta=10000 eps=1e-05 mlp=swiglu untied");
  const auto offsets = tmod::llama_tensor_offsets(c);
  for (std::size_t i = 0; i < layout.size(); ++i) EXPECT_EQ(offsets[i], layout[i].offset);
  for (llama_tensor t :
       {llama_tensor::value_embeds, llama_tensor::ve_lambdas, llama_tensor::unet_weights})
    EXPECT_EQ(offsets[std::size_t(t)], tmod::llama_absent_tensor);
}

// A step that is not set is the schedule's end; with windows off, the step changes nothing.
TEST(LlamaRecipe, TheStepPicksTheWindows) {
  tmod::llama_config c = small_config();
  tmod::llama_cpu off(c, 3);
  const double before = run(off).loss;
  off.set_step(0);
  EXPECT_EQ(run(off).loss, before);
  c.recipe.windows = {
      .short_window = 2, .long_window = 8, .start = 2, .grow_steps = 10, .block = 1};
  tmod::llama_cpu m(c, 3);
  const double end = run(m).loss;
  m.set_step(0);
  const double first = run(m).loss;
  m.set_step(5);
  const double middle = run(m).loss;
  m.set_step(10);
  EXPECT_EQ(run(m).loss, end);
  EXPECT_NE(first, end);
  EXPECT_NE(middle, end);
  EXPECT_NE(first, middle);
}

// ---- init, layout, validation, export -----------------------------------------------------------

TEST(LlamaRecipe, ZeroInitZeroesTheProjectionsAndKeepsEveryOtherDraw) {
  for (bool tied : {false, true}) {
    tmod::llama_config c = small_config();
    c.tied_embeddings = tied;
    c.recipe.value_embeddings = 1;
    c.recipe.unet_skips = true;
    tmod::llama_config z = c;
    z.recipe.zero_init_projections = true;
    const tmod::llama_cpu a(c, 5), b(z, 5);
    ASSERT_EQ(a.num_parameters(), b.num_parameters());
    for (const tk::tensor_info& t : a.parameter_layout()) {
      const float* pa = a.parameters().data() + t.offset;
      const float* pb = b.parameters().data() + t.offset;
      const bool zeroed = t.name == "attprojw" || t.name == "fcprojw" || t.name == "lm_head";
      if (zeroed) {
        EXPECT_TRUE(std::all_of(pb, pb + t.numel(), [](float x) { return x == 0.0f; })) << t.name;
        EXPECT_FALSE(std::all_of(pa, pa + t.numel(), [](float x) { return x == 0.0f; })) << t.name;
      } else {
        EXPECT_TRUE(same_bits(pa, pb, t.numel())) << t.name << (tied ? " tied" : "");
      }
      if (t.name == "ve_lambdas") {
        EXPECT_TRUE(std::all_of(pa, pa + t.numel(), [](float x) { return x == 0.5f; }));
      }
      if (t.name == "unet_weights") {
        EXPECT_TRUE(std::all_of(pa, pa + t.numel(), [](float x) { return x == 1.0f; }));
      }
    }
    // A recipe model draws its common tensors as the plain model does (the recipe's come last).
    tmod::llama_config plain_cfg = small_config();
    plain_cfg.tied_embeddings = tied;
    const tmod::llama_cpu plain(plain_cfg, 5);
    EXPECT_TRUE(
        same_bits(plain.parameters().data(), a.parameters().data(), plain.num_parameters()));
  }
}

TEST(LlamaRecipe, RecipeTensorsHaveTheirRolesAndJoinTheLastBucket) {
  for (bool tied : {false, true}) {
    tmod::llama_config c = small_config();
    c.tied_embeddings = tied;
    c.recipe.value_embeddings = 2;
    c.recipe.unet_skips = true;
    const auto layout = tmod::llama_parameter_layout(c);
    const auto offsets = tmod::llama_tensor_offsets(c);
    auto find = [&](const std::string& name) -> const tk::tensor_info& {
      return *std::find_if(layout.begin(), layout.end(),
                           [&](const tk::tensor_info& t) { return t.name == name; });
    };
    const std::int64_t Vp = c.padded_vocab_size, W = c.value_width();
    EXPECT_EQ(find("value_embeds").shape, (std::vector<std::int64_t>{2, Vp, W}));
    EXPECT_EQ(find("value_embeds").role, tk::tensor_role::embedding);  // AdamW, embedding rate
    EXPECT_EQ(find("ve_lambdas").shape, (std::vector<std::int64_t>{4, 2}));
    EXPECT_EQ(find("ve_lambdas").role, tk::tensor_role::norm);  // a scalar: no Muon, no decay
    EXPECT_EQ(find("unet_weights").shape, (std::vector<std::int64_t>{2}));
    EXPECT_EQ(find("unet_weights").role, tk::tensor_role::norm);
    EXPECT_EQ(offsets[std::size_t(llama_tensor::value_embeds)], find("value_embeds").offset);
    EXPECT_EQ(offsets[std::size_t(llama_tensor::ve_lambdas)], find("ve_lambdas").offset);
    EXPECT_EQ(offsets[std::size_t(llama_tensor::unet_weights)], find("unet_weights").offset);
    EXPECT_EQ(offsets[std::size_t(llama_tensor::lm_head)],
              tied ? tmod::llama_absent_tensor : find("lm_head").offset);
    EXPECT_EQ(c.num_parameters(), layout.back().offset + layout.back().numel());
    // The last bucket holds wte and the three recipe tensors; the buckets tile the buffer (the
    // model's constructor checks it).
    const auto buckets = tmod::llama_gradient_buckets(c);
    ASSERT_EQ(buckets.back().ranges.size(), 4u);
    EXPECT_EQ(buckets.back().ranges[1].offset, find("value_embeds").offset);
    EXPECT_NO_THROW(tmod::llama_cpu(c, tmod::zero_parameters));
    // FLOPs leave the tables out (lookups), as the input embedding.
    tmod::llama_config plain = c;
    plain.recipe = {};
    const double scalars = double(4 * 2 + 2);
    EXPECT_DOUBLE_EQ(c.flops_per_token(16), plain.flops_per_token(16) + 6.0 * scalars);
  }
}

TEST(LlamaRecipe, ValidationNamesTheField) {
  auto expect_refused = [](tmod::llama_config c, const std::string& field) {
    try {
      c.validate();
      ADD_FAILURE() << field << " accepted";
    } catch (const tk::config_error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  tmod::llama_config c = small_config();
  c.recipe.value_embeddings = 3;  // 2·3 > 4 layers
  expect_refused(c, "llama_config.recipe.value_embeddings");
  c = small_config();
  c.recipe.logit_cap = -1.0f;
  expect_refused(c, "llama_config.recipe.logit_cap");
  c.recipe.logit_cap = std::numeric_limits<float>::quiet_NaN();
  expect_refused(c, "llama_config.recipe.logit_cap");
  c = small_config();
  c.num_layers = 1;
  c.recipe.unet_skips = true;
  expect_refused(c, "llama_config.recipe.unet_skips");
  c = small_config();
  c.recipe.windows = {.short_window = 64, .long_window = 32};
  expect_refused(c, "llama_config.recipe.windows.long_window");
  c.recipe.windows = {.short_window = 16, .long_window = 32, .pattern = "SXL"};
  expect_refused(c, "llama_config.recipe.windows.pattern");
  c.recipe.windows = {.short_window = 16, .long_window = 32, .start = 64};
  expect_refused(c, "llama_config.recipe.windows.start");
  EXPECT_THROW(tmod::llama_cpu(c, 1), tk::config_error);
}

TEST(LlamaRecipe, ExportHfRefusesWhatLlamaForCausalLMCannotCompute) {
  auto refused_naming = [](tmod::llama_config c) -> std::string {
    try {
      tmod::check_hf_llama_exportable(c);
    } catch (const tk::config_error& e) {
      return e.what();
    }
    return "";
  };
  tmod::llama_config c = small_config();
  c.recipe.zero_init_projections = true;  // an init: the model is a plain Llama
  EXPECT_EQ(refused_naming(c), "");
  c = small_config();
  c.recipe.value_embeddings = 1;
  EXPECT_NE(refused_naming(c).find("llama_config.recipe.value_embeddings"), std::string::npos);
  c = small_config();
  c.recipe.unet_skips = true;
  EXPECT_NE(refused_naming(c).find("llama_config.recipe.unet_skips"), std::string::npos);
  c = small_config();
  c.recipe.logit_cap = 15.0f;
  EXPECT_NE(refused_naming(c).find("llama_config.recipe.logit_cap"), std::string::npos);
  c = small_config();
  c.recipe.windows = {.short_window = 4, .long_window = 16};
  EXPECT_NE(refused_naming(c).find("llama_config.recipe.windows"), std::string::npos);
}

}  // namespace
