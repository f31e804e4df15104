// tests/cuda/link/unit_a.cu — one of test_cuda_link's two CUDA translation units; both include
// gpt2/cuda.hpp, llama/cuda.hpp and adamw_cuda.hpp and instantiate every kernel, which a header
// with external-linkage kernels cannot survive (multiple definitions at link time).
#include <cstdint>
#include <vector>

#include "link_unit.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/device.hpp"
#include "trainkit/model/gpt2/cuda.hpp"
#include "trainkit/model/llama/cuda.hpp"
#include "trainkit/model/llama/cuda_kernels.cuh"
#include "trainkit/optim/adamw_cuda.hpp"

namespace link_test {

const void* llama_kernels_a() {
  namespace k = trainkit::model::kernels;
  static const void* launchers[] = {reinterpret_cast<const void*>(&k::rmsnorm_forward),
                                    reinterpret_cast<const void*>(&k::rmsnorm_backward),
                                    reinterpret_cast<const void*>(&k::head_rmsnorm_forward),
                                    reinterpret_cast<const void*>(&k::head_rmsnorm_backward),
                                    reinterpret_cast<const void*>(&k::rope_forward),
                                    reinterpret_cast<const void*>(&k::rope_backward),
                                    reinterpret_cast<const void*>(&k::swiglu_forward),
                                    reinterpret_cast<const void*>(&k::swiglu_backward),
                                    reinterpret_cast<const void*>(&k::relu_squared_forward),
                                    reinterpret_cast<const void*>(&k::relu_squared_backward)};
  return launchers[0];
}

float train_step_a() {
  if (trainkit::cuda::device_count() == 0) return -1.0f;
  const trainkit::model::gpt2_config cfg = trainkit::model::gpt2_config::preset("d2");
  trainkit::model::gpt2_cuda model(cfg, /*seed=*/7);
  trainkit::optim::adamw_cuda opt(model, trainkit::optim::adamw_config{});
  constexpr int B = 2, T = 16;
  std::vector<std::int32_t> host(B * T);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = std::int32_t((i * 131 + 7) % 50257);
  trainkit::cuda::device_buffer<std::int32_t> tokens(host.size());
  trainkit::cuda::copy_to_device(tokens.data(), std::span<const std::int32_t>(host),
                                 model.stream());
  trainkit::batch_view<trainkit::device_memory> batch{tokens.data(), tokens.data(), B, T};
  const float loss = model.forward_backward(batch, 1.0f);
  trainkit::optim::clip_then_update<trainkit::device_memory>(1.0)(opt, model, 1e-3f);
  return loss;
}

float llama_step_a() {
  if (trainkit::cuda::device_count() == 0) return -1.0f;
  const trainkit::model::llama_config cfg = trainkit::model::llama_config::preset("d2");
  trainkit::model::llama_cuda model(cfg, /*seed=*/7);  // flash attention, GQA
  constexpr int B = 2, T = 16;
  std::vector<std::int32_t> host(B * T);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = std::int32_t((i * 131 + 7) % 50257);
  trainkit::cuda::device_buffer<std::int32_t> tokens(host.size());
  trainkit::cuda::copy_to_device(tokens.data(), std::span<const std::int32_t>(host),
                                 model.stream());
  trainkit::batch_view<trainkit::device_memory> batch{tokens.data(), tokens.data(), B, T};
  return model.forward_backward(batch, 1.0f);  // the loss comes from the forward: no atomics
}

}  // namespace link_test
