// GPU tests of every fused kernel of the CUDA GPT-2 against its CPU reference
// (cpu/kernels.hpp through reference.hpp), on random bf16-representable inputs, with
// outputs poisoned (NaN) before each run, at odd sizes (N = 111 rows, T = 67 not a multiple of the
// 8-wide tiles) and GPT-2's real widths (C = 768 and 1600, V = 50257 padded to 50304).
// Tolerances are relative norms ‖gpu − cpu‖/‖cpu‖: 1e-2 where the GPU rounds once to bf16 (a bf16
// ulp is 2⁻⁸ relative, half of it per rounding, so a correct kernel lands near 2e-3 and any
// indexing error lands near 1); 2e-2 for chains of roundings (attention: scores → bf16
// probabilities → bf16 output; LayerNorm backward: bf16 inputs to a difference of means).
// Every test skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "gpu_test_support.cuh"
#include "reference.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/linalg/gemm_cublaslt.cuh"
#include "trainkit/model/cuda/attention.cuh"
#include "trainkit/model/cuda/classifier.cuh"
#include "trainkit/model/cuda/elementwise.cuh"
#include "trainkit/model/cuda/encoder.cuh"
#include "trainkit/model/cuda/layernorm.cuh"
#include "trainkit/model/cuda/token_buckets.cuh"

namespace {

namespace k = trainkit::model::kernels;
namespace ref = trainkit::test_ref;
using namespace trainkit::test_gpu;
using trainkit::cuda::device_buffer;

constexpr double tol_single = 1e-2;
constexpr double tol_chain = 2e-2;

TEST(CudaKernels, EncoderForward) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(1);
  const int B = 3, T = 37, C = 768, V = 50257, Vp = 50304;
  const fvec wte = random_bf16(std::size_t(Vp) * C, rng, 0.02f),
             wpe = random_bf16(T * C, rng, 0.02f);
  auto tokens = random_tokens(B * T, V, rng);
  auto d_wte = to_device(wte), d_wpe = to_device(wpe);
  auto d_tok = to_device_raw(tokens);
  auto out = poisoned(std::size_t(B) * T * C);
  auto flag = to_device_raw(std::vector<int>{0});
  k::encoder_forward(dev(out), d_tok.data(), dev(d_wte), dev(d_wpe), flag.data(), B, T, C, V, 0);
  fvec expected;
  ref::encoder_forward(expected, tokens, wte, wpe, B, T, C);
  EXPECT_LT(relative_error(to_host(out), expected), tol_single);
  EXPECT_EQ(to_host_raw(flag)[0], 0);

  tokens[5] = V;  // out of range: flagged, no fault
  d_tok = to_device_raw(tokens);
  k::encoder_forward(dev(out), d_tok.data(), dev(d_wte), dev(d_wpe), flag.data(), B, T, C, V, 0);
  EXPECT_EQ(to_host_raw(flag)[0], 1);
}

TEST(CudaKernels, EncoderBackwardBucketsAtomicAndWpe) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(2);
  const int B = 4, T = 33, C = 1600, V = 64;  // few distinct tokens: many repeats per bucket
  const auto tokens = random_tokens(B * T, V, rng);
  const fvec dout = random_bf16(std::size_t(B) * T * C, rng);
  const fvec dwte0 = random_bf16(std::size_t(V) * C, rng), dwpe0 = random_bf16(T * C, rng);
  fvec exp_wte = dwte0, exp_wpe = dwpe0;
  ref::encoder_backward(exp_wte, exp_wpe, dout, tokens, B, T, C);

  auto d_dout = to_device(dout);
  auto d_tok = to_device_raw(tokens);
  const auto buckets = k::make_token_buckets(tokens, V);
  auto d_buckets = to_device_raw(buckets.packed());
  fvec first;
  for (int run = 0; run < 2; ++run) {
    auto dwte = to_device(dwte0);
    k::encoder_backward_buckets(dev(dwte), dev(d_dout), d_buckets.data(),
                                int(buckets.tokens.size()), C, 0);
    const fvec got = to_host(dwte);
    EXPECT_LT(relative_error(got, exp_wte), tol_single);
    if (run == 0)
      first = got;
    else
      EXPECT_EQ(got, first) << "bucketed wte backward must be deterministic";
  }
  auto dwte = to_device(dwte0);
  k::encoder_backward_atomic(dev(dwte), dev(d_dout), d_tok.data(), B * T, C, V, 0);
  EXPECT_LT(relative_error(to_host(dwte), exp_wte), tol_chain);  // bf16 adds, one per row
  auto dwpe = to_device(dwpe0);
  k::encoder_backward_wpe(dev(dwpe), dev(d_dout), B, T, C, 0);
  EXPECT_LT(relative_error(to_host(dwpe), exp_wpe), tol_single);
}

// A Zipf-distributed batch, as real text makes (a hot token holds hundreds of rows): the kernel
// splits each bucket over row groups and must perform exactly the additions of its CPU twin
// (detail/token_buckets.hpp; tests/model/test_token_buckets.cpp checks the twin).
TEST(CudaKernels, EncoderBackwardBucketsZipfBatchEqualsTheTwinBitForBit) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(21);
  const int N = 8 * 1024, V = 50257, Vp = 50304;
  std::vector<double> w(V);
  for (int r = 0; r < V; ++r) w[r] = 1.0 / std::pow(r + 1.0, 1.1);
  std::discrete_distribution<int> rank(w.begin(), w.end());
  std::vector<std::int32_t> tokens(N);
  for (auto& t : tokens) t = rank(rng);  // rank r is token r: the hot ones have small ids
  const auto buckets = k::make_token_buckets(tokens, V);
  ASSERT_GT(buckets.largest(), 400);
  for (const int C : {768, 1600}) {
    const fvec dout = random_bf16(std::size_t(N) * C, rng);
    const fvec dwte0 = random_bf16(std::size_t(Vp) * C, rng, 0.1f);
    fvec want = dwte0;
    k::encoder_backward_buckets_twin(want, dout, buckets, C);
    auto d_dout = to_device(dout);
    auto d_buckets = to_device_raw(buckets.packed());
    auto dwte = to_device(dwte0);
    k::encoder_backward_buckets(dev(dwte), dev(d_dout), d_buckets.data(),
                                int(buckets.tokens.size()), C, 0);
    const fvec got = to_host(dwte);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
    EXPECT_EQ(differ, 0u) << "C=" << C << ": elements differing from the CPU twin";
  }
}

TEST(CudaKernels, LayerNormForwardWithResidual) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(3);
  for (const int C : {768, 1600}) {
    const int N = 111;
    const fvec a = random_bf16(std::size_t(N) * C, rng), b = random_bf16(std::size_t(N) * C, rng);
    const fvec w = random_bf16(C, rng, 0.2f, 1.0f), bias = random_bf16(C, rng, 0.2f);
    fvec res(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) res[i] = round_bf16(a[i] + b[i]);
    fvec exp_out, exp_mean, exp_rstd;
    ref::layernorm_forward(exp_out, exp_mean, exp_rstd, res, w, bias, N, C);
    auto da = to_device(a), db = to_device(b), dw = to_device(w), dbias = to_device(bias);
    auto out = poisoned(a.size()), res_out = poisoned(a.size());
    auto mean = poisoned_f32(N), rstd = poisoned_f32(N);
    k::layernorm_forward(dev(res_out), dev(out), mean.data(), rstd.data(), dev(da), dev(db),
                         dev(dw), dev(dbias), N, C, 0);
    EXPECT_EQ(relative_error(to_host(res_out), res), 0.0) << "C=" << C;
    EXPECT_LT(relative_error(to_host(out), exp_out), tol_single) << "C=" << C;
    EXPECT_LT(relative_error(to_host_raw(mean), exp_mean), 1e-4) << "C=" << C;
    EXPECT_LT(relative_error(to_host_raw(rstd), exp_rstd), 1e-4) << "C=" << C;
  }
}

TEST(CudaKernels, LayerNormBackward) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(4);
  for (const int C : {768, 1600}) {
    const int N = 300;  // 10 chunks of 32 rows, the last one short (warps 2 and 3 idle there)
    const fvec x = random_bf16(std::size_t(N) * C, rng), dout = random_bf16(x.size(), rng);
    const fvec w = random_bf16(C, rng, 0.2f, 1.0f), bias = random_bf16(C, rng, 0.2f);
    fvec ln, mean, rstd;
    ref::layernorm_forward(ln, mean, rstd, x, w, bias, N, C);
    const fvec dinp0 = random_bf16(x.size(), rng), dw0 = random_bf16(C, rng),
               db0 = random_bf16(C, rng);
    fvec exp_dinp = dinp0, exp_dw = dw0, exp_db = db0;
    ref::layernorm_backward(exp_dinp, exp_dw, exp_db, dout, x, w, mean, rstd, N, C);
    auto dx = to_device(x), ddout = to_device(dout), dwt = to_device(w);
    auto dmean = to_device_raw(mean), drstd = to_device_raw(rstd);
    auto dinp = to_device(dinp0), dw = to_device(dw0), db = to_device(db0);
    auto partial = poisoned_f32(k::layernorm_partial_floats(N, C));
    k::layernorm_backward(dev(dinp), dev(dw), dev(db), partial.data(), dev(ddout), dev(dx),
                          dev(dwt), dmean.data(), drstd.data(), N, C, 0);
    const fvec got_dinp = to_host(dinp), got_dw = to_host(dw), got_db = to_host(db);
    EXPECT_LT(relative_error(got_dinp, exp_dinp), tol_chain) << "C=" << C;
    EXPECT_LT(relative_error(got_dw, exp_dw), tol_single) << "C=" << C;
    EXPECT_LT(relative_error(got_db, exp_db), tol_single) << "C=" << C;
    // No atomics anywhere: a second run from the same inputs gives the same bits.
    auto dinp2 = to_device(dinp0), dw2 = to_device(dw0), db2 = to_device(db0);
    k::layernorm_backward(dev(dinp2), dev(dw2), dev(db2), partial.data(), dev(ddout), dev(dx),
                          dev(dwt), dmean.data(), drstd.data(), N, C, 0);
    EXPECT_EQ(to_host(dinp2), got_dinp) << "C=" << C;
    EXPECT_EQ(to_host(dw2), got_dw) << "C=" << C;
    EXPECT_EQ(to_host(db2), got_db) << "C=" << C;
  }
}

TEST(CudaKernels, MatmulEpilogues) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(5);
  const int N = 111, IC = 768, OC = 3072;
  const fvec inp = random_bf16(std::size_t(N) * IC, rng),
             w = random_bf16(std::size_t(OC) * IC, rng, 0.05f);
  const fvec bias = random_bf16(OC, rng, 0.5f);
  auto d_inp = to_device(inp), d_w = to_device(w), d_bias = to_device(bias);
  k::matmul_context mm;

  // bias and gelu_aux_bias (forward)
  fvec pre;
  ref::linear_forward(pre, inp, w, bias, N, IC, OC);
  fvec act;
  ref::gelu_forward(act, pre);
  auto out = poisoned(std::size_t(N) * OC), aux = poisoned(std::size_t(N) * OC);
  k::matmul_arguments f;
  f.a = dev(d_inp), f.lda = IC;
  f.b = dev(d_w), f.trans_b = true, f.ldb = IC;
  f.d = dev(out), f.ldd = OC;
  f.m = N, f.n = OC, f.k = IC;
  f.ep = k::epilogue::bias, f.bias = dev(d_bias);
  mm.run(f, 0);
  EXPECT_LT(relative_error(to_host(out), pre), tol_single);
  out = poisoned(std::size_t(N) * OC);
  f.ep = k::epilogue::gelu_aux_bias, f.aux = dev(aux), f.ld_aux = OC;
  mm.run(f, 0);
  EXPECT_LT(relative_error(to_host(aux), pre), tol_single);
  EXPECT_LT(relative_error(to_host(out), act), tol_single);

  // dgelu (backward to the input of a GELU layer): dinp = (dout · w) ⊙ gelu'(pre)
  const fvec dout_small = random_bf16(std::size_t(N) * IC, rng);  // (N, IC) feeding back to OC
  const fvec pre_r = to_host(aux);                                // the aux the GPU stored
  fvec dact, dummy_w(std::size_t(IC) * OC, 0.0f), dummy_b;
  // x (N, OC) ← dout_small (N, IC) · wᵀ … as a layer OC → IC with weight (IC, OC)
  const fvec w2 = random_bf16(std::size_t(IC) * OC, rng, 0.05f);
  ref::linear_backward(dact, dummy_w, dummy_b, dout_small, act, w2, N, OC, IC);
  fvec exp_dpre;
  ref::gelu_backward(exp_dpre, pre_r, dact);
  auto d_dout = to_device(dout_small), d_w2 = to_device(w2);
  auto dpre = poisoned(std::size_t(N) * OC);
  k::matmul_arguments g;
  g.a = dev(d_dout), g.lda = IC;
  g.b = dev(d_w2), g.ldb = OC;
  g.d = dev(dpre), g.ldd = OC;
  g.m = N, g.n = OC, g.k = IC;
  g.ep = k::epilogue::dgelu, g.aux = dev(aux), g.ld_aux = OC;
  mm.run(g, 0);
  EXPECT_LT(relative_error(to_host(dpre), exp_dpre), tol_chain);

  // weight gradient with bgradb: dw (OC, IC) += doutᵀ · inp, bias_grad = Σ_rows dout
  const fvec dy = random_bf16(std::size_t(N) * OC, rng);
  const fvec dw0 = random_bf16(std::size_t(OC) * IC, rng, 0.1f);
  fvec exp_dw = dw0, exp_db(OC, 0.0f), ignored_dinp;
  ref::linear_backward(ignored_dinp, exp_dw, exp_db, dy, inp, w, N, IC, OC);
  auto d_dy = to_device(dy), d_dw = to_device(dw0);
  auto d_db = poisoned(OC);
  k::matmul_arguments h;
  h.a = dev(d_dy), h.trans_a = true, h.lda = OC;
  h.b = dev(d_inp), h.ldb = IC;
  h.d = dev(d_dw), h.ldd = IC;
  h.m = OC, h.n = IC, h.k = N;
  h.beta = 1.0f;
  h.ep = k::epilogue::bgradb, h.bias_grad = dev(d_db);
  mm.run(h, 0);
  EXPECT_LT(relative_error(to_host(d_dw), exp_dw), tol_single);
  EXPECT_LT(relative_error(to_host(d_db), exp_db), tol_single);
  RecordProperty("matmul_fallbacks", mm.fallbacks());
  std::printf("matmul epilogues through fallback kernels: %d\n", mm.fallbacks());
}

TEST(CudaKernels, MatmulRejectsBadArguments) {
  k::matmul_arguments x;  // all null: can_implement runs before any CUDA call
  EXPECT_THROW(k::matmul_context::can_implement(x), trainkit::config_error);
  bf16_t* p = reinterpret_cast<bf16_t*>(std::uintptr_t(256));
  x.a = p, x.b = p, x.d = p, x.m = 8, x.n = 8, x.k = 8, x.lda = 8, x.ldb = 8, x.ldd = 8;
  EXPECT_NO_THROW(k::matmul_context::can_implement(x));
  x.ep = k::epilogue::dgelu, x.aux = p, x.ld_aux = 12;  // not a multiple of 8
  EXPECT_THROW(k::matmul_context::can_implement(x), trainkit::config_error);
}

void check_attention(int B, int T, int C, int H, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int hs = C / H, ld = k::attention_ld(T);
  const std::size_t n = std::size_t(B) * T * C, att_n = k::attention_matrix_elements(B, H, T);
  const fvec qkv = random_bf16(3 * n, rng), dout = random_bf16(n, rng);
  fvec exp_out, exp_att, exp_dqkv;
  ref::attention_forward(exp_out, exp_att, qkv, B, T, C, H);
  ref::attention_backward(exp_dqkv, dout, qkv, exp_att, B, T, C, H);

  auto d_qkv = to_device(qkv), d_dout = to_device(dout);
  auto qkvr = poisoned(3 * n), att = poisoned(att_n), heads = poisoned(n),
       dscores = poisoned(att_n), dqkvr = poisoned(3 * n), out = poisoned(n),
       dqkv = poisoned(3 * n);
  auto scores = poisoned_f32(att_n);
  k::attention_buffers buf{dev(qkvr),    dev(att),   scores.data(),
                           dev(dscores), dev(heads), dev(dqkvr)};
  k::matmul_context mm;
  k::attention_forward(mm, dev(out), dev(d_qkv), buf, B, T, C, H, 0);
  EXPECT_LT(relative_error(to_host(out), exp_out), tol_chain) << "T=" << T << " C=" << C;
  const fvec att_h = to_host(att);
  fvec att_unpadded(std::size_t(B) * H * T * T);
  for (std::size_t r = 0; r < std::size_t(B) * H * T; ++r)
    for (int j = 0; j < T; ++j) att_unpadded[r * T + j] = att_h[r * ld + j];
  EXPECT_LT(relative_error(att_unpadded, exp_att), tol_single) << "T=" << T;
  k::attention_backward(mm, dev(dqkv), dev(d_dout), buf, B, T, C, H, 0);
  EXPECT_LT(relative_error(to_host(dqkv), exp_dqkv), tol_chain) << "T=" << T << " C=" << C;
  (void)hs;
}

TEST(CudaKernels, AttentionOddT) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_attention(2, 67, 128, 2, 6);
}

TEST(CudaKernels, AttentionGpt2Width) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_attention(1, 256, 768, 12, 7);
}

TEST(CudaKernels, ClassifierForwardBackwardMasksPaddedVocab) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(8);
  const int N = 7, V = 50257, Vp = 50304;
  const float dloss = 0.37f;
  const fvec logits = random_bf16(std::size_t(N) * Vp, rng, 2.0f);  // padded columns too: masked
  auto targets = random_tokens(N, V, rng);
  targets[0] = V - 1;  // the last real column
  fvec exp_d = logits;
  std::vector<double> exp_loss;
  ref::softmax_crossentropy(exp_d, exp_loss, targets, N, V, Vp, true, dloss);

  auto d_logits = to_device(logits);
  auto d_tgt = to_device_raw(targets);
  auto losses = poisoned_f32(N);
  auto flag = to_device_raw(std::vector<int>{0});
  k::classifier(dev(d_logits), losses.data(), d_tgt.data(), flag.data(), N, V, Vp, dloss, false, 0);
  const auto fwd = to_host_raw(losses);
  EXPECT_EQ(to_host(d_logits), logits) << "forward-only must leave the logits alone";
  k::classifier(dev(d_logits), losses.data(), d_tgt.data(), flag.data(), N, V, Vp, dloss, true, 0);
  const auto got = to_host_raw(losses);
  for (int r = 0; r < N; ++r) {
    EXPECT_NEAR(got[r], exp_loss[r], 1e-3 * std::abs(exp_loss[r]) + 1e-4) << r;
    EXPECT_EQ(got[r], fwd[r]) << "forward and forward_backward losses must agree exactly";
  }
  const fvec d = to_host(d_logits);
  EXPECT_LT(relative_error(d, exp_d), tol_single);
  for (int r = 0; r < N; ++r)
    for (int j = V; j < Vp; ++j) ASSERT_EQ(d[std::size_t(r) * Vp + j], 0.0f) << r << "," << j;
  EXPECT_EQ(to_host_raw(flag)[0], 0);
}

TEST(CudaKernels, GeluForward) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(9);
  const fvec x = random_bf16(111 * 3072, rng, 2.0f);
  fvec expected;
  ref::gelu_forward(expected, x);
  auto dx = to_device(x);
  auto out = poisoned(x.size());
  k::gelu_forward(dev(out), dev(dx), std::int64_t(x.size()), 0);
  EXPECT_LT(relative_error(to_host(out), expected), tol_single);
}

// dst += src, exact per element (one bf16 rounding of an fp32 sum): the vector path, its scalar
// tail (n not a multiple of 8) and unaligned buffers (offset by one element) all give it.
TEST(CudaKernels, AccumulateVectorTailAndUnaligned) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(10);
  const std::size_t n = 3 * 1024 + 5;
  const fvec a = random_bf16(n + 1, rng), b = random_bf16(n + 1, rng);
  for (const std::size_t offset : {std::size_t(0), std::size_t(1)}) {
    const std::size_t m = n - offset;
    fvec want(a.begin() + std::ptrdiff_t(offset), a.begin() + std::ptrdiff_t(offset + m));
    for (std::size_t i = 0; i < m; ++i) want[i] = round_bf16(want[i] + b[offset + i]);
    auto da = to_device(a), db = to_device(b);
    k::accumulate(dev(da) + offset, dev(db) + offset, std::int64_t(m), 0);
    const fvec got = to_host(da);
    EXPECT_EQ(fvec(got.begin() + std::ptrdiff_t(offset), got.begin() + std::ptrdiff_t(offset + m)),
              want)
        << "offset " << offset;
    if (offset == 1) EXPECT_EQ(got[0], a[0]) << "element before the range written";
  }
}

// The deterministic step builds its token buckets on the device: the same packed arrays as the
// host's make_token_buckets (stable order, out-of-range tokens left out), and the bucket kernel
// launched for the upper bound N gives the twin's result.
TEST(CudaKernels, DeviceTokenBucketsEqualTheHostsAndFeedTheKernel) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(22);
  const int N = 4 * 1024 + 3, V = 50257, Vp = 50304, C = 768;
  std::vector<double> w(V);
  for (int r = 0; r < V; ++r) w[r] = 1.0 / std::pow(r + 1.0, 1.1);
  std::discrete_distribution<int> rank(w.begin(), w.end());
  std::vector<std::int32_t> tokens(N);
  for (auto& t : tokens) t = rank(rng);
  tokens[7] = V;  // out of range: flagged by the forward, left out here
  tokens[100] = -1;
  tokens[N - 1] = V + 5;
  const auto host = k::make_token_buckets(tokens, V);
  const std::vector<std::int32_t> want = host.packed();
  k::device_token_buckets dev_buckets;
  dev_buckets.reserve(std::size_t(N) + 100, V);  // capacity above the batch: a smaller batch
  auto d_tok = to_device_raw(tokens);
  auto d_packed = to_device_raw(std::vector<std::int32_t>(3 * std::size_t(N) + 2, -7));
  dev_buckets.build(d_packed.data(), d_tok.data(), N, V, 0);
  std::vector<std::int32_t> got = to_host_raw(d_packed);
  got.resize(want.size());
  EXPECT_EQ(got, want);

  const fvec dout = random_bf16(std::size_t(N) * C, rng);
  const fvec dwte0 = random_bf16(std::size_t(Vp) * C, rng, 0.1f);
  fvec twin = dwte0;
  k::encoder_backward_buckets_twin(twin, dout, host, C);
  auto d_dout = to_device(dout);
  auto dwte = to_device(dwte0);
  k::encoder_backward_buckets(dev(dwte), dev(d_dout), d_packed.data(), N, C, 0);
  EXPECT_EQ(to_host(dwte), twin);
}

// Autotuning times several algorithms on the first GEMM of a shape: an accumulating GEMM
// (β = 1, the weight gradients) must still add A·Bᵀ to D exactly once per call — the trials
// write a scratch copy — and the second call of the shape reuses the choice (no new trials).
TEST(CudaKernels, MatmulAutotuneAccumulatesOncePerCall) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  std::mt19937_64 rng(11);
  const int N = 256, IC = 768, OC = 768;
  const fvec inp = random_bf16(std::size_t(N) * IC, rng),
             w = random_bf16(std::size_t(OC) * IC, rng, 0.05f),
             d0 = random_bf16(std::size_t(N) * OC, rng);
  fvec prod;
  ref::linear_forward(prod, inp, w, fvec(OC, 0.0f), N, IC, OC);
  auto d_inp = to_device(inp), d_w = to_device(w), d = to_device(d0);
  k::matmul_context mm;
  ASSERT_TRUE(mm.autotune());
  k::matmul_arguments f;
  f.a = dev(d_inp), f.lda = IC;
  f.b = dev(d_w), f.trans_b = true, f.ldb = IC;
  f.d = dev(d), f.ldd = OC;
  f.m = N, f.n = OC, f.k = IC;
  f.beta = 1.0f;
  for (int call = 1; call <= 2; ++call) {
    mm.run(f, 0);
    fvec want(d0.size());
    for (std::size_t i = 0; i < want.size(); ++i) want[i] = d0[i] + float(call) * prod[i];
    EXPECT_LT(relative_error(to_host(d), want), tol_chain) << "call " << call;
  }
  ASSERT_EQ(mm.tuning_log().size(), 1u);
  const auto& t = mm.tuning_log()[0];
  EXPECT_GE(t.candidates, 1);
  EXPECT_GE(t.heuristic, 0) << "no candidate ran, yet the GEMM did";
  EXPECT_LE(t.heuristic, t.chosen);
  EXPECT_GT(t.heuristic_ms, 0.0) << "the heuristic's reference time was never measured";
  EXPECT_GT(t.best_ms, 0.0);
  EXPECT_LE(t.best_ms, t.heuristic_ms);
  std::printf("[ autotune ] %dx%dx%d: %d candidates, heuristic %.4f ms, best #%d %.4f ms\n", t.m,
              t.n, t.k, t.candidates, t.heuristic_ms, t.chosen, t.best_ms);
}

}  // namespace
