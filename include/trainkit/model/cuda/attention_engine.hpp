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
/// place from the QKV GEMM's (B, T, (H + 2·KV)·hs) rows (q heads, then k heads, then v heads;
/// query head h reads k, v head h / (H / KV): grouped-query attention, GPT-2 is KV = H and 3C a
/// row), out (B, T, C) with C = H·hs, softmax statistics lse (B, H, T) fp32 natural log, dqkv
/// (same layout as qkv) assigned with dk, dv summed over each group, scale 1/√hs. `window` > 0:
/// sliding-window causal attention, query i sees keys i − window < j ≤ i (0, or T and more: full
/// causal), the backward taking the forward's window. Work is enqueued on `stream`; nothing
/// synchronises with the host. Not thread-safe: one engine per model.
class attention_engine {
 public:
  attention_engine() = default;
  attention_engine(const attention_engine&) = delete;
  attention_engine& operator=(const attention_engine&) = delete;
  virtual ~attention_engine() = default;

  virtual void forward(__nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, int B, int T,
                       int C, int H, int KV, cudaStream_t stream, int window = 0) = 0;
  virtual void backward(__nv_bfloat16* dqkv, const __nv_bfloat16* dout, const __nv_bfloat16* qkv,
                        const __nv_bfloat16* out, const float* lse, int B, int T, int C, int H,
                        int KV, cudaStream_t stream, int window = 0) = 0;
  /// Builds (and caches) the forward and backward plans of (B, T, C, H, KV) and returns the device
  /// workspace the larger needs, so the caller can plan it in its own memory (gpt2_cuda's arena).
  /// Full causal plans: a windowed plan needing more runs in the engine's own buffer.
  virtual std::size_t plan_workspace(int B, int T, int C, int H, int KV) = 0;
  /// Runs every plan whose workspace fits in `bytes` at `p` (caller-owned device memory that
  /// outlives the runs, or nullptr); a plan needing more runs in the engine's own buffer.
  virtual void use_workspace(void* p, std::size_t bytes) noexcept = 0;
  /// The engine's own device workspace, or nullptr. When it moves (a shape needed more than the
  /// caller's and the own buffer held), a CUDA graph that captured the old address must be
  /// captured again.
  virtual const void* workspace() const noexcept = 0;
  /// Bytes of the engine's own workspace (0 while every plan fits the caller's).
  virtual std::size_t own_workspace_bytes() const noexcept = 0;
  /// Execution plans built so far (one per shape and pass for cuDNN).
  virtual std::size_t cached_graphs() const noexcept = 0;
};

/// deterministic: the backward must give the same bits run to run (cuDNN: its deterministic
/// algorithm, which on sm90 keeps dP in a B·H·T·T·2-byte workspace; otherwise the fast one, whose
/// dQ atomics add in no fixed order).
using attention_engine_factory = std::unique_ptr<attention_engine> (*)(bool deterministic);

/// The cuDNN engine's factory, null until a translation unit of the program that includes
/// model/cuda/cudnn_attention.hpp has been initialised (its registration is a static initialiser).
/// One object per program: an inline function's static has vague linkage in every unit.
inline attention_engine_factory& cudnn_attention_factory() noexcept {
  static attention_engine_factory factory = nullptr;
  return factory;
}

}  // namespace trainkit::model::kernels
