// trainkit/model/llama/cuda_memory.hpp — where each buffer of the CUDA Llama model
// (llama/cuda.hpp) sits in its activation arena, and how much device memory a run needs.
//
// Host-only arithmetic (no CUDA headers), checked without a GPU (test_model_llama_cuda_memory), as
// gpt2/cuda_memory.hpp is for GPT-2; the arena slots, their alignment and the memory report are
// every family's (transformer/cuda_memory.hpp).
// Kept for backward, per layer, what llama_cpu keeps except the attention probabilities: the
// RMSNorm outputs and their rstd, the QKV GEMM's output after QK-norm and RoPE (attention reads it
// in place and its backward needs nothing else), the QK-norm rstd, the attention output and its
// log-sum-exp, the residual stream, the MLP's input projection and its activation. Attention is
// flash or cuDNN: no T×T matrix anywhere. Scratch is reused layer after layer. The speedrun
// recipe (llama_config::recipe) adds, when on: the unmixed values of each value-embedding layer
// (for dλ₀) and the U-net decoder blocks' inputs after their skip add (kept); the λ₁-scaled value
// gradient, the scalar gradients' partials and one skip gradient per encoder source (scratch).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>

#include "trainkit/core/error.hpp"
#include "trainkit/model/detail/recipe_cuda_twins.hpp"
#include "trainkit/model/llama/config.hpp"
#include "trainkit/model/transformer/cuda_memory.hpp"

namespace trainkit::model {

/// The activation arena of llama_cuda for one (B, T). N = B·T, D = (H + 2·KV)·hs, R = fc rows
/// (2F SwiGLU, F ReLU²).
struct llama_cuda_arena_plan {
  static constexpr std::size_t alignment = arena_builder::alignment;

  // Kept for backward (activations).
  arena_slot encoded,  // (N, C) token embeddings
      ln1, ln1_rstd,   // (L, N, C), (L, N) fp32
      qkvr,            // (L, N, D): q | k | v after QK-norm and RoPE
      qk_rstd,         // (L, N, H + KV) fp32, QK-norm only
      atty, lse,       // (L, N, C), (L, B, H, T) fp32
      res2,            // (L, N, C) residual after attention
      ln2, ln2_rstd,   // (L, N, C), (L, N) fp32
      fc, fc_act,      // (L, N, R), (L, N, F)
      res3,            // (L, N, C) residual after the MLP
      lnf, lnf_rstd,   // (N, C), (N) fp32
      logits,          // (N, Vp), dlogits in place
      losses,          // (N + 4) fp32: the losses (the 4 after them unused: llama_cuda keeps its
                       // bad-token flags in their own buffer, which a growing arena cannot lose)
      ve_saved,        // recipe: (2k, N, KV·hs) the values before the value-embedding mix
      unet_in;         // recipe: (L/2, N, C) decoder block inputs after the U-net skip add
  // Scratch.
  arena_slot proj,          // (N, C) projection outputs before the fused residual add
      dres, dln, datty,     // (N, C) each
      dqkv,                 // (N, D)
      dfc, dfc_act,         // (N, R), (N, F)
      norm_partial,         // rmsnorm_partial_floats(N, C) fp32
      att_delta, dq_accum,  // flash: (B, H, T), (N, C) fp32
      buckets,              // token_buckets::packed(): 3N + 2 int32
      attention_workspace,  // cuDNN's plans' workspace
      ve_scaled,        // recipe: (N, KV·hs) λ₁·dv, summed per token into the table's gradient
      recipe_partials,  // recipe: the value mix's and skip add's fp32 block partials
      unet_dskip;       // recipe: (L/2, N, C) the skip sources' gradients

  std::size_t activation_bytes = 0;
  std::size_t scratch_bytes = 0;
  std::size_t total_bytes = 0;
};

/// fp32 scratch of rmsnorm_backward for N rows of width C: one C-vector per 32-row chunk
/// (model/cuda/rmsnorm.cuh's rmsnorm_partial_floats, restated here for the host, where no CUDA
/// header is included; tests/cuda/test_llama_kernels.cu checks that they agree).
inline std::size_t llama_rmsnorm_partial_floats(std::size_t N, int C) {
  return (N + 31) / 32 * std::size_t(C);
}

/// Lays out the arena for batches of B rows of T tokens. `flash`: the flash engine's scratch
/// (delta, dQ accumulator); `attention_workspace_bytes`: cuDNN's plans' workspace (0 for flash).
inline llama_cuda_arena_plan plan_llama_cuda_arena(const llama_config& cfg, int B, int T,
                                                   bool flash,
                                                   std::size_t attention_workspace_bytes = 0) {
  cfg.validate();
  if (B <= 0 || T <= 0 || T > cfg.max_seq_len)
    throw config_error("llama_cuda: batch shape B=" + std::to_string(B) +
                       " T=" + std::to_string(T) + " is empty or exceeds max_seq_len " +
                       std::to_string(cfg.max_seq_len));
  const std::size_t L = std::size_t(cfg.num_layers), C = std::size_t(cfg.channels),
                    H = std::size_t(cfg.num_heads), KV = std::size_t(cfg.num_kv_heads),
                    N = std::size_t(B) * std::size_t(T), D = std::size_t(cfg.qkv_rows()),
                    R = std::size_t(cfg.fc_rows()), F = std::size_t(cfg.hidden_size),
                    Vp = std::size_t(cfg.padded_vocab_size);
  const std::size_t rows = std::size_t(B) * H * std::size_t(T);  // one lse per query head row
  const std::size_t bf = 2, f32 = 4;

  llama_cuda_arena_plan p;
  arena_builder arena;
  auto take = [&](arena_slot& s, std::size_t bytes) { arena.take(s, bytes); };
  take(p.encoded, N * C * bf);
  take(p.ln1, L * N * C * bf);
  take(p.ln1_rstd, L * N * f32);
  take(p.qkvr, L * N * D * bf);
  take(p.qk_rstd, cfg.qk_norm ? L * N * (H + KV) * f32 : 0);
  take(p.atty, L * N * C * bf);
  take(p.lse, L * rows * f32);
  take(p.res2, L * N * C * bf);
  take(p.ln2, L * N * C * bf);
  take(p.ln2_rstd, L * N * f32);
  take(p.fc, L * N * R * bf);
  take(p.fc_act, L * N * F * bf);
  take(p.res3, L * N * C * bf);
  take(p.lnf, N * C * bf);
  take(p.lnf_rstd, N * f32);
  take(p.logits, N * Vp * bf);
  take(p.losses, (N + 4) * f32);
  const std::size_t W = std::size_t(cfg.value_width()),
                    ve = std::size_t(cfg.value_embedding_layers()),
                    skips = std::size_t(cfg.unet_weights());
  take(p.ve_saved, ve * N * W * bf);
  take(p.unet_in, skips * N * C * bf);
  p.activation_bytes = arena.size();
  take(p.proj, N * C * bf);
  take(p.dres, N * C * bf);
  take(p.dln, N * C * bf);
  take(p.datty, N * C * bf);
  take(p.dqkv, N * D * bf);
  take(p.dfc, N * R * bf);
  take(p.dfc_act, N * F * bf);
  take(p.norm_partial, llama_rmsnorm_partial_floats(N, int(C)) * f32);
  take(p.att_delta, flash ? rows * f32 : 0);
  take(p.dq_accum, flash ? N * C * f32 : 0);
  take(p.buckets, (3 * N + 2) * 4);
  take(p.attention_workspace, attention_workspace_bytes);
  take(p.ve_scaled, ve > 0 ? N * W * bf : 0);
  const std::size_t partials = std::max(ve > 0 ? 2 * detail::recipe_blocks(N * W) : 0,
                                        skips > 0 ? detail::recipe_blocks(N * C) : 0);
  take(p.recipe_partials, partials * f32);
  take(p.unet_dskip, skips * N * C * bf);
  p.total_bytes = arena.size();
  p.scratch_bytes = p.total_bytes - p.activation_bytes;
  return p;
}

/// Layer l's share of the per-layer slots: byte offsets into the arena and sizes, for a batch of
/// (B, T) no larger than the plan's (the slots are laid out for the plan's shape; a smaller batch
/// uses the front of each layer's stride). QK-norm's rstd is empty without QK-norm.
struct llama_cuda_layer_slots {
  arena_slot ln1, ln1_rstd, qkvr, qk_rstd, atty, lse, res2, ln2, ln2_rstd, fc, fc_act, res3;
};

inline llama_cuda_layer_slots llama_cuda_layer(const llama_cuda_arena_plan& p,
                                               const llama_config& cfg, int B, int T, int l) {
  const std::size_t L = std::size_t(l), C = std::size_t(cfg.channels),
                    N = std::size_t(B) * std::size_t(T), D = std::size_t(cfg.qkv_rows()),
                    R = std::size_t(cfg.fc_rows()), F = std::size_t(cfg.hidden_size),
                    QK = std::size_t(cfg.num_heads + cfg.num_kv_heads),
                    rows = std::size_t(B) * std::size_t(cfg.num_heads) * std::size_t(T);
  auto part = [&](const arena_slot& s, std::size_t elements, std::size_t element_bytes) {
    return arena_slot{s.offset + L * elements * element_bytes, elements * element_bytes};
  };
  llama_cuda_layer_slots v;
  v.ln1 = part(p.ln1, N * C, 2);
  v.ln1_rstd = part(p.ln1_rstd, N, 4);
  v.qkvr = part(p.qkvr, N * D, 2);
  v.qk_rstd = cfg.qk_norm ? part(p.qk_rstd, N * QK, 4) : arena_slot{p.qk_rstd.offset, 0};
  v.atty = part(p.atty, N * C, 2);
  v.lse = part(p.lse, rows, 4);
  v.res2 = part(p.res2, N * C, 2);
  v.ln2 = part(p.ln2, N * C, 2);
  v.ln2_rstd = part(p.ln2_rstd, N, 4);
  v.fc = part(p.fc, N * R, 2);
  v.fc_act = part(p.fc_act, N * F, 2);
  v.res3 = part(p.res3, N * C, 2);
  return v;
}

/// The recipe's i-th slice (N·width bf16) of a per-index slot (ve_saved by value-embedding pair,
/// unet_in and unet_dskip by U-net weight index), for a batch of N rows.
inline arena_slot llama_cuda_recipe_part(const arena_slot& s, std::size_t N, std::size_t width,
                                         int i) {
  const std::size_t bytes = N * width * 2;
  return arena_slot{s.offset + std::size_t(i) * bytes, bytes};
}

/// What a CUDA Llama of shape `cfg` trained with adamw_cuda uses for batches of (B, T): the same
/// report as GPT-2's (bf16 weights and gradients, 12 B/parameter of optimizer state, the arena,
/// the cuBLASLt workspace).
inline cuda_memory_report llama_cuda_memory(const llama_config& cfg, int B, int T, bool flash,
                                            std::size_t attention_workspace_bytes = 0) {
  const llama_cuda_arena_plan p =
      plan_llama_cuda_arena(cfg, B, T, flash, attention_workspace_bytes);
  return cuda_training_memory(cfg.num_parameters(), p.activation_bytes, p.scratch_bytes);
}

}  // namespace trainkit::model
