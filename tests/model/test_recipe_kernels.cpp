// Tests of the speedrun recipe's model techniques (issue 38; include/trainkit/model/recipe/)
// against PyTorch (tests/fixtures/recipe/make_recipe_fixtures.py, float64), forward and every
// gradient, and each technique off against today's kernel, bit for bit.
//   softcap_crossentropy: the loss of cap·tanh(logits / cap) and its gradient w.r.t. the logits;
//   sliding_window_attention: the windowed causal attention's output and dqkv;
//   value_embed: λ₀·v + λ₁·E[token] and dv, dE, dλ;  unet_skip: x + w·skip and dx, dskip, dw.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "trainkit/model/cpu/kernels.hpp"
#include "trainkit/model/recipe/sliding_window_attention.hpp"
#include "trainkit/model/recipe/softcap_crossentropy.hpp"
#include "trainkit/model/recipe/unet_skips.hpp"
#include "trainkit/model/recipe/value_embeddings.hpp"

namespace tmod = trainkit::model;

namespace {

nlohmann::json fixtures() {
  const auto path = std::filesystem::path(TRAINKIT_SOURCE_DIR) / "tests" / "fixtures" / "recipe" /
                    "recipe_fixtures.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return nlohmann::json::parse(in);
}

struct softcap_result {
  std::vector<double> losses;
  std::vector<double> grad;  // (rows, Vp)
};

// Runs the host kernel in S on a fixture case (with backward) at cap `cap`.
template <class S>
softcap_result run_softcap(const nlohmann::json& c, double cap) {
  const int rows = c.at("rows"), V = c.at("V"), Vp = c.at("Vp");
  std::vector<S> logits;
  for (double x : c.at("logits")) logits.push_back(S(x));
  const auto targets = c.at("targets").get<std::vector<std::int32_t>>();
  softcap_result r;
  r.losses.resize(static_cast<std::size_t>(rows));
  tmod::recipe::softcapped_crossentropy<S>(logits.data(), r.losses.data(), targets.data(), rows, V,
                                           Vp, true, S(c.at("dloss").get<double>()), S(cap));
  r.grad.assign(logits.begin(), logits.end());
  return r;
}

template <class S>
std::vector<S> as(const nlohmann::json& j) {
  std::vector<S> out;
  for (double x : j) out.push_back(S(x));
  return out;
}

template <class S>
std::vector<double> as_double(const std::vector<S>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// max |ours − theirs| / max |theirs|.
double max_rel(const std::vector<double>& ours, const std::vector<double>& theirs) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    diff = std::max(diff, std::abs(ours[i] - theirs[i]));
    scale = std::max(scale, std::abs(theirs[i]));
  }
  return diff / scale;
}

}  // namespace

// float within 1e-5 of PyTorch's float64 (losses and gradient, relative to their largest), double
// within 1e-12: the formula is PyTorch's, not only its precision.
TEST(SoftcapCrossentropy, MatchesPyTorchForwardAndGradient) {
  const auto cases = fixtures().at("softcap_crossentropy");
  ASSERT_EQ(cases.size(), 3u);
  for (const auto& c : cases) {
    const double cap = c.at("cap");
    const auto losses = c.at("losses").get<std::vector<double>>();
    const auto grad = c.at("grad").get<std::vector<double>>();
    const softcap_result f = run_softcap<float>(c, cap);
    EXPECT_LE(max_rel(f.losses, losses), 1e-5) << "cap " << cap;
    EXPECT_LE(max_rel(f.grad, grad), 1e-5) << "cap " << cap;
    const softcap_result d = run_softcap<double>(c, cap);
    EXPECT_LE(max_rel(d.losses, losses), 1e-12) << "cap " << cap;
    EXPECT_LE(max_rel(d.grad, grad), 1e-12) << "cap " << cap;
    // The padded columns are zero.
    const int rows = c.at("rows"), V = c.at("V"), Vp = c.at("Vp");
    for (int r = 0; r < rows; ++r)
      for (int j = V; j < Vp; ++j) EXPECT_EQ(d.grad[std::size_t(r * Vp + j)], 0.0);
  }
}

// The comparison can fail: the cap-15 case computed without the cap, or with cap 30, or with the
// chain-rule factor left out (ungapped: the plain gradient of the capped logits), is far off.
TEST(SoftcapCrossentropy, ASlipIsCaught) {
  const auto c = fixtures().at("softcap_crossentropy").at(0);
  ASSERT_EQ(c.at("cap").get<double>(), 15.0);
  const auto losses = c.at("losses").get<std::vector<double>>();
  const auto grad = c.at("grad").get<std::vector<double>>();
  EXPECT_GT(max_rel(run_softcap<double>(c, 0.0).losses, losses), 1e-2);
  EXPECT_GT(max_rel(run_softcap<double>(c, 30.0).losses, losses), 1e-2);
  // Without the factor 1 − (z/cap)²: softmax_crossentropy on the capped logits.
  std::vector<double> z;
  for (double x : c.at("logits")) z.push_back(15.0 * std::tanh(x / 15.0));
  const int rows = c.at("rows"), V = c.at("V"), Vp = c.at("Vp");
  const auto targets = c.at("targets").get<std::vector<std::int32_t>>();
  std::vector<double> l(static_cast<std::size_t>(rows));
  tmod::detail::softmax_crossentropy<double>(z.data(), l.data(), targets.data(), rows, V, Vp, true,
                                             c.at("dloss").get<double>());
  EXPECT_LE(max_rel(l, losses), 1e-12);  // the same forward
  EXPECT_GT(max_rel(z, grad), 1e-2);     // but not the same gradient
}

// cap 0 is today's kernel, bit for bit, with and without backward. Both run on the same buffer:
// Eigen's vectorised row sums peel a head that depends on the row's address modulo the vector
// width, so the same kernel on two differently aligned copies may differ in the last bit.
TEST(SoftcapCrossentropy, OffIsSoftmaxCrossentropyBitForBit) {
  const int rows = 64, V = 500, Vp = 512;  // 32,000 elements: under and near the thread cutoff
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> logits(static_cast<std::size_t>(rows * Vp));
  for (float& x : logits) x = normal(rng);
  std::vector<std::int32_t> targets(static_cast<std::size_t>(rows));
  for (auto& t : targets) t = std::int32_t(rng() % V);
  for (bool backward : {false, true}) {
    std::vector<float> buf = logits;
    std::vector<double> la(static_cast<std::size_t>(rows)), lb(static_cast<std::size_t>(rows));
    tmod::detail::softmax_crossentropy<float>(buf.data(), la.data(), targets.data(), rows, V, Vp,
                                              backward, 1.0f / rows);
    const std::vector<float> a = buf;
    std::copy(logits.begin(), logits.end(), buf.begin());
    tmod::recipe::softcapped_crossentropy<float>(buf.data(), lb.data(), targets.data(), rows, V, Vp,
                                                 backward, 1.0f / rows, 0.0f);
    EXPECT_EQ(a, buf);
    EXPECT_EQ(la, lb);
  }
}

// ---- sliding-window attention -------------------------------------------------------------------

namespace {

struct attention_result {
  std::vector<double> out, dqkv;
};

template <class S>
attention_result run_window(const nlohmann::json& c, int window) {
  const int B = c.at("B"), T = c.at("T"), C = c.at("C"), H = c.at("H");
  const std::vector<S> qkv = as<S>(c.at("qkv")), dout = as<S>(c.at("dout"));
  std::vector<S> out(std::size_t(B * T * C)), att(std::size_t(B * H * T * T));
  std::vector<S> dqkv(qkv.size()), scratch(att.size());
  tmod::recipe::sliding_window_attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H,
                                                 window);
  tmod::detail::attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(),
                                   B, T, C, H);
  return {as_double(out), as_double(dqkv)};
}

}  // namespace

// The window's output and every gradient (dq, dk, dv through the unchanged attention backward)
// against torch's scaled_dot_product_attention with the window's mask: windows 5 and 1 of T = 12,
// and 12 (the whole causal row).
TEST(SlidingWindowAttention, MatchesPyTorchForwardAndGradient) {
  const auto cases = fixtures().at("sliding_window");
  ASSERT_EQ(cases.size(), 3u);
  for (const auto& c : cases) {
    const int window = c.at("window");
    const auto out = c.at("out").get<std::vector<double>>();
    const auto dqkv = c.at("dqkv").get<std::vector<double>>();
    const attention_result d = run_window<double>(c, window);
    EXPECT_LE(max_rel(d.out, out), 1e-12) << window;
    EXPECT_LE(max_rel(d.dqkv, dqkv), 1e-12) << window;
    const attention_result f = run_window<float>(c, window);
    EXPECT_LE(max_rel(f.out, out), 1e-5) << window;
    EXPECT_LE(max_rel(f.dqkv, dqkv), 1e-5) << window;
  }
}

// A slip in the window is caught: window 5's fixture computed with 4 or 6, or causally (12).
TEST(SlidingWindowAttention, AnotherWindowMissesTheFixture) {
  const auto c = fixtures().at("sliding_window").at(0);
  ASSERT_EQ(c.at("window").get<int>(), 5);
  const auto out = c.at("out").get<std::vector<double>>();
  const auto dqkv = c.at("dqkv").get<std::vector<double>>();
  for (int w : {4, 6, 12}) {
    const attention_result d = run_window<double>(c, w);
    EXPECT_GT(max_rel(d.out, out), 1e-3) << w;
    EXPECT_GT(max_rel(d.dqkv, dqkv), 1e-3) << w;
  }
}

// A window of T or more is today's causal attention, bit for bit (on the same output buffers:
// see OffIsSoftmaxCrossentropyBitForBit on alignment).
TEST(SlidingWindowAttention, FullWindowIsTodaysAttentionBitForBit) {
  const int B = 2, T = 33, C = 32, H = 4;
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> qkv(static_cast<std::size_t>(B * T * 3 * C));
  for (float& x : qkv) x = normal(rng);
  std::vector<float> out(static_cast<std::size_t>(B * T * C));
  std::vector<float> att(static_cast<std::size_t>(B * H * T * T));
  tmod::detail::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H);
  const std::vector<float> a = out, att_a = att;
  for (int w : {T, T + 100}) {
    std::fill(out.begin(), out.end(), 0.0f);
    std::fill(att.begin(), att.end(), 0.0f);
    tmod::recipe::sliding_window_attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H,
                                                   w);
    EXPECT_EQ(a, out);
    EXPECT_EQ(att_a, att);
  }
  // A window of T − 1 changes rows from T − 1 on.
  tmod::recipe::sliding_window_attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H,
                                                 T - 1);
  EXPECT_NE(a, out);
}

TEST(WindowSchedule, ShortAndLongLayersGrowToTheirWindows) {
  tmod::recipe::window_schedule s{.short_window = 512,
                                  .long_window = 2048,
                                  .long_every = 4,
                                  .start = 128,
                                  .grow_steps = 100,
                                  .block = 64};
  s.validate();
  // 12 layers: 11, 7 and 3 long, the others short.
  for (int l = 0; l < 12; ++l) EXPECT_EQ(s.is_long(l, 12), l == 11 || l == 7 || l == 3) << l;
  EXPECT_EQ(s.window(11, 12, 0), 128);
  EXPECT_EQ(s.window(0, 12, 0), 64);      // 128·512/2048 = 32, up to one block
  EXPECT_EQ(s.window(11, 12, 50), 1088);  // 128 + 1920·0.5
  EXPECT_EQ(s.window(11, 12, 100), 2048);
  EXPECT_EQ(s.window(10, 12, 1000), 512);
  EXPECT_GE(tmod::recipe::window_schedule{}.window(0, 12, 0), 1 << 20);  // off: no window
  s.long_window = 256;  // shorter than the short window
  EXPECT_THROW(s.validate(), trainkit::config_error);
}

// ---- value embeddings and U-net skips -----------------------------------------------------------

template <class S>
void check_value_embed(double tol) {
  const auto c = fixtures().at("value_embed").at(0);
  const int N = c.at("N"), C = c.at("C"), V = c.at("V");
  const auto lam = as<S>(c.at("lambda"));
  const auto tokens = c.at("tokens").get<std::vector<std::int32_t>>();
  const auto v = as<S>(c.at("v")), table = as<S>(c.at("table")), dout = as<S>(c.at("dout"));
  std::vector<S> out(std::size_t(N * C)), dv(out.size()), dtable(std::size_t(V * C), S(0));
  std::vector<S> dlambda(2, S(0));
  tmod::recipe::value_embed_forward(out.data(), C, v.data(), C, table.data(), tokens.data(), N, C,
                                    lam[0], lam[1]);
  tmod::recipe::value_embed_backward(dv.data(), C, dtable.data(), dlambda.data(), dout.data(), C,
                                     v.data(), C, table.data(), tokens.data(), N, C, lam[0],
                                     lam[1]);
  EXPECT_LE(max_rel(as_double(out), c.at("out").get<std::vector<double>>()), tol);
  EXPECT_LE(max_rel(as_double(dv), c.at("dv").get<std::vector<double>>()), tol);
  EXPECT_LE(max_rel(as_double(dtable), c.at("dtable").get<std::vector<double>>()), tol);
  EXPECT_LE(max_rel(as_double(dlambda), c.at("dlambda").get<std::vector<double>>()), tol);
}

TEST(ValueEmbeddings, MatchPyTorchForwardAndEveryGradient) {
  check_value_embed<double>(1e-12);
  check_value_embed<float>(1e-5);
}

TEST(ValueEmbeddings, UnetPatternSharesTablesAtMirroredDepths) {
  const tmod::recipe::value_embedding_plan p{.tables = 3, .layers = 12};
  p.validate();
  const std::vector<int> want{0, 1, 2, -1, -1, -1, -1, -1, -1, 0, 1, 2};
  for (int l = 0; l < 12; ++l) EXPECT_EQ(p.table_of(l), want[std::size_t(l)]) << l;
  EXPECT_THROW((tmod::recipe::value_embedding_plan{.tables = 7, .layers = 12}.validate()),
               trainkit::config_error);
}

template <class S>
void check_unet(double tol) {
  const auto c = fixtures().at("unet_skip").at(0);
  const int n = c.at("n");
  const S w = S(c.at("w").get<double>());
  auto x = as<S>(c.at("x"));
  const auto skip = as<S>(c.at("skip")), dout = as<S>(c.at("dout"));
  std::vector<S> dskip(std::size_t(n), S(0));
  S dw = 0;
  tmod::recipe::unet_skip_forward(x.data(), skip.data(), n, w);
  tmod::recipe::unet_skip_backward(dskip.data(), &dw, dout.data(), skip.data(), n, w);
  EXPECT_LE(max_rel(as_double(x), c.at("out").get<std::vector<double>>()), tol);
  // dx is dout itself (the skip adds, it does not scale x).
  EXPECT_LE(max_rel(as_double(dout), c.at("dx").get<std::vector<double>>()), tol);
  EXPECT_LE(max_rel(as_double(dskip), c.at("dskip").get<std::vector<double>>()), tol);
  EXPECT_NEAR(double(dw), c.at("dw").get<double>(), tol * std::abs(c.at("dw").get<double>()));
}

TEST(UnetSkips, MatchPyTorchForwardAndEveryGradient) {
  check_unet<double>(1e-12);
  check_unet<float>(1e-5);
}

TEST(UnetSkips, DecoderBlocksTakeTheirMirrorsOutput) {
  const tmod::recipe::unet_plan p{.layers = 12};
  EXPECT_EQ(p.encoder_blocks(), 6);
  for (int l = 0; l < 6; ++l) EXPECT_EQ(p.skip_source(l), -1) << l;
  for (int l = 6; l < 12; ++l) {
    EXPECT_EQ(p.skip_source(l), 11 - l) << l;  // block 6 takes block 5's output, 11 takes 0's
    EXPECT_EQ(p.weight_index(l), l - 6) << l;
  }
  const tmod::recipe::unet_plan odd{.layers = 7};
  EXPECT_EQ(odd.skip_source(3), -1);  // the middle block has no mirror
  EXPECT_EQ(odd.skip_source(4), 2);
  EXPECT_EQ(odd.skip_source(6), 0);
}
