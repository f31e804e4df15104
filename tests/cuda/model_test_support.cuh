// tests/cuda/model_test_support.cuh — what the whole-model GPU tests of every family share: a
// token batch held on the host and the device, the bucket-publication log the step protocol
// reports to, and the protocol-against-one-call run (two micro-steps through micro_step and an
// execution context, the same two through forward_backward). Family-neutral: a model is any
// transformer_cuda composition (GPT-2, Llama). Each test keeps its own tolerances.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "gpu_test_support.cuh"
#include "trainkit/core/batch.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/execution_context.hpp"
#include "trainkit/core/step_protocol.hpp"

namespace trainkit::test_gpu {

struct device_batch {
  cuda::device_buffer<std::int32_t> inputs, targets;
  std::vector<std::int32_t> host_inputs, host_targets;
  int B = 0, T = 0;

  /// Uniform inputs, or Zipf-distributed ones (real text's shape: hot tokens repeat hundreds of
  /// times, which is what the wte gradient's summation must survive).
  device_batch(int b, int t, int V, std::uint64_t seed, bool zipf = false) : B(b), T(t) {
    std::mt19937_64 rng(seed);
    host_inputs =
        zipf ? zipf_tokens(std::size_t(B) * T, V, rng) : random_tokens(std::size_t(B) * T, V, rng);
    host_targets = random_tokens(std::size_t(B) * T, V, rng);
    inputs = to_device_raw(host_inputs);
    targets = to_device_raw(host_targets);
  }
  batch_view<device_memory> view() const { return {inputs.data(), targets.data(), B, T}; }
};

/// The buckets a micro-step published, in order.
struct bucket_log {
  std::vector<std::size_t> order;
  static void ready(void* self, std::size_t i) {
    static_cast<bucket_log*>(self)->order.push_back(i);
  }
};

/// What protocol_against_one_call measured.
struct one_call_comparison {
  double mean_loss = 0;                // of the one-call API's two micro-steps
  std::vector<std::size_t> published;  // the protocol's bucket order
  fvec g_ref, g_proto;                 // the two models' gradients
};

/// `ref` takes batches a and b through the one-call forward_backward at scale 0.5; `proto` takes
/// them as two micro-steps of one step through micro_step on an execution context. Checks that no
/// bucket is published before the last micro-step.
template <class Model>
one_call_comparison protocol_against_one_call(Model& ref, Model& proto, const device_batch& a,
                                              const device_batch& b) {
  ref.zero_grad();
  const float la = ref.forward_backward(a.view(), 0.5f);
  const float lb = ref.forward_backward(b.view(), 0.5f);

  cuda::execution_context ctx;
  bucket_log log;
  model::micro_step micro{0.5f, 0, 2, {&log, &bucket_log::ready}};
  proto.zero_grad(ctx);
  proto.forward_backward(a.view(), micro, ctx);
  EXPECT_TRUE(log.order.empty()) << "gradients are not final before the last micro-step";
  micro.index = 1;
  proto.forward_backward(b.view(), micro, ctx);
  ctx.synchronize();

  one_call_comparison r;
  r.mean_loss = (double(la) + double(lb)) / 2;
  r.published = log.order;
  r.g_ref.resize(ref.num_parameters());
  r.g_proto.resize(proto.num_parameters());
  ref.gradients_to_host(r.g_ref);
  proto.gradients_to_host(r.g_proto);
  return r;
}

}  // namespace trainkit::test_gpu
