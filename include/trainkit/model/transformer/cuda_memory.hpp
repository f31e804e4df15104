// trainkit/model/transformer/cuda_memory.hpp — the vocabulary every CUDA transformer's memory
// plan shares: the attention engines, arena slots and how they are carved, and the memory report.
//
// Host-only arithmetic (no CUDA headers), so a plan can be checked without a GPU and a program can
// tell before allocating whether a (model, B, T) choice fits. Parameters and gradients (bf16, one
// flat buffer each) do not depend on the batch; everything else — activations kept for backward
// and scratch reused layer after layer — lives in one arena carved out of a single cudaMalloc,
// each buffer aligned to 256 bytes (cudaMalloc's own alignment, what cuBLASLt's heuristic assumes
// by default and more than the 16 bytes the vectorised kernels need). Each family lays out its own
// arena (gpt2/cuda_memory.hpp, llama/cuda_memory.hpp) with these pieces.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace trainkit::model {

/// How a CUDA model computes attention (docs/cuda.md): `naive` materialises the T×T scores
/// (attention.cuh; GPT-2 only: no grouped queries), `flash` runs trainkit's own tiled kernels
/// (flash_attention.cuh, head sizes 64 and 128), `cudnn` cuDNN's fused attention
/// (cudnn_attention.hpp compiled into the program; needs trainkit::cudnn). flash and cudnn keep
/// only the log-sum-exp per row: no T×T buffer in the arena.
enum class cuda_attention { naive, flash, cudnn };
/// The choice's name from before a second family shared it; existing code (the Llama options
/// included) still spells it so.
using gpt2_attention = cuda_attention;

/// One buffer of the arena: byte offset and size.
struct arena_slot {
  std::size_t offset = 0;
  std::size_t bytes = 0;
};

/// Carves slots one after the other, each starting on an `alignment` boundary.
class arena_builder {
 public:
  static constexpr std::size_t alignment = 256;

  void take(arena_slot& s, std::size_t bytes) noexcept {
    s.offset = at_;
    s.bytes = bytes;
    at_ += (bytes + alignment - 1) / alignment * alignment;
  }
  /// Bytes carved so far (a multiple of the alignment).
  std::size_t size() const noexcept { return at_; }

 private:
  std::size_t at_ = 0;
};

/// Device memory of a CUDA training run, by use.
struct cuda_memory_report {
  std::size_t parameters = 0;   // bf16 weights
  std::size_t gradients = 0;    // bf16 gradients
  std::size_t optimizer = 0;    // adamw_cuda: fp32 master weights and both moments (12 B/param)
  std::size_t activations = 0;  // kept from forward for backward
  std::size_t workspace = 0;    // arena scratch (backward's temporaries, cuDNN's attention
                                // workspace) + the cuBLASLt workspace

  std::size_t total() const noexcept {
    return parameters + gradients + optimizer + activations + workspace;
  }

  /// "parameters 237.4 MiB, gradients 237.4 MiB, optimizer …, activations …, workspace …,
  /// total …".
  std::string to_string() const {
    auto mib = [](std::size_t b) {
      const double m = double(b) / double(1 << 20);
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.1f MiB", m);
      return std::string(buf);
    };
    return "parameters " + mib(parameters) + ", gradients " + mib(gradients) + ", optimizer " +
           mib(optimizer) + ", activations " + mib(activations) + ", workspace " + mib(workspace) +
           ", total " + mib(total());
  }
};

/// The cuBLASLt workspace every CUDA model's matmul context holds (core/linalg/gemm_cublaslt.cuh
/// static_asserts it).
inline constexpr std::size_t cuda_cublas_workspace_bytes = std::size_t(32) << 20;

/// The report for `num_parameters` bf16 parameters trained with adamw_cuda and an arena of
/// `activation_bytes` kept and `scratch_bytes` reused.
inline cuda_memory_report cuda_training_memory(std::size_t num_parameters,
                                               std::size_t activation_bytes,
                                               std::size_t scratch_bytes) {
  cuda_memory_report r;
  r.parameters = num_parameters * 2;
  r.gradients = r.parameters;
  r.optimizer = num_parameters * 3 * 4;  // master, m, v in fp32
  r.activations = activation_bytes;
  r.workspace = scratch_bytes + cuda_cublas_workspace_bytes;
  return r;
}

}  // namespace trainkit::model
