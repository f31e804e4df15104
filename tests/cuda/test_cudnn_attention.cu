// GPU tests of the cuDNN fused attention (model/cuda/cudnn_attention.hpp, compiled by g++ in the
// trainkit_cudnn_engine object, reached through its registration as gpt2_cuda reaches it) against
// the naive CPU attention (out, dq, dk, dv) and the CPU flash twin (the softmax statistics), and of
// its graph cache: one graph per shape and pass. Grouped-query attention (KV < H) through the naive
// reference on the qkv with repeated k, v heads, dk and dv summed back over each group
// (gqa_expand.hpp). Sliding windows: cuDNN's diagonal band against the own flash kernel's windowed
// instantiation and the fp64 windowed attention (window_reference.hpp).
#include "trainkit/model/cuda/attention_engine.hpp"

#include <gtest/gtest.h>

#include <memory>

#include <cstdint>
#include <random>
#include <stdexcept>

#include "gpu_test_support.cuh"
#include "gqa_expand.hpp"
#include "reference.hpp"
#include "trainkit/model/cuda/flash_attention.cuh"
#include "trainkit/model/detail/flash_attention_reference.hpp"
#include "window_reference.hpp"

namespace k = trainkit::model::kernels;
namespace ref = trainkit::test_ref;
using namespace trainkit::test_gpu;

namespace {

constexpr double tol_chain = 2e-2;  // bf16 in, bf16 P in the products, bf16 out
constexpr double tol_lse = 1e-3;

std::unique_ptr<k::attention_engine> make_engine() {
  const k::attention_engine_factory make = k::cudnn_attention_factory();
  if (!make) throw std::logic_error("cudnn_engine.cpp is not linked into this test");
  return make(/*deterministic=*/true);
}

void check_cudnn_attention(k::attention_engine& att, int B, int T, int C, int H, std::uint64_t seed,
                           int kv = 0) {
  const int KV = kv ? kv : H, hs = C / H, BT = B * T;
  std::mt19937_64 rng(seed);
  const std::size_t n = std::size_t(B) * T * C, nl = std::size_t(B) * H * T;
  const std::size_t nqkv = std::size_t(BT) * (C + 2 * KV * hs);
  const fvec qkv = random_bf16(nqkv, rng, 1.5f), dout = random_bf16(n, rng);
  const fvec mha = expand_gqa(qkv, BT, H, KV, hs);  // itself when KV = H
  fvec exp_out, exp_att, dmha;
  ref::attention_forward(exp_out, exp_att, mha, B, T, C, H);
  ref::attention_backward(dmha, dout, mha, exp_att, B, T, C, H);
  const fvec exp_dqkv = fold_gqa_gradient(dmha, BT, H, KV, hs);
  fvec twin_out(n), exp_lse(nl);
  trainkit::model::detail::flash_attention_forward_reference(twin_out.data(), exp_lse.data(),
                                                             qkv.data(), B, T, C, H, KV);

  auto d_qkv = to_device(qkv), d_dout = to_device(dout);
  auto out = poisoned(n), dqkv = poisoned(nqkv);
  auto lse = poisoned_f32(nl);
  att.forward(dev(out), lse.data(), dev(d_qkv), B, T, C, H, KV, 0);
  EXPECT_LT(relative_error(to_host(out), exp_out), tol_chain)
      << "out, T=" << T << " C=" << C << " KV=" << KV;
  EXPECT_LT(relative_error(to_host_raw(lse), exp_lse), tol_lse) << "lse, T=" << T;
  att.backward(dev(dqkv), dev(d_dout), dev(d_qkv), dev(out), lse.data(), B, T, C, H, KV, 0);
  const fvec dqkv_h = to_host(dqkv);
  for (int part = 0; part < 3; ++part)
    EXPECT_LT(relative_error(part_of_gqa(dqkv_h, BT, H, KV, hs, part),
                             part_of_gqa(exp_dqkv, BT, H, KV, hs, part)),
              tol_chain)
        << "d"
        << "qkv"[part] << ", T=" << T << " C=" << C << " H=" << H << " KV=" << KV;
}

// Linking cudnn_engine.cpp is what registers the engine: no device needed to see it.
TEST(CudaCudnnAttention, LinkingTheEngineRegistersIt) {
  EXPECT_NE(k::cudnn_attention_factory(), nullptr);
}

TEST(CudaCudnnAttention, MatchesCpuAttentionHead64And128) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  auto engine = make_engine();
  k::attention_engine& att = *engine;
  check_cudnn_attention(att, 2, 67, 128, 2, 31);    // hs 64, T off the tile
  check_cudnn_attention(att, 1, 256, 768, 12, 32);  // GPT-2 width
  check_cudnn_attention(att, 2, 129, 256, 2, 33);   // hs 128
}

// Grouped-query attention: Llama d12's heads (12 and 6, hs 64), groups of 3, one KV head, hs 128.
TEST(CudaCudnnAttention, MatchesCpuAttentionWithGroupedQueries) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  auto engine = make_engine();
  k::attention_engine& att = *engine;
  check_cudnn_attention(att, 1, 256, 768, 12, 37, /*kv=*/6);
  check_cudnn_attention(att, 2, 67, 384, 6, 38, /*kv=*/2);
  check_cudnn_attention(att, 1, 129, 256, 4, 39, /*kv=*/1);
  check_cudnn_attention(att, 1, 96, 512, 4, 40, /*kv=*/2);
  EXPECT_EQ(att.cached_graphs(), 8u) << "one graph per shape (KV included) and pass";
}

TEST(CudaCudnnAttention, BuildsOneGraphPerShapeAndPass) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  auto engine = make_engine();
  k::attention_engine& att = *engine;
  check_cudnn_attention(att, 1, 64, 128, 2, 34);
  EXPECT_EQ(att.cached_graphs(), 2u);
  check_cudnn_attention(att, 1, 64, 128, 2, 35);  // same shape: reused
  EXPECT_EQ(att.cached_graphs(), 2u);
  check_cudnn_attention(att, 1, 96, 128, 2, 36);
  EXPECT_EQ(att.cached_graphs(), 4u);
}

// cuDNN with a sliding window (window W: query i sees keys i − W < j ≤ i) against the fp64
// windowed attention and the own flash kernel with the same window: out, lse and dqkv.
void check_cudnn_window(k::attention_engine& att, window_ref::shape s, int window,
                        std::uint64_t seed) {
  const int B = s.B, T = s.T, C = s.C, H = s.H, KV = s.kv();
  std::mt19937_64 rng(seed);
  const std::size_t n = std::size_t(B) * T * C, nl = std::size_t(B) * H * T;
  const std::size_t nqkv = std::size_t(B) * T * s.row();
  const fvec qkv = random_bf16(nqkv, rng, 1.5f), dout = random_bf16(n, rng);
  std::vector<double> want_out, want_lse, want_dqkv;
  const std::vector<double> qkv_d(qkv.begin(), qkv.end()), dout_d(dout.begin(), dout.end());
  window_ref::naive_forward(want_out, want_lse, qkv_d, s, window);
  window_ref::naive_backward(want_dqkv, dout_d, qkv_d, want_out, want_lse, s, window);
  const fvec exp_out(want_out.begin(), want_out.end()), exp_lse(want_lse.begin(), want_lse.end());
  const fvec exp_dqkv(want_dqkv.begin(), want_dqkv.end());

  auto d_qkv = to_device(qkv), d_dout = to_device(dout);
  auto out = poisoned(n), dqkv = poisoned(nqkv);
  auto lse = poisoned_f32(nl);
  att.forward(dev(out), lse.data(), dev(d_qkv), B, T, C, H, KV, 0, window);
  att.backward(dev(dqkv), dev(d_dout), dev(d_qkv), dev(out), lse.data(), B, T, C, H, KV, 0, window);
  auto f_out = poisoned(n), f_dqkv = poisoned(nqkv);
  auto f_lse = poisoned_f32(nl), delta = poisoned_f32(nl), dq_accum = poisoned_f32(n);
  k::flash_attention_forward(dev(f_out), f_lse.data(), dev(d_qkv), B, T, C, H, KV, 0, window);
  k::flash_attention_backward(dev(f_dqkv), delta.data(), dq_accum.data(), dev(d_dout), dev(d_qkv),
                              dev(f_out), f_lse.data(), B, T, C, H, KV, 0, window);
  const fvec out_h = to_host(out), dqkv_h = to_host(dqkv), f_out_h = to_host(f_out);
  const fvec f_dqkv_h = to_host(f_dqkv);
  EXPECT_LT(relative_error(out_h, exp_out), tol_chain) << "out vs fp64, W=" << window;
  EXPECT_LT(relative_error(out_h, f_out_h), tol_chain) << "out vs flash, W=" << window;
  EXPECT_LT(relative_error(to_host_raw(lse), exp_lse), tol_lse) << "lse vs fp64, W=" << window;
  EXPECT_LT(relative_error(to_host_raw(lse), to_host_raw(f_lse)), tol_lse) << "lse vs flash";
  const int BT = B * T, hs = C / H;
  for (int part = 0; part < 3; ++part) {
    const fvec got = part_of_gqa(dqkv_h, BT, H, KV, hs, part);
    EXPECT_LT(relative_error(got, part_of_gqa(exp_dqkv, BT, H, KV, hs, part)), tol_chain)
        << "d"
        << "qkv"[part] << " vs fp64, T=" << T << " W=" << window;
    EXPECT_LT(relative_error(got, part_of_gqa(f_dqkv_h, BT, H, KV, hs, part)), tol_chain)
        << "d"
        << "qkv"[part] << " vs flash, T=" << T << " W=" << window;
  }
}

TEST(CudaCudnnAttention, SlidingWindowMatchesFlashAndCpu) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  auto engine = make_engine();
  k::attention_engine& att = *engine;
  check_cudnn_window(att, {1, 300, 128, 2}, 5, 61);         // smaller than a row group
  check_cudnn_window(att, {1, 300, 128, 2}, 79, 62);        // not a multiple of the tile
  check_cudnn_window(att, {2, 200, 256, 2}, 64, 63);        // hs 128, one tile
  check_cudnn_window(att, {1, 1024, 768, 12, 6}, 256, 64);  // Llama d12's heads
  EXPECT_EQ(att.cached_graphs(), 8u) << "one graph per shape, window and pass";
  // A window of T or more is the full causal graph, not a new one.
  check_cudnn_window(att, {1, 300, 128, 2}, 300, 65);
  check_cudnn_window(att, {1, 300, 128, 2}, 0, 66);
  EXPECT_EQ(att.cached_graphs(), 10u);
}

TEST(CudaCudnnAttention, SlidingWindowRefusesANegativeWindow) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  auto engine = make_engine();
  EXPECT_THROW(engine->forward(nullptr, nullptr, nullptr, 1, 8, 128, 2, 2, 0, -1),
               trainkit::config_error);
}

TEST(CudaCudnnAttention, RejectsBadShapesBeforeTouchingCudnn) {
  // check_shape runs before any graph is built; the handle needs a device, so this needs one.
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  auto engine = make_engine();
  k::attention_engine& att = *engine;
  EXPECT_THROW(att.forward(nullptr, nullptr, nullptr, 1, 8, 100, 3, 3, 0), trainkit::config_error);
  EXPECT_THROW(att.forward(nullptr, nullptr, nullptr, 1, 8, 12, 1, 1, 0), trainkit::config_error);
  EXPECT_THROW(att.forward(nullptr, nullptr, nullptr, 1, 8, 256, 4, 3, 0),
               trainkit::config_error);  // KV must divide H
}

}  // namespace
