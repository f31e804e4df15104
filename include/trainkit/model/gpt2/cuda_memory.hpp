// trainkit/model/gpt2/cuda_memory.hpp — how much device memory the CUDA GPT-2 needs, and
// where each buffer sits in its activation arena.
//
// Host-only arithmetic (no CUDA headers), so it can be checked without a GPU and a program can
// tell before allocating whether a (model, B, T, recompute) choice fits. Parameters and gradients
// (bf16, one flat buffer each) do not depend on the batch; everything else — activations kept for
// backward and scratch reused layer after layer — lives in one arena carved out of a single
// cudaMalloc, each buffer aligned to 256 bytes (cudaMalloc's own alignment, what cuBLASLt's
// heuristic assumes by default and more than the 16 bytes the vectorised kernels need): the
// pieces every family shares are transformer/cuda_memory.hpp's. The attention matrices (naive
// attention only) have rows padded to a multiple of 8 (attention.cuh's attention_ld).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/model/cuda/layernorm_chunks.hpp"
#include "trainkit/model/gpt2/config.hpp"
#include "trainkit/model/transformer/cuda_memory.hpp"

namespace trainkit::model {

/// Run-time choices of the CUDA GPT-2.
struct gpt2_cuda_options {
  /// Activation recomputation, as llm.c's -r: 0 keeps everything; 1 recomputes the GELU output
  /// in backward (keeps only its input); 2 also recomputes the LayerNorm outputs (keeps the
  /// residual stream and the per-row mean and rstd).
  int recompute = 0;
  /// No atomics whose order varies and no autotuned GEMM algorithm, so two runs from one state
  /// give bit-identical losses and gradients (flash attention, whose dq atomics vary, is refused).
  bool deterministic = true;
  /// The wte gradient with bf16x2 atomics instead of the fp32 token buckets (built on the device
  /// in either mode, model/cuda/token_buckets.cuh). Off by default in every mode: each atomic add
  /// rounds to bf16, so a token seen n times in a micro-batch collects ~n roundings — on real
  /// text (",", "the" 1,000–3,000 times per micro-batch) its gradient ends 3–6% off, against one
  /// rounding (2⁻⁹) for the buckets (detail/token_buckets.hpp; test_model_token_buckets).
  /// Refused in deterministic mode (the atomics' order varies).
  bool embedding_atomics = false;
  /// Arena shape to reserve up front; 0 = sized by the first batch. A later batch with B and T no
  /// larger reuses the arena; a larger one grows it.
  int batch_size = 0;
  int seq_len = 0;
  gpt2_attention attention = gpt2_attention::naive;
  /// Time cuBLASLt's top algorithms on each GEMM shape's first call and keep the fastest
  /// (core/linalg/gemm_cublaslt.cuh). Not in deterministic mode: the fastest can differ from run to
  /// run, and with the algorithm the rounding; there the heuristic's first choice is kept.
  bool gemm_autotune = true;
  /// Replay each micro-step as a captured CUDA graph (model/cuda/cuda_graph.hpp): one launch
  /// instead of ~25 per layer. The first micro-step of each (B, T) runs eagerly (it sizes every
  /// library's workspace and picks the GEMM algorithms), the next one captures; a graph is
  /// re-captured when grad_scale or the arena changes. Same kernels, same bits (docs/cuda.md).
  bool cuda_graph = false;

  friend bool operator==(const gpt2_cuda_options&, const gpt2_cuda_options&) = default;
};

/// The activation arena for one (B, T): every slot the model uses, and the totals.
struct gpt2_cuda_arena_plan {
  static constexpr std::size_t alignment = arena_builder::alignment;

  // Kept for backward (activations).
  // naive attention keeps q, k, v permuted in qkvr and P in att; flash and cudnn keep the QKV
  // GEMM's output itself in qkvr, the log-sum-exp in lse, and att is empty.
  arena_slot encoded, ln1, ln1_mean, ln1_rstd, qkvr, att, lse, atty, res2, ln2, ln2_mean, ln2_rstd,
      fch, fch_gelu, res3, lnf, lnf_mean, lnf_rstd, logits, losses;
  // Reused layer after layer (scratch). scores, dscores, heads, dqkvr: naive attention only;
  // att_delta, dq_accum: flash only; attention_workspace: cuDNN's (the bytes its plans need).
  arena_slot qkv, proj, scores, dscores, heads, dqkvr, att_delta, dq_accum, dres, dln, datty, dfch,
      ln_partial, bias_grad, buckets, attention_workspace;

  std::size_t activation_bytes = 0;
  std::size_t scratch_bytes = 0;
  std::size_t total_bytes = 0;  // activation_bytes + scratch_bytes (+ alignment padding)
};

/// The workspace cuDNN's attention plans need at (B, T), as cudnn-frontend 1.x plans them on sm90
/// — an estimate for planning without a device (gpt2_cuda asks cuDNN for the real figure): the
/// deterministic backward keeps dP, B·H·T·T bf16 values (~805 MB at d12 B=32 T=1024); the fast
/// one a dQ accumulator and row statistics in fp32, B·T·C·4 + B·H·T·4 bytes.
inline std::size_t cudnn_attention_workspace_estimate(const gpt2_config& cfg, int B, int T,
                                                      bool deterministic) {
  const std::size_t b = std::size_t(B), t = std::size_t(T), h = std::size_t(cfg.num_heads);
  if (deterministic) return b * h * t * t * 2;
  return b * t * std::size_t(cfg.channels) * 4 + b * h * t * 4;
}

/// Lays out the arena for batches of B rows of T tokens; `attention_workspace_bytes` is the
/// attention engine's workspace (cuDNN's; 0 for naive and flash), planned as scratch.
inline gpt2_cuda_arena_plan plan_gpt2_cuda_arena(const gpt2_config& cfg, int B, int T,
                                                 int recompute,
                                                 gpt2_attention attention = gpt2_attention::naive,
                                                 std::size_t attention_workspace_bytes = 0) {
  cfg.validate();
  if (B <= 0 || T <= 0 || T > cfg.max_seq_len)
    throw config_error("gpt2_cuda: batch shape B=" + std::to_string(B) + " T=" + std::to_string(T) +
                       " is empty or exceeds max_seq_len " + std::to_string(cfg.max_seq_len));
  if (recompute < 0 || recompute > 2)
    throw config_error("gpt2_cuda: recompute must be 0, 1 or 2, got " + std::to_string(recompute));
  const std::size_t L = std::size_t(cfg.num_layers), C = std::size_t(cfg.channels),
                    H = std::size_t(cfg.num_heads), N = std::size_t(B) * std::size_t(T),
                    Vp = std::size_t(cfg.padded_vocab_size);
  const std::size_t ld = (std::size_t(T) + 7) / 8 * 8;  // attention_ld
  const bool naive = attention == gpt2_attention::naive, flash = attention == gpt2_attention::flash;
  const std::size_t att = naive ? std::size_t(B) * H * std::size_t(T) * ld : 0;
  const std::size_t rows = naive ? 0 : std::size_t(B) * H * std::size_t(T);  // lse per head row
  const std::size_t bf = 2, f32 = 4;
  const std::size_t ln_layers = recompute >= 2 ? 1 : L, gelu_layers = recompute >= 1 ? 1 : L;

  gpt2_cuda_arena_plan p;
  arena_builder arena;
  auto take = [&](arena_slot& s, std::size_t bytes) { arena.take(s, bytes); };
  take(p.encoded, N * C * bf);
  take(p.ln1, ln_layers * N * C * bf);
  take(p.ln1_mean, L * N * f32);
  take(p.ln1_rstd, L * N * f32);
  take(p.qkvr, L * 3 * N * C * bf);
  take(p.att, L * att * bf);
  take(p.lse, L * rows * f32);
  take(p.atty, L * N * C * bf);
  take(p.res2, L * N * C * bf);
  take(p.ln2, ln_layers * N * C * bf);
  take(p.ln2_mean, L * N * f32);
  take(p.ln2_rstd, L * N * f32);
  take(p.fch, L * N * 4 * C * bf);
  take(p.fch_gelu, gelu_layers * N * 4 * C * bf);
  take(p.res3, L * N * C * bf);
  take(p.lnf, N * C * bf);
  take(p.lnf_mean, N * f32);
  take(p.lnf_rstd, N * f32);
  take(p.logits, N * Vp * bf);
  take(p.losses, (N + 4) * f32);  // + 4: once the bad-token flags (now their own buffer)
  p.activation_bytes = arena.size();
  take(p.qkv, N * 3 * C * bf);
  take(p.proj, N * C * bf);
  take(p.scores, att * f32);
  take(p.dscores, att * bf);
  take(p.heads, naive ? N * C * bf : 0);
  take(p.dqkvr, naive ? 3 * N * C * bf : 0);
  take(p.att_delta, flash ? rows * f32 : 0);
  take(p.dq_accum, flash ? N * C * f32 : 0);
  take(p.dres, N * C * bf);
  take(p.dln, N * C * bf);
  take(p.datty, N * C * bf);
  take(p.dfch, N * 4 * C * bf);
  take(p.ln_partial, kernels::layernorm_partial_floats(N, int(C)) * f32);
  take(p.bias_grad, 4 * C * bf);
  take(p.buckets, (3 * N + 2) * 4);  // token_buckets::packed(): 1 + U + (U + 1) + N, U ≤ N
  take(p.attention_workspace, attention_workspace_bytes);
  p.total_bytes = arena.size();
  p.scratch_bytes = p.total_bytes - p.activation_bytes;
  return p;
}

/// GPT-2's names for the shared report and workspace size (transformer/cuda_memory.hpp).
using gpt2_cuda_memory_report = cuda_memory_report;
inline constexpr std::size_t gpt2_cuda_cublas_workspace_bytes = cuda_cublas_workspace_bytes;

/// What a CUDA GPT-2 of shape `cfg` trained with adamw_cuda uses for batches of (B, T), with
/// `attention_workspace_bytes` of attention workspace (cuDNN: the model's figure, or
/// cudnn_attention_workspace_estimate without a device).
inline gpt2_cuda_memory_report gpt2_cuda_memory(const gpt2_config& cfg, int B, int T, int recompute,
                                                gpt2_attention attention = gpt2_attention::naive,
                                                std::size_t attention_workspace_bytes = 0) {
  const gpt2_cuda_arena_plan p =
      plan_gpt2_cuda_arena(cfg, B, T, recompute, attention, attention_workspace_bytes);
  return cuda_training_memory(cfg.num_parameters(), p.activation_bytes, p.scratch_bytes);
}

}  // namespace trainkit::model
