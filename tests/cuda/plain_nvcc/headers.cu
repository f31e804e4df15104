// tests/cuda/plain_nvcc/headers.cu — the CUDA headers compiled the way a header-only user compiles
// by hand: `nvcc -std=c++20 -arch=sm_90a -I include`, without the flags the trainkit::cuda CMake
// target adds (--expt-relaxed-constexpr, --extended-lambda). A kernel that calls a constexpr host
// function (flash attention's tile arithmetic did) fails here. Compiling is the test (ctest
// cuda_plain_nvcc_headers); the launchers' addresses are taken so their kernels are instantiated.
#include <trainkit/checkpoint/cuda_stager.hpp>
#include <trainkit/checkpoint/host_staged_checkpointer.hpp>
#include <trainkit/core/linalg/gemm_cublaslt.cuh>
#include <trainkit/model/cuda/recipe.cuh>
#include <trainkit/model/gpt2/cuda.hpp>
#include <trainkit/model/llama/cuda.hpp>
#include <trainkit/model/llama/cuda_kernels.cuh>
#include <trainkit/optim/adamw_cuda.hpp>
#include <trainkit/prefetch/pinned_prefetcher.hpp>

int main() {
  namespace k = trainkit::model::kernels;
  void* launchers[] = {reinterpret_cast<void*>(&k::flash_attention_forward),
                       reinterpret_cast<void*>(&k::flash_attention_backward),
                       reinterpret_cast<void*>(&k::encoder_backward_buckets),
                       reinterpret_cast<void*>(&k::rmsnorm_forward),
                       reinterpret_cast<void*>(&k::rmsnorm_backward),
                       reinterpret_cast<void*>(&k::head_rmsnorm_forward),
                       reinterpret_cast<void*>(&k::head_rmsnorm_backward),
                       reinterpret_cast<void*>(&k::rope_forward),
                       reinterpret_cast<void*>(&k::swiglu_forward),
                       reinterpret_cast<void*>(&k::swiglu_backward),
                       reinterpret_cast<void*>(&k::relu_squared_backward),
                       reinterpret_cast<void*>(&k::value_mix_forward),
                       reinterpret_cast<void*>(&k::value_mix_backward),
                       reinterpret_cast<void*>(&k::skip_add_forward),
                       reinterpret_cast<void*>(&k::skip_add_backward)};
  return launchers[0] == nullptr ? 1 : 0;
}
