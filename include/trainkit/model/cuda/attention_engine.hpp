// trainkit/model/cuda/attention_engine.hpp — the seam between gpt2_cuda and an attention
// implementation that lives in another translation unit (today: cuDNN's fused attention).
//
// cudnn-frontend's headers take minutes to compile under nvcc and most of a minute under g++, so
// gpt2_cuda does not include them: it holds an attention_engine and asks a registry for the
// factory. model/cuda/cudnn_attention.hpp implements the engine and registers it when it is
// compiled into a program: include it in one .cpp (g++; it has no kernels) and link
// trainkit::cudnn. A gpt2_cuda asked for attention=cudnn in a program without it throws a
// config_error at construction that says so.
//
// Host-only; compiles under g++ and nvcc.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

namespace trainkit::model::kernels {

/// Causal scaled-dot-product attention with the contract of flash_attention.cuh: q, k, v read in
/// place from the QKV GEMM's (B, T, 3C) rows, out (B, T, C), softmax statistics lse (B, H, T) fp32
/// natural log, dqkv (B, T, 3C) assigned, scale 1/√(C/H). Work is enqueued on `stream`; nothing
/// synchronises with the host. Not thread-safe: one engine per model.
class attention_engine {
 public:
  attention_engine() = default;
  attention_engine(const attention_engine&) = delete;
  attention_engine& operator=(const attention_engine&) = delete;
  virtual ~attention_engine() = default;

  virtual void forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, int B, int T,
                       int C, int H, cudaStream_t stream) = 0;
  virtual void backward(__nv_bfloat16* dqkv, const __nv_bfloat16* dout, const __nv_bfloat16* qkv,
                        const __nv_bfloat16* out, const float* lse, int B, int T, int C, int H,
                        cudaStream_t stream) = 0;
  /// The device workspace the engine's work runs in, or nullptr. When it moves (a new shape needed
  /// more), a CUDA graph that captured the old address must be captured again.
  virtual const void* workspace() const noexcept = 0;
  /// Execution plans built so far (one per shape and pass for cuDNN).
  virtual std::size_t cached_graphs() const noexcept = 0;
};

/// deterministic: the backward must give the same bits run to run.
using attention_engine_factory = std::unique_ptr<attention_engine> (*)(bool deterministic);

/// The cuDNN engine's factory, null until a translation unit of the program that includes
/// model/cuda/cudnn_attention.hpp has been initialised (its registration is a static initialiser).
/// One object per program: an inline function's static has vague linkage in every unit.
inline attention_engine_factory& cudnn_attention_factory() noexcept {
  static attention_engine_factory factory = nullptr;
  return factory;
}

}  // namespace trainkit::model::kernels
