// tests/model/test_llama_cuda_memory.cpp — the CUDA Llama's arena plan
// (model/llama/cuda_memory.hpp), without a GPU: every slot aligned and disjoint from every
// other, each slot's size against an independent count of what the model writes there (the
// shapes llama/cuda.hpp's layer views and kernels use), the variants' slots appearing only with
// them (QK-norm's rstd, flash's scratch, cuDNN's workspace), and the d12 and d24 training shapes
// fitting an H100 with flash attention.
#include "trainkit/model/llama/cuda_memory.hpp"  // first: compiles on its own

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <tuple>
#include <utility>
#include <vector>

namespace tkm = trainkit::model;

namespace {

std::vector<std::pair<const char*, tkm::arena_slot>> slots(const tkm::llama_cuda_arena_plan& p) {
  return {{"encoded", p.encoded},
          {"ln1", p.ln1},
          {"ln1_rstd", p.ln1_rstd},
          {"qkvr", p.qkvr},
          {"qk_rstd", p.qk_rstd},
          {"atty", p.atty},
          {"lse", p.lse},
          {"res2", p.res2},
          {"ln2", p.ln2},
          {"ln2_rstd", p.ln2_rstd},
          {"fc", p.fc},
          {"fc_act", p.fc_act},
          {"res3", p.res3},
          {"lnf", p.lnf},
          {"lnf_rstd", p.lnf_rstd},
          {"logits", p.logits},
          {"losses", p.losses},
          {"proj", p.proj},
          {"dres", p.dres},
          {"dln", p.dln},
          {"datty", p.datty},
          {"dqkv", p.dqkv},
          {"dfc", p.dfc},
          {"dfc_act", p.dfc_act},
          {"norm_partial", p.norm_partial},
          {"att_delta", p.att_delta},
          {"dq_accum", p.dq_accum},
          {"buckets", p.buckets},
          {"attention_workspace", p.attention_workspace},
          {"ve_saved", p.ve_saved},
          {"unet_in", p.unet_in},
          {"ve_scaled", p.ve_scaled},
          {"recipe_partials", p.recipe_partials},
          {"unet_dskip", p.unet_dskip}};
}

void expect_aligned_and_disjoint(const tkm::llama_cuda_arena_plan& p) {
  auto all = slots(p);
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) {  // an empty slot before a full one at its offset
              return std::pair(a.second.offset, a.second.bytes) <
                     std::pair(b.second.offset, b.second.bytes);
            });
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].second.offset % tkm::llama_cuda_arena_plan::alignment, 0u) << all[i].first;
    EXPECT_LE(all[i].second.offset + all[i].second.bytes, p.total_bytes) << all[i].first;
    if (i + 1 < all.size()) {
      EXPECT_LE(all[i].second.offset + all[i].second.bytes, all[i + 1].second.offset)
          << all[i].first << " overlaps " << all[i + 1].first;
    }
  }
  EXPECT_EQ(p.activation_bytes + p.scratch_bytes, p.total_bytes);
}

TEST(LlamaCudaMemory, SlotsAreAlignedDisjointAndSizedAsTheModelWritesThem) {
  tkm::llama_config c = tkm::llama_config::preset("d2");
  c.qk_norm = true;
  const int B = 3, T = 100;
  const std::size_t N = std::size_t(B) * T, L = 2, C = 128, H = 2, KV = 1, hs = 64,
                    D = (H + 2 * KV) * hs, F = std::size_t(c.hidden_size), R = 2 * F,
                    Vp = std::size_t(c.padded_vocab_size);
  const auto p = tkm::plan_llama_cuda_arena(c, B, T, /*flash=*/true, 1000);
  expect_aligned_and_disjoint(p);
  EXPECT_EQ(p.qkvr.bytes, L * N * D * 2);
  EXPECT_EQ(p.qk_rstd.bytes, L * N * (H + KV) * 4);
  EXPECT_EQ(p.lse.bytes, L * B * H * T * 4) << "one lse per query head, not per KV head";
  EXPECT_EQ(p.fc.bytes, L * N * R * 2) << "SwiGLU's gate | up";
  EXPECT_EQ(p.fc_act.bytes, L * N * F * 2);
  EXPECT_EQ(p.dqkv.bytes, N * D * 2);
  EXPECT_EQ(p.logits.bytes, N * Vp * 2);
  EXPECT_EQ(p.losses.bytes, (N + 4) * 4);
  EXPECT_EQ(p.norm_partial.bytes, (N + 31) / 32 * C * 4) << "rmsnorm.cuh's 32-row chunks";
  EXPECT_EQ(p.dq_accum.bytes, N * C * 4);
  EXPECT_EQ(p.att_delta.bytes, B * H * T * 4);
  EXPECT_EQ(p.attention_workspace.bytes, 1000u);
  // The activations, counted apart: bf16 (N, C) × (encoded + 5L + lnf), qkvr, fc, fc_act, logits;
  // fp32 rstds (2L + 1)·N, QK-norm's, lse, losses.
  const std::size_t kept = (N * C * (1 + 5 * L + 1) + L * N * (D + R + F) + N * Vp) * 2 +
                           ((2 * L + 1) * N + L * N * (H + KV) + L * B * H * T + N + 4) * 4;
  EXPECT_GE(p.activation_bytes, kept);
  EXPECT_LT(p.activation_bytes, kept + 17 * tkm::llama_cuda_arena_plan::alignment)
      << "only alignment padding on top of what the model keeps";
}

// The model's views of each layer (llama_cuda_layer, what llama_cuda::layer uses): inside their
// slot for the planned shape and for a smaller batch, the right size, and disjoint across layers.
// Planted while writing (reverted): qkvr's layer stride N·C instead of N·D overlaps layer l's
// views with layer l + 1's.
TEST(LlamaCudaMemory, LayerViewsStayInTheirSlotsAndApart) {
  for (const bool qk : {false, true}) {
    tkm::llama_config c = tkm::llama_config::preset("d6");
    c.qk_norm = qk;
    const auto p = tkm::plan_llama_cuda_arena(c, 4, 96, true);
    for (const auto& [B, T] : {std::pair{4, 96}, std::pair{3, 64}, std::pair{1, 1}}) {
      const std::size_t N = std::size_t(B) * T;
      std::vector<std::vector<tkm::arena_slot>> by_tensor(12);
      for (int l = 0; l < c.num_layers; ++l) {
        const auto v = tkm::llama_cuda_layer(p, c, B, T, l);
        const std::pair<tkm::arena_slot, tkm::arena_slot> in[] = {
            {v.ln1, p.ln1},         {v.ln1_rstd, p.ln1_rstd}, {v.qkvr, p.qkvr},
            {v.qk_rstd, p.qk_rstd}, {v.atty, p.atty},         {v.lse, p.lse},
            {v.res2, p.res2},       {v.ln2, p.ln2},           {v.ln2_rstd, p.ln2_rstd},
            {v.fc, p.fc},           {v.fc_act, p.fc_act},     {v.res3, p.res3}};
        for (std::size_t k = 0; k < 12; ++k) {
          const auto& [view, slot] = in[k];
          EXPECT_GE(view.offset, slot.offset) << "tensor " << k << " layer " << l;
          EXPECT_LE(view.offset + view.bytes, slot.offset + slot.bytes)
              << "tensor " << k << " layer " << l << " B=" << B << " T=" << T;
          if (view.bytes > 0) by_tensor[k].push_back(view);
        }
        EXPECT_EQ(v.qkvr.bytes, N * std::size_t(c.qkv_rows()) * 2);
        EXPECT_EQ(v.fc.bytes, N * std::size_t(c.fc_rows()) * 2);
        EXPECT_EQ(v.lse.bytes, std::size_t(B) * c.num_heads * T * 4);
        EXPECT_EQ(v.qk_rstd.bytes, qk ? N * std::size_t(c.num_heads + c.num_kv_heads) * 4 : 0u);
      }
      for (std::size_t k = 0; k < 12; ++k)
        for (std::size_t a = 0; a + 1 < by_tensor[k].size(); ++a)
          EXPECT_LE(by_tensor[k][a].offset + by_tensor[k][a].bytes, by_tensor[k][a + 1].offset)
              << "tensor " << k << ": layer " << a << " overlaps layer " << a + 1;
    }
  }
}

TEST(LlamaCudaMemory, VariantSlotsAppearOnlyWithTheirVariant) {
  tkm::llama_config c = tkm::llama_config::preset("d6");
  const auto cudnn = tkm::plan_llama_cuda_arena(c, 2, 64, /*flash=*/false);
  expect_aligned_and_disjoint(cudnn);
  EXPECT_EQ(cudnn.qk_rstd.bytes, 0u);
  EXPECT_EQ(cudnn.att_delta.bytes, 0u);
  EXPECT_EQ(cudnn.dq_accum.bytes, 0u);
  c.mlp = tkm::llama_mlp::relu_squared;
  const auto relu2 = tkm::plan_llama_cuda_arena(c, 2, 64, true);
  EXPECT_EQ(relu2.fc.bytes, relu2.fc_act.bytes) << "ReLU²'s fc is F wide, like its activation";
}

// The speedrun recipe's slots (issue 38): absent when off (the plan is today's, byte for byte),
// sized as llama_cuda writes them when on (value embeddings: the unmixed v of each of the 2k layers
// and one λ₁-scaled gradient; U-net: L/2 decoder inputs and L/2 source gradients; the partials of
// recipe.cuh's backwards), every per-index part inside its slot and apart from the next.
TEST(LlamaCudaMemory, RecipeSlotsAppearOnlyWithTheRecipeAndHoldTheirParts) {
  tkm::llama_config c = tkm::llama_config::preset("d6");
  const int B = 2, T = 100;
  const std::size_t N = std::size_t(B) * T, C = std::size_t(c.channels),
                    W = std::size_t(c.value_width());
  const auto off = tkm::plan_llama_cuda_arena(c, B, T, true);
  for (const auto& s :
       {off.ve_saved, off.unet_in, off.ve_scaled, off.recipe_partials, off.unet_dskip})
    EXPECT_EQ(s.bytes, 0u);
  c.recipe.value_embeddings = 2;
  c.recipe.unet_skips = true;
  const auto on = tkm::plan_llama_cuda_arena(c, B, T, true);
  expect_aligned_and_disjoint(on);
  const std::size_t half = std::size_t(c.num_layers / 2);
  EXPECT_EQ(on.ve_saved.bytes, 4 * N * W * 2);
  EXPECT_EQ(on.ve_scaled.bytes, N * W * 2);
  EXPECT_EQ(on.unet_in.bytes, half * N * C * 2);
  EXPECT_EQ(on.unet_dskip.bytes, half * N * C * 2);
  EXPECT_EQ(on.recipe_partials.bytes, std::max(2 * trainkit::model::detail::recipe_blocks(N * W),
                                               trainkit::model::detail::recipe_blocks(N * C)) *
                                          4);
  EXPECT_EQ(on.total_bytes - off.total_bytes, on.ve_saved.bytes + on.unet_in.bytes +
                                                  on.ve_scaled.bytes + on.unet_dskip.bytes +
                                                  (on.recipe_partials.bytes + 255) / 256 * 256)
      << "nothing else moves";
  for (const auto& [slot, n, width] :
       {std::tuple{on.ve_saved, 4, W}, std::tuple{on.unet_in, int(half), C},
        std::tuple{on.unet_dskip, int(half), C}})
    for (int i = 0; i < n; ++i) {
      const auto part = tkm::llama_cuda_recipe_part(slot, N, width, i);
      EXPECT_EQ(part.bytes, N * width * 2);
      EXPECT_LE(part.offset + part.bytes, slot.offset + slot.bytes) << i;
      if (i + 1 < n) {
        EXPECT_LE(part.offset + part.bytes,
                  tkm::llama_cuda_recipe_part(slot, N, width, i + 1).offset);
      }
    }
}

TEST(LlamaCudaMemory, RefusesShapesPastMaxSeqLen) {
  const tkm::llama_config c = tkm::llama_config::preset("d2");
  EXPECT_THROW(tkm::plan_llama_cuda_arena(c, 1, c.max_seq_len + 1, true), trainkit::config_error);
  EXPECT_THROW(tkm::plan_llama_cuda_arena(c, 0, 8, true), trainkit::config_error);
}

TEST(LlamaCudaMemory, TrainingShapesFitAnH100WithFlash) {
  // d12 at B = 16 and d24 at B = 8, T = 1024: weights, gradients, AdamW state and the arena.
  const double h100 = 78.0 * double(1u << 30);
  const auto d12 = tkm::llama_cuda_memory(tkm::llama_config::preset("d12"), 16, 1024, true);
  const auto d24 = tkm::llama_cuda_memory(tkm::llama_config::preset("d24"), 8, 1024, true);
  std::printf("d12 B=16: %s\nd24 B=8: %s\n", d12.to_string().c_str(), d24.to_string().c_str());
  EXPECT_LT(double(d12.total()), h100);
  EXPECT_LT(double(d24.total()), h100);
  EXPECT_GT(d12.activations, d12.parameters) << "at T = 1024 the activations dominate";
}

}  // namespace
