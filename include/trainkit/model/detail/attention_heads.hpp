// trainkit/model/detail/attention_heads.hpp — where each attention head's q, k and v sit in a row
// of the fused QKV output, with grouped-query attention (GQA).
//
// A row holds q (H heads) | k (KV heads) | v (KV heads), hs channels a head: the layout of the
// Llama kernels (rope.cuh, head_rmsnorm) and of llama_cpu; GPT-2 is the case KV = H. Query head h
// reads the k and v of head h / (H / KV): groups of H / KV consecutive query heads share one. The
// attention output (and its gradient) is (·, H·hs). The flash kernels, their CPU twin, the CPU
// emulations and the cuDNN engine all take their offsets from here, so the group arithmetic is
// written once and proven on the CPU (test_flash_attention_reference, test_flash_mma_port).
// Not for users.
#pragma once

#include "trainkit/core/cuda/host_device.hpp"

namespace trainkit::model::detail {

struct attention_heads {
  int H = 0;   // query heads
  int KV = 0;  // key/value heads, dividing H
  int hs = 0;  // channels a head

  /// Query heads sharing one k, v head.
  TRAINKIT_HOST_DEVICE constexpr int group() const { return H / KV; }
  /// The k, v head query head h reads.
  TRAINKIT_HOST_DEVICE constexpr int kv_head(int h) const { return h / group(); }
  /// The first of the query heads reading k, v head g (the others follow it).
  TRAINKIT_HOST_DEVICE constexpr int first_query_head(int g) const { return g * group(); }
  /// Elements of the attention output row (and of q): H·hs.
  TRAINKIT_HOST_DEVICE constexpr int q_width() const { return H * hs; }
  /// Elements of a fused QKV row: (H + 2·KV)·hs.
  TRAINKIT_HOST_DEVICE constexpr int row() const { return (H + 2 * KV) * hs; }
  /// Column of query head h's q in a QKV row (and of its output in an attention output row).
  TRAINKIT_HOST_DEVICE constexpr int q_col(int h) const { return h * hs; }
  /// Columns of k, v head g in a QKV row.
  TRAINKIT_HOST_DEVICE constexpr int k_col_of(int g) const { return (H + g) * hs; }
  TRAINKIT_HOST_DEVICE constexpr int v_col_of(int g) const { return (H + KV + g) * hs; }
  /// Columns of the k and v query head h reads.
  TRAINKIT_HOST_DEVICE constexpr int k_col(int h) const { return k_col_of(kv_head(h)); }
  TRAINKIT_HOST_DEVICE constexpr int v_col(int h) const { return v_col_of(kv_head(h)); }
  /// H, KV and hs positive and KV dividing H.
  TRAINKIT_HOST_DEVICE constexpr bool valid() const {
    return H > 0 && KV > 0 && hs > 0 && H % KV == 0;
  }
};

/// Multi-head attention's heads (GPT-2): C = H·hs, k and v heads one per query head.
TRAINKIT_HOST_DEVICE constexpr attention_heads mha_heads(int C, int H) {
  return attention_heads{H, H, C / H};
}

}  // namespace trainkit::model::detail
