// trainkit/model/cuda/cudnn_attention.hpp — causal attention through cuDNN's fused
// scaled-dot-product attention (its flash kernels), forward and backward, via the cudnn-frontend
// C++ graph API: gpt2_cuda's attention=cudnn engine (model/cuda/attention_engine.hpp). A
// sliding window (window > 0) is cuDNN's diagonal band with a left bound of `window` keys on the
// top-left causal mask (cudnn-frontend's set_diagonal_band_left_bound, alias
// set_sliding_window_length; cuDNN 9.2 and newer, a config_error naming the version otherwise),
// one graph per window.
//
// Include this header in ONE .cpp of a program (host code only: g++ compiles it in under a minute,
// nvcc takes minutes over cudnn-frontend) and link trainkit::cudnn; its static initialiser
// registers the engine, and gpt2_cuda finds it through kernels::cudnn_attention_factory().
//
// Same contract as flash_attention.cuh: q, k, v read in place from the QKV GEMM's
// (B, T, (H + 2·KV)·hs) output through strides (no permute), out (B, T, C), softmax statistics
// lse (B, H, T) fp32 in natural log (cuDNN's "stats"), dqkv (same layout) assigned. Grouped-query
// attention is cuDNN's own: K, V (and dK, dV) are declared with KV heads where Q has H, and its
// SDPA maps query head h to k, v head h / (H / KV) and sums dK, dV over the group — the map of
// detail/attention_heads.hpp, whose offsets the pointers and strides here come from. One graph
// per (B, T, H, KV, hs, pass),
// built on first use (validate, heuristics A then fallback, check_support, build_plans) and
// cached. Workspace: `plan_workspace` returns the shape's need before any run, so gpt2_cuda plans
// it in its arena and hands it over with `use_workspace`; a graph needing more (a shape never
// planned) runs in the engine's own buffer, grown to the largest such need. The backward's
// algorithm is the choice of the constructor: deterministic (the same bits run to run; on sm90
// cudnn-frontend 1.x then keeps dP in a workspace of B·H·T·T·2 bytes, ~805 MB at d12 B=32
// T=1024, and is probably slower) or fast (dQ atomics, no fixed order; little workspace).
// trainkit::cudnn exists only when CMake
// found the cudnn-frontend headers (PyPI nvidia-cudnn-frontend) and libcudnn.
#pragma once

#include <cuda_runtime.h>
#include <cudnn.h>

#include <cudnn_frontend.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/launch_checks.hpp"
#include "trainkit/model/cuda/attention_engine.hpp"
#include "trainkit/model/detail/attention_heads.hpp"

namespace trainkit::model::kernels {

namespace cudnn_detail {

namespace fe = cudnn_frontend;

[[noreturn]] inline void throw_cudnn(const std::string& what, const std::string& message,
                                     int code) {
  throw cuda_error("cudnn_attention: " + what + " failed: " + message, code);
}

inline void check(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) throw_cudnn(what, cudnnGetErrorString(s), int(s));
}

inline void check(fe::error_t e, const char* what) {  // its getters are not const
  if (e.is_bad()) throw_cudnn(what, e.get_message(), int(e.get_code()));
}

// Tensor uids in the variant packs.
enum uid : std::int64_t {
  q_uid = 1,
  k_uid,
  v_uid,
  o_uid,
  stats_uid,
  do_uid,
  dq_uid,
  dk_uid,
  dv_uid
};

}  // namespace cudnn_detail

/// Owns the cuDNN handle, the cached graphs and the workspace. Not thread-safe: one per stream
/// user, as matmul_context.
class cudnn_attention final : public attention_engine {
 public:
  using bf16_t = __nv_bfloat16;

  /// deterministic: the backward uses cuDNN's deterministic algorithm (no atomics whose order
  /// varies run to run), as gpt2_cuda_options::deterministic asks.
  explicit cudnn_attention(bool deterministic = true) : deterministic_(deterministic) {
    cudnn_detail::check(cudnnCreate(&handle_), "cudnnCreate");
  }
  ~cudnn_attention() override {
    if (handle_) (void)cudnnDestroy(handle_);
  }

  /// Graphs built so far (tests: one per shape and pass).
  std::size_t cached_graphs() const noexcept override { return graphs_.size(); }

  /// Builds the shape's forward and backward graphs; the larger workspace either needs.
  std::size_t plan_workspace(int B, int T, int C, int H, int KV) override {
    check_shape(B, T, C, H, KV);
    return std::max(graph_for(false, B, T, C, H, KV, 0).workspace,
                    graph_for(true, B, T, C, H, KV, 0).workspace);
  }
  /// Graphs whose workspace fits in `bytes` run at `p` (gpt2_cuda: a slot of its arena).
  void use_workspace(void* p, std::size_t bytes) noexcept override {
    external_ = p;
    external_bytes_ = p ? bytes : 0;
  }
  /// The own workspace, for graphs the external one cannot hold. It moves when a new shape needs
  /// more: a CUDA graph that captured the old address must be captured again.
  const void* workspace() const noexcept override { return workspace_.data(); }
  std::size_t own_workspace_bytes() const noexcept override { return workspace_.size(); }

  /// out (B, T, C) and lse (B, H, T) from qkv (B, T, (H + 2·KV)·hs), causal, scale 1/√hs;
  /// window > 0 (and < T): cuDNN's sliding window, a diagonal band whose left bound is `window`
  /// (query i keeps keys j with j + window > i, top-left aligned as the causal mask).
  void forward(bf16_t* out, float* lse, const bf16_t* qkv, int B, int T, int C, int H, int KV,
               cudaStream_t stream, int window = 0) override {
    check_shape(B, T, C, H, KV, window);
    const planned& g = graph_for(false, B, T, C, H, KV, effective_window(window, T));
    const detail::attention_heads heads{H, KV, C / H};
    std::unordered_map<std::int64_t, void*> pack = {
        {cudnn_detail::q_uid, const_cast<bf16_t*>(qkv)},
        {cudnn_detail::k_uid, const_cast<bf16_t*>(qkv + heads.k_col_of(0))},
        {cudnn_detail::v_uid, const_cast<bf16_t*>(qkv + heads.v_col_of(0))},
        {cudnn_detail::o_uid, out},
        {cudnn_detail::stats_uid, lse}};
    run(g, pack, stream);
  }

  /// dqkv (B, T, (H + 2·KV)·hs) assigned from dout (B, T, C), with the forward's qkv, out and
  /// lse; dk and dv summed over each group.
  void backward(bf16_t* dqkv, const bf16_t* dout, const bf16_t* qkv, const bf16_t* out,
                const float* lse, int B, int T, int C, int H, int KV, cudaStream_t stream,
                int window = 0) override {
    check_shape(B, T, C, H, KV, window);
    const planned& g = graph_for(true, B, T, C, H, KV, effective_window(window, T));
    const detail::attention_heads heads{H, KV, C / H};
    std::unordered_map<std::int64_t, void*> pack = {
        {cudnn_detail::q_uid, const_cast<bf16_t*>(qkv)},
        {cudnn_detail::k_uid, const_cast<bf16_t*>(qkv + heads.k_col_of(0))},
        {cudnn_detail::v_uid, const_cast<bf16_t*>(qkv + heads.v_col_of(0))},
        {cudnn_detail::o_uid, const_cast<bf16_t*>(out)},
        {cudnn_detail::stats_uid, const_cast<float*>(lse)},
        {cudnn_detail::do_uid, const_cast<bf16_t*>(dout)},
        {cudnn_detail::dq_uid, dqkv},
        {cudnn_detail::dk_uid, dqkv + heads.k_col_of(0)},
        {cudnn_detail::dv_uid, dqkv + heads.v_col_of(0)}};
    run(g, pack, stream);
  }

 private:
  using graph_ptr = std::shared_ptr<cudnn_frontend::graph::Graph>;
  using key = std::tuple<bool, int, int, int, int, int, int>;  // backward, B, T, H, KV, hs, window
  struct planned {
    graph_ptr graph;
    std::size_t workspace = 0;  // bytes its execution needs
  };

  /// The oldest cuDNN whose SDPA takes a sliding window (a diagonal band's left bound): 9.2.0.
  static constexpr int sliding_window_cudnn = 90200;

  /// 0 (full causal) for a window of T or more, which hides no key.
  static int effective_window(int window, int T) { return window >= T ? 0 : window; }

  static void check_shape(int B, int T, int C, int H, int KV, int window = 0) {
    const char* name = "cudnn_attention";
    cuda::require(window >= 0, name, [&] {
      return "window = " + std::to_string(window) + " (keys per query; 0 = full causal)";
    });
    if (window > 0 && window < T) {
      const std::size_t version = cudnnGetVersion();
      cuda::require(version >= std::size_t(sliding_window_cudnn), name, [&] {
        return "sliding-window attention (window " + std::to_string(window) +
               ") needs cuDNN 9.2.0 or newer; this is cuDNN " + std::to_string(version) +
               " (use --attention flash, or no window)";
      });
    }
    cuda::require(B > 0 && T > 0 && H > 0 && KV > 0, name, "B, T, H and KV must be positive");
    cuda::require(C % H == 0, name,
                  [&] { return "C = " + std::to_string(C) + " is not a multiple of H"; });
    cuda::require(H % KV == 0, name, [&] {
      return "H = " + std::to_string(H) +
             " query heads is not a multiple of KV = " + std::to_string(KV) + " key/value heads";
    });
    const int hs = C / H;
    cuda::require(hs % 8 == 0 && hs <= 256, name, [&] {
      return "head size " + std::to_string(hs) + " (cuDNN needs a multiple of 8, at most 256)";
    });
  }

  // In the caller's workspace when the graph's need fits, else in the own one (grown here: the
  // first run of a shape is eager, never inside a CUDA graph capture).
  void run(const planned& g, std::unordered_map<std::int64_t, void*>& pack, cudaStream_t stream) {
    void* ws = external_;
    if (g.workspace > external_bytes_) {
      if (g.workspace > workspace_.size()) workspace_ = cuda::device_buffer<std::byte>(g.workspace);
      ws = workspace_.data();
    }
    cudnn_detail::check(cudnnSetStream(handle_, stream), "cudnnSetStream");
    cudnn_detail::check(g.graph->execute(handle_, pack, ws), "graph execute");
  }

  // window: 0 (full causal) or in 1 .. T − 1.
  const planned& graph_for(bool backward, int B, int T, int C, int H, int KV, int window) {
    namespace fe = cudnn_frontend;
    const int hs = C / H;
    const key k{backward, B, T, H, KV, hs, window};
    if (auto it = graphs_.find(k); it != graphs_.end()) return it->second;

    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    // Logical (B, H, T, hs) for q, out and their gradients, (B, KV, T, hs) for k, v and theirs;
    // q, k, v are columns of the (B, T, (H + 2·KV)·hs) rows, the rest (B, T, C).
    const std::int64_t b = B, h = H, kv = KV, t = T, d = hs, c = C;
    const std::int64_t row = detail::attention_heads{H, KV, hs}.row();
    const std::vector<std::int64_t> dims{b, h, t, d}, kv_dims{b, kv, t, d};
    const std::vector<std::int64_t> qkv_stride{t * row, d, row, 1};
    const std::vector<std::int64_t> out_stride{t * c, d, c, 1};
    auto tensor = [&](const char* name, std::int64_t uid, const std::vector<std::int64_t>& dim,
                      const std::vector<std::int64_t>& stride) {
      return g->tensor(
          fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dim).set_stride(
              stride));
    };
    auto Q = tensor("q", cudnn_detail::q_uid, dims, qkv_stride);
    auto K = tensor("k", cudnn_detail::k_uid, kv_dims, qkv_stride);
    auto V = tensor("v", cudnn_detail::v_uid, kv_dims, qkv_stride);
    const float scale = 1.0f / std::sqrt(float(hs));
    if (!backward) {
      auto options = fe::graph::SDPA_attributes()
                         .set_name("trainkit_sdpa")
                         .set_generate_stats(true)
                         .set_causal_mask(true)
                         .set_attn_scale(scale);
      if (window > 0) options.set_diagonal_band_left_bound(window);
      auto [O, stats] = g->sdpa(Q, K, V, options);
      O->set_output(true).set_uid(cudnn_detail::o_uid).set_dim(dims).set_stride(out_stride);
      stats->set_output(true)
          .set_uid(cudnn_detail::stats_uid)
          .set_data_type(fe::DataType_t::FLOAT)
          .set_dim({b, h, t, 1})
          .set_stride({h * t, t, 1, 1});
    } else {
      auto O = tensor("o", cudnn_detail::o_uid, dims, out_stride);
      auto dO = tensor("do", cudnn_detail::do_uid, dims, out_stride);
      auto stats = g->tensor(fe::graph::Tensor_attributes()
                                 .set_name("stats")
                                 .set_uid(cudnn_detail::stats_uid)
                                 .set_dim({b, h, t, 1})
                                 .set_stride({h * t, t, 1, 1})
                                 .set_data_type(fe::DataType_t::FLOAT));
      auto options = fe::graph::SDPA_backward_attributes()
                         .set_name("trainkit_sdpa_backward")
                         .set_causal_mask(true)
                         .set_attn_scale(scale)
                         .set_deterministic_algorithm(deterministic_);
      if (window > 0) options.set_diagonal_band_left_bound(window);
      auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, stats, options);
      dQ->set_output(true).set_uid(cudnn_detail::dq_uid).set_dim(dims).set_stride(qkv_stride);
      dK->set_output(true).set_uid(cudnn_detail::dk_uid).set_dim(kv_dims).set_stride(qkv_stride);
      dV->set_output(true).set_uid(cudnn_detail::dv_uid).set_dim(kv_dims).set_stride(qkv_stride);
    }
    cudnn_detail::check(g->validate(), "graph validate");
    cudnn_detail::check(g->build_operation_graph(handle_), "build_operation_graph");
    cudnn_detail::check(g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}),
                        "create_execution_plans");
    cudnn_detail::check(g->check_support(handle_), "check_support");
    cudnn_detail::check(g->build_plans(handle_), "build_plans");
    std::int64_t ws = 0;
    cudnn_detail::check(g->get_workspace_size(ws), "get_workspace_size");
    return graphs_.emplace(k, planned{std::move(g), std::size_t(ws)}).first->second;
  }

  bool deterministic_;
  cudnnHandle_t handle_ = nullptr;
  std::map<key, planned> graphs_;
  cuda::device_buffer<std::byte> workspace_;  // for graphs the external workspace cannot hold
  void* external_ = nullptr;
  std::size_t external_bytes_ = 0;
};

namespace cudnn_detail {

// Registers the engine with gpt2_cuda when this header is compiled into the program. An inline
// variable: one initialisation however many units include the header.
inline const bool registered = [] {
  cudnn_attention_factory() = [](bool deterministic) -> std::unique_ptr<attention_engine> {
    return std::make_unique<cudnn_attention>(deterministic);
  };
  return true;
}();

}  // namespace cudnn_detail

}  // namespace trainkit::model::kernels
