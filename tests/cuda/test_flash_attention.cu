// GPU tests of trainkit's flash attention (model/cuda/flash_attention.cuh) against the naive CPU
// attention (out, dq, dk, dv) and the CPU twin of its tiling (the saved log-sum-exp): head sizes
// 64 and 128, T on and off the 64-row tile, outputs poisoned first.
#include "trainkit/model/cuda/flash_attention.cuh"  // first: compiles on its own

#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "gpu_test_support.cuh"
#include "reference.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/model/detail/flash_attention_reference.hpp"

namespace k = trainkit::model::kernels;
namespace ref = trainkit::test_ref;
using namespace trainkit::test_gpu;

namespace {

// bf16 inputs, bf16 P and dS in the tensor-core products, bf16 outputs: a chain of roundings,
// the tolerance of the naive CUDA attention's test. The lse is fp32 from fp32 scores.
constexpr double tol_chain = 2e-2;
constexpr double tol_lse = 1e-3;

fvec part_of_dqkv(const fvec& dqkv, int BT, int C, int part) {
  fvec out(std::size_t(BT) * C);
  for (std::size_t r = 0; r < std::size_t(BT); ++r)
    for (int c = 0; c < C; ++c) out[r * C + c] = dqkv[r * 3 * C + part * C + c];
  return out;
}

void check_flash_attention(int B, int T, int C, int H, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::size_t n = std::size_t(B) * T * C, nl = std::size_t(B) * H * T;
  // Spread 1.5: peaked rows, so the running maximum moves between key tiles.
  const fvec qkv = random_bf16(3 * n, rng, 1.5f), dout = random_bf16(n, rng);
  fvec exp_out, exp_att, exp_dqkv;
  ref::attention_forward(exp_out, exp_att, qkv, B, T, C, H);
  ref::attention_backward(exp_dqkv, dout, qkv, exp_att, B, T, C, H);
  fvec twin_out(n), exp_lse(nl);
  trainkit::model::detail::flash_attention_forward_reference(twin_out.data(), exp_lse.data(),
                                                             qkv.data(), B, T, C, H);

  auto d_qkv = to_device(qkv), d_dout = to_device(dout);
  auto out = poisoned(n), dqkv = poisoned(3 * n);
  auto lse = poisoned_f32(nl), delta = poisoned_f32(nl), dq_accum = poisoned_f32(n);
  k::flash_attention_forward(dev(out), lse.data(), dev(d_qkv), B, T, C, H, 0);
  const fvec out_h = to_host(out);
  EXPECT_LT(relative_error(out_h, exp_out), tol_chain) << "out, T=" << T << " C=" << C;
  EXPECT_LT(relative_error(to_host_raw(lse), exp_lse), tol_lse) << "lse, T=" << T;

  k::flash_attention_backward(dev(dqkv), delta.data(), dq_accum.data(), dev(d_dout), dev(d_qkv),
                              dev(out), lse.data(), B, T, C, H, 0);
  const fvec dqkv_h = to_host(dqkv);
  for (int part = 0; part < 3; ++part)
    EXPECT_LT(relative_error(part_of_dqkv(dqkv_h, B * T, C, part),
                             part_of_dqkv(exp_dqkv, B * T, C, part)),
              tol_chain)
        << "d"
        << "qkv"[part] << ", T=" << T << " C=" << C << " H=" << H;
}

TEST(CudaFlashAttention, Head64OddT) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_flash_attention(2, 67, 128, 2, 21);
}

TEST(CudaFlashAttention, Head64Gpt2WidthTileMultiple) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_flash_attention(1, 256, 768, 12, 22);
}

TEST(CudaFlashAttention, Head128PastTheTile) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_flash_attention(2, 129, 256, 2, 23);
}

TEST(CudaFlashAttention, Head128Long) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  check_flash_attention(1, 1000, 512, 4, 24);
}

TEST(CudaFlashAttention, RejectsHeadSizesNotBuilt) {
  // No device needed: the shape check runs before any launch.
  EXPECT_THROW(k::flash_attention_forward(nullptr, nullptr, nullptr, 1, 8, 96, 1, 0),
               trainkit::config_error);
  EXPECT_THROW(k::flash_attention_forward(nullptr, nullptr, nullptr, 1, 8, 128, 3, 0),
               trainkit::config_error);
}

}  // namespace
