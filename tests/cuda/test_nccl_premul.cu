// The NCCL reducers over one GPU with a collective that really runs (issue 28, item 8).
//
// Over a world of one, an in-place ncclSum launches nothing: the one-GPU training tests
// (test_cuda_training.cu) would pass even if a reducer reduced a bucket before backward wrote it,
// because the "reduction" never touches memory. A pre-multiplied sum (comm/nccl_sum_op.hpp,
// ncclRedOpCreatePreMulSum) launches a real kernel on the reducer's stream where the collective was
// enqueued: ×2 must give exactly twice the gradients of the same model without a reducer (doubling
// is exact in bf16), every element of every bucket. A bucket reduced too early reads a half-written
// gradient, one never reduced stays ×1, one reduced twice is ×4; an optimizer that ran before
// finish() ordered the compute stream would see ×1. Skips without a device.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.cuh"
#include "trainkit/comm/nccl_communicator.hpp"
#include "trainkit/comm/nccl_sum_op.hpp"
#include "trainkit/core/cuda/execution_context.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/model/gpt2/cuda.hpp"
#include "trainkit/reduce/nccl_allreduce.hpp"
#include "trainkit/reduce/nccl_zero1.hpp"

namespace {

namespace tk = trainkit;
using namespace tk::test_gpu;

struct device_tokens {
  tk::cuda::device_buffer<std::int32_t> inputs, targets;
  int B, T;
  device_tokens(int b, int t, int V, std::uint64_t seed) : B(b), T(t) {
    std::mt19937_64 rng(seed);
    // Zipf inputs: hot tokens repeat, as on real text (the wte bucket's sums are the long ones).
    inputs = to_device_raw(zipf_tokens(std::size_t(B) * T, V, rng));
    targets = to_device_raw(random_tokens(std::size_t(B) * T, V, rng));
  }
  tk::batch_view<tk::device_memory> view() const { return {inputs.data(), targets.data(), B, T}; }
};

template <class Reducer>
struct forward_to {
  Reducer* reducer;
  static void ready(void* self, std::size_t bucket) {
    static_cast<forward_to*>(self)->reducer->bucket_ready(bucket);
  }
};

/// Two micro-steps of d2 through the step protocol; with a reducer, every published bucket goes
/// to it and finish() orders the compute stream after the reductions.
template <class Reducer>
fvec gradients_of_a_step(Reducer* reducer) {
  const auto cfg = tk::model::gpt2_config::preset("d2");
  const device_tokens a(2, 64, cfg.vocab_size, 31), b(2, 64, cfg.vocab_size, 32);
  tk::model::gpt2_cuda model(cfg, 9);  // deterministic mode (the default): same bits each time
  tk::cuda::execution_context ctx;
  forward_to<Reducer> hook{reducer};
  if (reducer != nullptr) reducer->attach(model, ctx);
  tk::micro_step micro{0.5f, 0, 2, {}};
  if (reducer != nullptr) micro.on_bucket = {&hook, &forward_to<Reducer>::ready};
  model.zero_grad(ctx);
  model.forward_backward(a.view(), micro, ctx);
  micro.index = 1;
  model.forward_backward(b.view(), micro, ctx);
  if (reducer != nullptr) reducer->finish();
  ctx.synchronize();
  fvec grads(model.num_parameters());
  model.gradients_to_host(grads);
  return grads;
}

template <class Reducer>
void expect_twice_the_gradients() {
  const fvec plain = gradients_of_a_step<Reducer>(nullptr);
  const auto comm = tk::comm::nccl_communicator::single();
  Reducer reducer(comm, 2.0f);
  const fvec doubled = gradients_of_a_step(&reducer);
  ASSERT_EQ(doubled.size(), plain.size());
  std::size_t nonzero = 0, wrong = 0, first_wrong = 0;
  for (std::size_t i = 0; i < plain.size(); ++i) {
    nonzero += plain[i] != 0.0f;
    if (doubled[i] != 2.0f * plain[i] && wrong++ == 0) first_wrong = i;
  }
  EXPECT_GT(nonzero, plain.size() / 2) << "the test needs gradients that are not zero";
  EXPECT_EQ(wrong, 0u) << "first at " << first_wrong << ": " << doubled[first_wrong] << " vs 2 x "
                       << plain[first_wrong];
}

TEST(NcclPreMulSum, AllReduceDoublesEveryBucketAfterBackwardWroteIt) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  expect_twice_the_gradients<tk::reduce::nccl_allreduce>();
}

TEST(NcclPreMulSum, Zero1ReduceDoublesEveryBucketAfterBackwardWroteIt) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  expect_twice_the_gradients<tk::reduce::nccl_zero1>();  // one rank owns the whole buffer
}

// Runs without a device: the factor is checked before any NCCL call.
TEST(NcclPreMulSum, AFactorThatIsNotAFiniteNonZeroBf16IsRefused) {
  EXPECT_THROW(tk::comm::nccl_sum_op(0.0f, "nccl_allreduce"), tk::config_error);
  EXPECT_THROW(tk::comm::nccl_sum_op(1e-45f, "nccl_allreduce"), tk::config_error);   // bf16 0
  EXPECT_THROW(tk::comm::nccl_sum_op(3.4e38f, "nccl_allreduce"), tk::config_error);  // bf16 inf
  try {
    tk::comm::nccl_sum_op op(std::numeric_limits<float>::quiet_NaN(), "nccl_zero1");
    ADD_FAILURE() << "NaN accepted";
  } catch (const tk::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("nccl_zero1.premultiply"), std::string::npos) << e.what();
  }
  const tk::comm::nccl_sum_op plain;
  EXPECT_EQ(plain.get(), ncclSum) << "a factor of 1 is the plain sum, nothing created";
  EXPECT_EQ(plain.factor(), 1.0f);
}

}  // namespace
