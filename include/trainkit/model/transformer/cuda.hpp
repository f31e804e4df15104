// trainkit/model/transformer/cuda.hpp — the CUDA transformer (bf16 weights and activations, fp32
// accumulation, cuBLASLt matmuls) every family shares; a family supplies only its block
// (cuda_block below): gpt2_cuda_block (model/gpt2/cuda.hpp), llama_cuda_block
// (model/llama/cuda.hpp).
//
// What is the same for every family lives here once: the flat bf16 parameter and gradient buffers
// in the family's layout, the activation arena (sized for (B, T) up front from the family's plan,
// reallocated only to grow), the model's stream and the matmul context, the step protocol
// (core/step_protocol.hpp) with its loss read-back and bad-token flags, the layer loop with bucket
// publishing, the LM head (logits = final · headᵀ and its backward), the forward/eval/logits entry
// points, the checkpoint tensor walk, host copies, and CUDA graphs for families whose options ask
// for them (`cuda_graph`).
//
// The step protocol runs on the trainer's execution context: zero_grad and forward_backward only
// enqueue work on the context's stream — no host synchronisation: the loss of each micro-step is
// added to a device double and copied to pinned memory on the last micro-step, and step_loss()
// reads it after the trainer synchronised the context. Buckets are published right after the last
// kernel writing them is enqueued: bucket 0 after the final norm's backward, then
// transformer_layer_bucket(L, l) after layer l's, the embeddings' last (transformer/layout.hpp).
// Token ids are checked on the device (the embedding kernel and the classifier raise two flags in
// their own small buffer, which survives an arena that grows between micro-steps) and reported by
// step_loss(). The exception to "no synchronisation": a batch shape larger than the arena's
// reallocates it (cudaMalloc synchronises the device).
//
// With options.cuda_graph (where the family's options have it) the micro-step's kernels are
// captured once per (B, T, grad_scale) and replayed as one graph (several when buckets are
// published, one per bucket, so a reducer still starts on each as backward finishes it): the batch
// is first copied into fixed token buffers, the step's start (flags, loss sum) and end (the copy to
// pinned memory) stay outside the graph, so the captured work does not depend on the micro-step's
// index. docs/cuda.md, "CUDA graphs". The other public functions (forward, the convenience
// forward_backward, copies) run on the model's own stream and return with their work complete.
// Batches passed to the protocol must be complete in the context's stream order
// (pinned_prefetcher bound to the context does that). Needs nvcc; link trainkit::cuda.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/core/batch.hpp"
#include "trainkit/core/bf16.hpp"
#include "trainkit/core/cuda/bf16.cuh"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/device.hpp"
#include "trainkit/core/cuda/execution_context.hpp"
#include "trainkit/core/cuda/stream.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/gemm_calibration.hpp"
#include "trainkit/core/linalg/gemm_cublaslt.cuh"
#include "trainkit/core/memory_space.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/model/concepts.hpp"
#include "trainkit/model/cuda/attention_engine.hpp"
#include "trainkit/model/cuda/classifier.cuh"
#include "trainkit/model/cuda/cuda_graph.hpp"
#include "trainkit/model/cuda/elementwise.cuh"
#include "trainkit/model/cuda/flash_attention.cuh"
#include "trainkit/model/cuda/loss_sum.cuh"
#include "trainkit/model/detail/batch_checks.hpp"
#include "trainkit/model/transformer/cuda_memory.hpp"
#include "trainkit/model/transformer/layout.hpp"

namespace trainkit::model {

static_assert(trainkit::linalg::matmul_context::workspace_bytes == cuda_cublas_workspace_bytes);

/// A host model a CUDA model can copy its shape and weights from: a config of the family and float
/// parameters in the family's layout order (the family's CPU model, or one loaded from a file).
template <class M, class Config>
concept host_weights_for = requires(const M& m) {
  { m.config() } -> std::convertible_to<Config>;
  { m.parameters() } -> std::convertible_to<std::span<const float>>;
};

/// The flash and cuDNN engines' conditions, the same for every family: flash needs head size 64
/// or 128 and is not bit-reproducible (its backward adds dQ with fp32 atomics in no fixed order);
/// cudnn needs cudnn_attention.hpp compiled into the program. config_error starting with `who`
/// ("gpt2_cuda_options.attention") otherwise; naive is the family's to allow or refuse.
inline void check_attention_engine(cuda_attention attention, int head_size, bool deterministic,
                                   const std::string& shape, const std::string& who) {
  switch (attention) {
    case cuda_attention::naive:
      return;
    case cuda_attention::flash:
      if (head_size != 64 && head_size != 128)
        throw config_error(who + " = flash needs head size 64 or 128, shape " + shape + " has " +
                           std::to_string(head_size));
      if (deterministic)
        throw config_error(who +
                           " = flash is not bit-reproducible (dQ atomics); set deterministic = "
                           "false or use another attention");
      return;
    case cuda_attention::cudnn:
      if (!kernels::cudnn_attention_factory())
        throw config_error(who +
                           " = cudnn, but this program has no cuDNN attention: compile "
                           "<trainkit/model/cuda/cudnn_attention.hpp> into one of its .cpp files "
                           "and link trainkit::cudnn (pip install nvidia-cudnn-frontend)");
      return;
  }
  throw config_error(who + ": unknown choice " + std::to_string(int(attention)));
}

/// What a block reads and writes during one pass: the arena and the family's plan of it, the
/// parameters and gradients by the family's tensor enum, the stream, the matmul context, the
/// attention engine and the bad-token flags, with the GEMM and attention calls every family makes.
template <class Plan, class Tensor>
struct cuda_pass {
  using bf16_t = kernels::bf16_t;

  const Plan& plan;
  std::byte* arena;
  trainkit::bf16* params;
  trainkit::bf16* grads;
  const std::size_t* offsets;  // per Tensor: its offset in the flat buffers
  trainkit::linalg::matmul_context& blas;
  kernels::attention_engine* cudnn;  // attention = cudnn only
  cuda_attention attention;
  int* flags;  // (2,) bad input token, bad target token
  cudaStream_t stream;
  int B, T;

  int rows() const noexcept { return B * T; }  // N
  template <class T>
  T* slot(const arena_slot& s) const noexcept {
    return reinterpret_cast<T*>(arena + s.offset);
  }
  bf16_t* param(Tensor t) const noexcept {
    return kernels::as_device_bf16(params + offsets[std::size_t(t)]);
  }
  bf16_t* grad(Tensor t) const noexcept {
    return kernels::as_device_bf16(grads + offsets[std::size_t(t)]);
  }

  // out (N, OC) = inp (N, IC) · wᵀ, with epilogue `ep` (bias, gelu_aux_bias) when given.
  void linear_forward(bf16_t* out, const bf16_t* inp, const bf16_t* w, int N, int IC, int OC,
                      const bf16_t* bias = nullptr,
                      trainkit::linalg::epilogue ep = trainkit::linalg::epilogue::none,
                      bf16_t* aux = nullptr) const {
    trainkit::linalg::matmul_arguments x;
    x.a = inp, x.lda = IC;
    x.b = w, x.trans_b = true, x.ldb = IC;
    x.d = out, x.ldd = OC;
    x.m = N, x.n = OC, x.k = IC;
    if (ep != trainkit::linalg::epilogue::none)
      x.ep = ep, x.bias = bias, x.aux = aux, x.ld_aux = OC;
    blas.run(x, stream);
  }

  // dinp (N, IC) = dout · w (assigned; with a GELU aux, times gelu'(aux)); dw (OC, IC) += doutᵀ ·
  // inp; db (OC) += Σ_rows dout through `bias_grad` (OC bf16 of scratch) when db is given.
  void linear_backward(bf16_t* dinp, bf16_t* dw, const bf16_t* dout, const bf16_t* inp,
                       const bf16_t* w, int N, int IC, int OC, bf16_t* db = nullptr,
                       bf16_t* bias_grad = nullptr, const bf16_t* gelu_aux = nullptr) const {
    trainkit::linalg::matmul_arguments gw;
    gw.a = dout, gw.trans_a = true, gw.lda = OC;
    gw.b = inp, gw.ldb = IC;
    gw.d = dw, gw.ldd = IC;
    gw.m = OC, gw.n = IC, gw.k = N;
    gw.beta = 1.0f;
    if (db) gw.ep = trainkit::linalg::epilogue::bgradb, gw.bias_grad = bias_grad;
    blas.run(gw, stream);
    if (db) kernels::accumulate(db, bias_grad, OC, stream);
    trainkit::linalg::matmul_arguments gi;
    gi.a = dout, gi.lda = OC;
    gi.b = w, gi.ldb = IC;
    gi.d = dinp, gi.ldd = IC;
    gi.m = N, gi.n = IC, gi.k = OC;
    if (gelu_aux) {
      gi.ep = trainkit::linalg::epilogue::dgelu;
      gi.aux = const_cast<bf16_t*>(gelu_aux);
      gi.ld_aux = IC;
    }
    blas.run(gi, stream);
  }

  // Flash or cuDNN attention of one layer over q | k | v rows (N, (H + 2·KV)·hs): out (N, C) and
  // the log-sum-exp per query-head row, kept for backward. (GPT-2's naive engine is its own.)
  // window > 0: sliding-window causal attention (the recipe's short layers); 0: full causal.
  void attention_forward(bf16_t* out, float* lse, const bf16_t* qkv, int C, int H, int KV,
                         int window = 0) const {
    if (attention == cuda_attention::cudnn)
      cudnn->forward(out, lse, qkv, B, T, C, H, KV, stream, window);
    else
      kernels::flash_attention_forward(out, lse, qkv, B, T, C, H, KV, stream, window);
  }
  void attention_backward(bf16_t* dqkv, const bf16_t* dout, const bf16_t* qkv, const bf16_t* out,
                          const float* lse, int C, int H, int KV, int window = 0) const {
    if (attention == cuda_attention::cudnn)
      cudnn->backward(dqkv, dout, qkv, out, lse, B, T, C, H, KV, stream, window);
    else
      kernels::flash_attention_backward(dqkv, slot<float>(plan.att_delta),
                                        slot<float>(plan.dq_accum), dout, qkv, out, lse, B, T, C, H,
                                        KV, stream, window);
  }
};

/// A family's CUDA block: everything transformer_cuda does not own. Requires:
///  - `config_type`, `options_type` (with batch_size, seq_len, attention, deterministic,
///    gemm_autotune; optionally cuda_graph), `plan_type` (the arena plan: slots encoded, lnf,
///    logits, losses, dln, att_delta, dq_accum, attention_workspace and total_bytes), `tensor`
///    (its parameter enum ending in `tensor_count`); `model_name`, `config_name`;
///  - static `parameter_layout(cfg)`, `gradient_buckets(cfg)` (transformer/layout.hpp's order),
///    `initial_parameters(cfg, seed)` (floats, the CPU model's initialisation), `validated(cfg)`
///    and `checked_options(opt, cfg)` (config_error naming the field; no device needed),
///    `head(cfg)` (the tensor the LM head reads), `kv_heads(cfg)`, `plan(cfg, B, T, opt,
///    attention_workspace)` and `memory(cfg, B, T, opt, attention_workspace)`;
///  - a constructor (cfg, opt, stream) that may upload tables on the stream; `reserve(B, T)` for
///    scratch of its own (called when the arena grows);
///  - forward: `embed(pass, inputs)` (raising flags[0] for a bad token), `forward_layer(pass, l)`
///    (the last layer writes the final norm's output to plan.lnf); backward, from ∂lnf in plan.dln:
///    `backward_final(pass)`, `backward_layer(pass, l)` for l = L-1..0, `backward_embed(pass,
///    inputs)`. Backward adds into parameter gradients.
template <class B>
concept cuda_block = requires(B b, const typename B::config_type& cfg,
                              const typename B::options_type& opt,
                              const cuda_pass<typename B::plan_type, typename B::tensor>& pass,
                              const std::int32_t* tokens) {
  B::tensor::tensor_count;
  { B::model_name } -> std::convertible_to<std::string_view>;
  { B::config_name } -> std::convertible_to<std::string_view>;
  { B::parameter_layout(cfg) } -> std::same_as<std::vector<tensor_info>>;
  { B::gradient_buckets(cfg) } -> std::same_as<std::vector<gradient_bucket>>;
  { B::initial_parameters(cfg, std::uint64_t{}) } -> std::same_as<std::vector<float>>;
  { B::validated(cfg) } -> std::same_as<typename B::config_type>;
  { B::checked_options(opt, cfg) } -> std::same_as<typename B::options_type>;
  { B::head(cfg) } -> std::same_as<typename B::tensor>;
  { B::kv_heads(cfg) } -> std::convertible_to<int>;
  { B::plan(cfg, int{}, int{}, opt, std::size_t{}) } -> std::same_as<typename B::plan_type>;
  { B::memory(cfg, int{}, int{}, opt, std::size_t{}) } -> std::same_as<cuda_memory_report>;
  B(cfg, opt, cudaStream_t{});
  b.reserve(int{}, int{});
  b.embed(pass, tokens);
  b.forward_layer(pass, int{});
  b.backward_final(pass);
  b.backward_layer(pass, int{});
  b.backward_embed(pass, tokens);
};

template <cuda_block Block>
class transformer_cuda {
  using bf16_t = kernels::bf16_t;
  using tensor_id = typename Block::tensor;
  using plan_type = typename Block::plan_type;
  using pass_type = cuda_pass<plan_type, tensor_id>;

 public:
  using block_type = Block;
  using config_type = typename Block::config_type;
  using options_type = typename Block::options_type;
  using memory_space = device_memory;
  using parameter_type = trainkit::bf16;

  /// The CPU model's initialisation of `seed`, rounded to bf16. Throws config_error or cuda_error.
  transformer_cuda(config_type cfg, std::uint64_t seed, options_type opt = {})
      : transformer_cuda(cfg, Block::initial_parameters(Block::validated(cfg), seed), opt) {}

  /// The shape and weights of a host model (the family's CPU model).
  template <host_weights_for<config_type> Host>
  explicit transformer_cuda(const Host& host, options_type opt = {})
      : transformer_cuda(config_type(host.config()), std::span<const float>(host.parameters()),
                         opt) {}

  /// Weights given as floats in the family's layout order, rounded to bf16.
  transformer_cuda(config_type cfg, std::span<const float> params, options_type opt = {})
      : config_(Block::validated(cfg)),
        options_(Block::checked_options(opt, config_)),
        layout_(Block::parameter_layout(config_)),
        buckets_(Block::gradient_buckets(config_)),
        stream_(std::make_unique<trainkit::cuda::stream>()),
        blas_(std::make_unique<trainkit::linalg::matmul_context>()) {
    blas_->set_autotune(options_.gemm_autotune && !options_.deterministic);
    if (params.size() != config_.num_parameters())
      throw config_error(name() + ": " + std::to_string(params.size()) +
                         " parameters given, shape " + config_.to_string() + " has " +
                         std::to_string(config_.num_parameters()));
    if (options_.attention == cuda_attention::cudnn)
      cudnn_ = kernels::cudnn_attention_factory()(options_.deterministic);
    if constexpr (requires { Block::tensor_offsets(config_); })
      offsets_ = Block::tensor_offsets(config_);  // the block maps its enum (optional tensors)
    else
      for (std::size_t i = 0; i < layout_.size(); ++i) offsets_[i] = layout_[i].offset;
    // A tied head is wte: the head's reads and gradient go to wte's offset.
    head_ = Block::head(config_);
    device_name_ = trainkit::cuda::query_device().name;
    params_ = trainkit::cuda::device_buffer<trainkit::bf16>(params.size());
    grads_ = trainkit::cuda::device_buffer<trainkit::bf16>(params.size());
    check_buckets_tile(buckets_, params.size(), name().c_str());
    loss_sums_ = trainkit::cuda::device_buffer<double>(2);  // [0] the step's, [1] forward()'s
    flags_ = trainkit::cuda::device_buffer<int>(2);
    host_step_ = trainkit::cuda::pinned_buffer<double>(2);  // {Σ micro-step means, flags}
    if (graphs_enabled()) capture_stream_ = std::make_unique<trainkit::cuda::stream>(true);
    block_.emplace(config_, options_, stream());
    upload_parameters(params);
    zero_grad();
    if (options_.batch_size > 0 && options_.seq_len > 0)
      reserve(options_.batch_size, options_.seq_len);
  }

  transformer_cuda(transformer_cuda&&) noexcept = default;
  transformer_cuda& operator=(transformer_cuda&&) noexcept = default;
  transformer_cuda(const transformer_cuda&) = delete;
  transformer_cuda& operator=(const transformer_cuda&) = delete;

  const config_type& config() const noexcept { return config_; }
  const options_type& options() const noexcept { return options_; }
  /// The tensors with their roles, as the family's CPU model reports them.
  std::span<const tensor_info> parameter_layout() const noexcept { return layout_; }
  /// Device memory: do not dereference on the host.
  std::span<trainkit::bf16> parameters() noexcept { return params_.device_span(); }
  std::span<trainkit::bf16> gradients() noexcept { return grads_.device_span(); }
  std::size_t num_parameters() const noexcept { return params_.size(); }
  double flops_per_token(int T) const { return config_.flops_per_token(T); }
  /// The CUDA device's name, for the trainer's peak-FLOP/s lookup (MFU).
  const std::string& device_name() const noexcept { return device_name_; }
  /// The stream all of the model's work runs on.
  cudaStream_t stream() const noexcept { return stream_->get(); }
  /// GEMMs whose epilogue ran through fallback kernels (cuBLASLt had no fused algorithm).
  int matmul_fallbacks() const noexcept { return blas_->fallbacks(); }
  /// Micro-steps captured as CUDA graphs so far, and micro-steps replayed from one (cuda_graph).
  int graph_captures() const noexcept { return graph_captures_; }
  int graph_replays() const noexcept { return graph_replays_; }
  /// The GEMM shapes autotuned so far (empty in deterministic mode or with gemm_autotune off).
  const std::vector<trainkit::linalg::matmul_context::tuning_record>& gemm_tuning() const noexcept {
    return blas_->tuning_log();
  }

  /// mfu_settings.calibrate (trainer/calibrate.hpp): the best of `reps` cuBLASLt bf16 GEMMs of n³
  /// with fp32 accumulation — the model's own matmul path — timed with events on the model's
  /// stream. 8192³ is 1.1 TFLOP a repetition: long enough for the clocks to settle, small next to
  /// the arena. Inputs are a constant non-zero byte pattern (0x3c3c ≈ 0.0115): zeros would draw
  /// less power and flatter the rate.
  gemm_calibration calibrate_gemm(int n = 8192, int reps = 5) {
    if (n <= 0 || reps <= 0)
      throw config_error("calibrate_gemm: n and reps must be positive (" + std::to_string(n) +
                         ", " + std::to_string(reps) + ")");
    const std::size_t elems = std::size_t(n) * std::size_t(n);
    trainkit::cuda::device_buffer<kernels::bf16_t> a(elems), b(elems), d(elems);
    a.fill_bytes_async(0x3c, stream());
    b.fill_bytes_async(0x3c, stream());
    trainkit::linalg::matmul_arguments x;
    x.a = a.data();
    x.b = b.data();
    x.d = d.data();
    x.m = x.n = x.k = n;
    x.lda = x.ldb = x.ldd = n;
    blas_->run(x, stream());  // warm-up: algorithm choice, clocks
    trainkit::cuda::event start, stop;
    double best_ms = 0;
    for (int r = 0; r < reps; ++r) {
      start.record(stream());
      blas_->run(x, stream());
      stop.record(stream());
      const double ms = trainkit::cuda::elapsed_ms(start, stop);
      if (r == 0 || ms < best_ms) best_ms = ms;
    }
    stream_->synchronize();
    gemm_calibration c;
    c.n = n;
    c.reps = reps;
    c.best_ms = best_ms;
    c.tflops = best_ms > 0 ? 2.0 * double(n) * double(n) * double(n) / (best_ms * 1e9) : 0.0;
    c.what = "cuBLASLt bf16 " + std::to_string(n) + "^3 (fp32 accumulate)";
    return c;
  }

  /// Sizes the activation arena for batches up to (B, T); reallocates only to grow.
  void reserve(int B, int T) {
    if (arena_.size() && B <= arena_batch_ && T <= arena_seq_) return;
    const int nb = std::max(B, arena_batch_), nt = std::max(T, arena_seq_);
    // cuDNN's plans for the shape say what workspace they need: planned in the arena (and so in
    // memory_report()), not allocated behind it.
    const std::size_t attention_ws =
        cudnn_ ? cudnn_->plan_workspace(nb, nt, config_.channels, config_.num_heads,
                                        Block::kv_heads(config_))
               : 0;
    plan_ = Block::plan(config_, nb, nt, options_, attention_ws);
    if (cudnn_) cudnn_->use_workspace(nullptr, 0);        // not into the arena about to be freed
    arena_ = trainkit::cuda::device_buffer<std::byte>();  // free first: one arena at a time
    arena_ = trainkit::cuda::device_buffer<std::byte>(plan_.total_bytes);
    if (cudnn_ && attention_ws > 0)
      cudnn_->use_workspace(slot<std::byte>(plan_.attention_workspace), attention_ws);
    block_->reserve(nb, nt);
    // Captured graphs hold the old arena's addresses (a new arena may even reuse them with a
    // different layout): every shape runs eagerly once more, then is captured again.
    graphs_.clear();
    warmed_.clear();
    if (graphs_enabled())
      graph_tokens_ = trainkit::cuda::device_buffer<std::int32_t>(2 * std::size_t(nb) * nt);
    arena_batch_ = nb;
    arena_seq_ = nt;
  }

  /// Memory by use for the arena's current shape.
  /// The optimizer step the next micro-steps belong to, for blocks whose forward depends on it
  /// (the Llama recipe's growing attention windows: llama_config::attention_window(layer, step));
  /// other blocks ignore it. Call it before each step's first micro-step, as for the CPU model.
  void set_step(std::int64_t step) {
    if constexpr (requires(Block & b) { b.set_step(step); }) block_->set_step(step);
  }

  cuda_memory_report memory_report() const {
    if (!arena_.size())
      throw config_error(name() + "::memory_report: no arena yet (call reserve(B, T) first)");
    cuda_memory_report r =
        Block::memory(config_, arena_batch_, arena_seq_, options_, plan_.attention_workspace.bytes);
    if (cudnn_) r.workspace += cudnn_->own_workspace_bytes();  // shapes the arena did not plan
    return r;
  }

  /// Step protocol: gradients to zero, enqueued on the context's stream.
  void zero_grad(trainkit::cuda::execution_context& ctx) {
    grads_.fill_bytes_async(0, ctx.stream());
  }

  /// Gradients to zero on the model's own stream; returns with the work done.
  void zero_grad() {
    grads_.fill_bytes_async(0, stream());
    stream_->synchronize();
  }

  /// Step protocol: adds micro.grad_scale·∂loss/∂θ to gradients() and the batch's mean loss to
  /// the step's (on the device), all enqueued on the context's stream; publishes the buckets
  /// during the last micro-step's backward. Throws config_error for T > max_seq_len (bad token
  /// ids are found on the device and reported by step_loss()), cuda_error on CUDA failures.
  void forward_backward(batch_view<device_memory> batch, const micro_step& micro,
                        trainkit::cuda::execution_context& ctx) {
    const bucket_observer none{};
    micro_step_on(batch, micro.grad_scale, micro.first(), micro.last(),
                  micro.last() ? micro.on_bucket : none, ctx.stream());
    step_count_ = micro.count;
  }

  /// The mean of the step's micro-step losses, read from pinned memory: valid once the context
  /// has been synchronised after the last micro-step. Throws config_error when a micro-step of the
  /// step had a token outside [0, vocab_size) (its gradients are then not meaningful).
  double step_loss() const {
    check_flags(host_step_[1], "forward_backward");
    return host_step_[0] / double(std::max(step_count_, 1));
  }

  /// The buckets backward finishes, in that order (Block::gradient_buckets).
  std::span<const gradient_bucket> gradient_buckets() const noexcept { return buckets_; }

  /// One micro-step outside a trainer, on the model's own stream: mean cross-entropy over the
  /// batch's B·T targets, adding grad_scale·∂loss/∂θ to gradients(). Returns with the work done.
  float forward_backward(batch_view<device_memory> batch, float grad_scale) {
    micro_step_on(batch, grad_scale, true, true, bucket_observer{}, stream());
    stream_->synchronize();
    step_count_ = 1;
    return float(step_loss());
  }

  /// Mean cross-entropy over the batch's B·T targets; gradients untouched. Runs on the model's
  /// own stream and returns with the work done (evaluation).
  float forward(batch_view<device_memory> batch) {
    const int B = batch.batch_size, T = batch.seq_len;
    check_batch(batch);
    reserve(B, T);
    const std::size_t N = std::size_t(B) * T;
    const cudaStream_t s = stream();
    const stream_scope scope(*this, s);
    begin_step(s);
    forward_trunk(batch.inputs, B, T);
    kernels::classifier(slot<bf16_t>(plan_.logits), losses(), batch.targets, flags() + 1, int(N),
                        config_.vocab_size, config_.padded_vocab_size, 0.0f,
                        /*backward=*/false, s, logit_cap());
    kernels::accumulate_mean_loss(loss_sums_.data() + 1, losses(), int(N), true, s);
    double out[2];
    enqueue_step_copy(out, loss_sums_.data() + 1, s);
    stream_->synchronize();
    check_flags(out[1], "forward");
    return float(out[0]);
  }

  /// Logits (B·T, Vp) of the last forward() as floats on the host (tests, sampling by a caller),
  /// soft-capped when the block has a logit cap.
  void logits_to_host(std::span<float> out) const {
    const std::size_t n = std::size_t(last_rows_) * config_.padded_vocab_size;
    if (out.size() != n)
      throw config_error(name() + ": logits destination holds " + std::to_string(out.size()) +
                         " floats, the last forward has " + std::to_string(n));
    stream_->synchronize();
    std::vector<trainkit::bf16> host(n);
    trainkit::cuda::copy_to_host(
        std::span<trainkit::bf16>(host),
        reinterpret_cast<const trainkit::bf16*>(slot<bf16_t>(plan_.logits)), stream());
    for (std::size_t i = 0; i < n; ++i) out[i] = host[i].to_float();
    // The logits the loss is of: soft-capped where the block caps them (as transformer_cpu's
    // forward_logits); the device buffer keeps the raw ones the classifier reads.
    if (const float cap = logit_cap(); cap > 0.0f)
      for (float& z : out) z = cap * std::tanh(z / cap);
  }

  /// The tensors a checkpoint must hold: "model.<name>", bf16, in device memory.
  std::vector<state_tensor> state() {
    std::vector<state_tensor> out;
    out.reserve(layout_.size());
    for (const tensor_info& t : layout_) {
      state_tensor st = make_state_tensor(
          "model." + t.name, std::span<trainkit::bf16>(params_.data() + t.offset, t.numel()),
          t.shape);
      st.on_device = true;
      out.push_back(std::move(st));
    }
    return out;
  }

  /// Parameters as floats on the host (tests, export).
  void copy_parameters_to_host(std::span<float> out) const { download(out, params_, "parameters"); }
  /// Gradients as floats on the host (tests).
  void gradients_to_host(std::span<float> out) const { download(out, grads_, "gradients"); }
  /// Replaces the parameters with floats from the host (rounded to bf16).
  void copy_parameters_from_host(std::span<const float> in) { upload_parameters(in); }

 private:
  static std::string name() { return std::string(Block::model_name); }

  static constexpr bool graphs_possible = requires(const options_type& o) {
    { o.cuda_graph } -> std::convertible_to<bool>;
  };
  bool graphs_enabled() const noexcept {
    if constexpr (graphs_possible)
      return options_.cuda_graph;
    else
      return false;
  }

  // Token ids are checked on the device (the embedding's flags, reported after the step).
  void check_batch(const batch_view<device_memory>& b) const {
    detail::check_batch_shape(b.batch_size, b.seq_len, config_.max_seq_len, Block::model_name,
                              Block::config_name);
    detail::check_tokens_given(b.inputs, "input", Block::model_name);
    detail::check_tokens_given(b.targets, "target", Block::model_name);
  }

  void upload_parameters(std::span<const float> in) {
    if (in.size() != params_.size())
      throw config_error(name() + ": " + std::to_string(in.size()) + " parameters given, " +
                         std::to_string(params_.size()) + " expected");
    std::vector<trainkit::bf16> host(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) host[i] = trainkit::bf16::from_float(in[i]);
    trainkit::cuda::copy_to_device(params_.data(), std::span<const trainkit::bf16>(host),
                                   stream());  // ordered before the model's kernels
  }

  void download(std::span<float> out, const trainkit::cuda::device_buffer<trainkit::bf16>& src,
                const char* what) const {
    if (out.size() != src.size())
      throw config_error(name() + ": " + what + " destination holds " + std::to_string(out.size()) +
                         " floats, the model has " + std::to_string(src.size()));
    stream_->synchronize();
    std::vector<trainkit::bf16> host(src.size());
    trainkit::cuda::copy_to_host(std::span<trainkit::bf16>(host), src.data(), stream());
    for (std::size_t i = 0; i < host.size(); ++i) out[i] = host[i].to_float();
  }

  template <class T>
  T* slot(const arena_slot& s) const noexcept {
    return reinterpret_cast<T*>(const_cast<std::byte*>(arena_.data()) + s.offset);
  }
  float* losses() const noexcept { return slot<float>(plan_.losses); }
  // The step's bad-token flags: [0] input, [1] target. Their own buffer, not the arena: reserve()
  // may grow (reallocate) the arena in a later micro-step, which would lose the earlier ones'.
  int* flags() const noexcept { return const_cast<int*>(flags_.data()); }
  bf16_t* param(tensor_id id) noexcept {
    return kernels::as_device_bf16(params_.data() + offsets_[std::size_t(id)]);
  }
  bf16_t* grad(tensor_id id) noexcept {
    return kernels::as_device_bf16(grads_.data() + offsets_[std::size_t(id)]);
  }

  pass_type pass(int B, int T) noexcept {
    return pass_type{plan_,
                     arena_.data(),
                     params_.data(),
                     grads_.data(),
                     offsets_.data(),
                     *blas_,
                     cudnn_.get(),
                     options_.attention,
                     flags(),
                     work(),
                     B,
                     T};
  }

  // The stream the private launch code enqueues on: the context's during the protocol, the
  // model's own otherwise. A scope, so an exception cannot leave it pointing at a context.
  class stream_scope {
   public:
    stream_scope(transformer_cuda& m, cudaStream_t s) : m_(m), saved_(m.work_) { m_.work_ = s; }
    ~stream_scope() { m_.work_ = saved_; }
    stream_scope(const stream_scope&) = delete;
    stream_scope& operator=(const stream_scope&) = delete;

   private:
    transformer_cuda& m_;
    cudaStream_t saved_;
  };
  cudaStream_t work() const noexcept { return work_ ? work_ : stream_->get(); }

  void micro_step_on(batch_view<device_memory> batch, float grad_scale, bool first, bool last,
                     const bucket_observer& on_bucket, cudaStream_t s) {
    const int B = batch.batch_size, T = batch.seq_len;
    check_batch(batch);
    reserve(B, T);
    const stream_scope scope(*this, s);
    // Bad-token flags collect over the step's micro-steps: cleared only on the first.
    if (first) begin_step(s);
    if (graphs_enabled() && warmed(B, T)) {
      replay_micro_step(batch, grad_scale, first, on_bucket, s);
    } else {
      micro_step_kernels(batch.inputs, batch.targets, B, T, grad_scale, first, on_bucket);
      if (graphs_enabled()) warmed_.push_back({B, T});
    }
    if (last) enqueue_step_copy(host_step_.data(), loss_sums_.data(), s);
  }

  // Forward, loss and backward of one micro-step, enqueued on work(): the part a graph captures.
  // restart: the loss sum starts from this micro-step's mean instead of adding to it.
  void micro_step_kernels(const std::int32_t* inputs, const std::int32_t* targets, int B, int T,
                          float grad_scale, bool restart, const bucket_observer& on_bucket) {
    const std::size_t N = std::size_t(B) * T;
    const cudaStream_t s = work();
    forward_trunk(inputs, B, T);
    kernels::classifier(slot<bf16_t>(plan_.logits), losses(), targets, flags() + 1, int(N),
                        config_.vocab_size, config_.padded_vocab_size, grad_scale / float(N),
                        /*backward=*/true, s, logit_cap());
    kernels::accumulate_mean_loss(loss_sums_.data(), losses(), int(N), restart, s);
    backward_trunk(inputs, B, T, on_bucket);
  }

  // The block's logit soft-cap (cap·tanh(logits/cap) inside the classifier's cross-entropy), 0
  // (off, today's bits) for blocks without one.
  float logit_cap() const {
    if constexpr (requires { Block::logit_cap(config_); })
      return Block::logit_cap(config_);
    else
      return 0.0f;
  }

  // The layers, then the head: logits (N, Vp) = lnf · headᵀ.
  void forward_trunk(const std::int32_t* inputs, int B, int T) {
    const pass_type p = pass(B, T);
    block_->embed(p, inputs);
    for (int l = 0; l < config_.num_layers; ++l) block_->forward_layer(p, l);
    p.linear_forward(slot<bf16_t>(plan_.logits), slot<bf16_t>(plan_.lnf), param(head_), B * T,
                     config_.channels, config_.padded_vocab_size);
    last_rows_ = B * T;
  }

  // The head's backward (dhead += dlogitsᵀ · lnf, dlnf = dlogits · head; the classifier left
  // dlogits in the logits buffer), then the layers', publishing each bucket as it is final.
  void backward_trunk(const std::int32_t* inputs, int B, int T, const bucket_observer& on_bucket) {
    const pass_type p = pass(B, T);
    const int L = config_.num_layers;
    p.linear_backward(slot<bf16_t>(plan_.dln), grad(head_), slot<bf16_t>(plan_.logits),
                      slot<bf16_t>(plan_.lnf), param(head_), B * T, config_.channels,
                      config_.padded_vocab_size);
    block_->backward_final(p);
    on_bucket(0);  // the final norm (and an untied head)
    for (int l = L - 1; l >= 0; --l) {
      block_->backward_layer(p, l);
      on_bucket(transformer_layer_bucket(L, l));
    }
    block_->backward_embed(p, inputs);
    on_bucket(transformer_embedding_bucket(L));
  }

  // ---- CUDA graphs (options_.cuda_graph) ----

  // A graph of the micro-step's kernels, cut after each published bucket: bucket < 0 for the
  // piece after the last one (or the whole micro-step when nothing is published).
  struct graph_piece {
    kernels::graph_exec exec;
    std::ptrdiff_t bucket = -1;
  };
  struct captured_micro_step {
    int B = 0, T = 0;
    std::uint32_t grad_scale_bits = 0;  // the classifier's scale is a kernel argument
    bool publishes = false;             // cut at the buckets (the step's last micro-step)
    const void* attention_workspace = nullptr;
    std::vector<graph_piece> pieces;
  };
  // Every grad_scale is its own graph; a caller that changes it each step would fill the device
  // with graphs without this bound (the trainer's is constant: 1/(micro-batches × ranks)).
  static constexpr std::size_t max_graphs = 8;

  bool warmed(int B, int T) const noexcept {
    return std::find(warmed_.begin(), warmed_.end(), std::array<int, 2>{B, T}) != warmed_.end();
  }

  // The arena's fixed token buffers: graphs read the batch from here, whatever slot it came in.
  std::int32_t* graph_inputs() noexcept { return graph_tokens_.data(); }
  std::int32_t* graph_targets() noexcept {
    return graph_tokens_.data() + std::size_t(arena_batch_) * arena_seq_;
  }

  const void* attention_workspace() const noexcept {
    return cudnn_ ? cudnn_->workspace() : nullptr;
  }

  void replay_micro_step(batch_view<device_memory> batch, float grad_scale, bool first,
                         const bucket_observer& on_bucket, cudaStream_t s) {
    const int B = batch.batch_size, T = batch.seq_len;
    const std::size_t bytes = std::size_t(B) * T * sizeof(std::int32_t);
    const captured_micro_step& g = graph_for(B, T, grad_scale, on_bucket.ready != nullptr);
    // Stream order: the batch is complete on `s` (the protocol's contract), and the prefetcher
    // reuses its slot only after work enqueued on `s` from here on.
    TRAINKIT_CUDA_CHECK(
        cudaMemcpyAsync(graph_inputs(), batch.inputs, bytes, cudaMemcpyDeviceToDevice, s));
    TRAINKIT_CUDA_CHECK(
        cudaMemcpyAsync(graph_targets(), batch.targets, bytes, cudaMemcpyDeviceToDevice, s));
    // The graph always adds its mean: the step's first micro-step starts from 0 (0 + m == m).
    if (first) TRAINKIT_CUDA_CHECK(cudaMemsetAsync(loss_sums_.data(), 0, sizeof(double), s));
    for (const graph_piece& p : g.pieces) {
      p.exec.launch(s);
      if (p.bucket >= 0) on_bucket(std::size_t(p.bucket));
    }
    ++graph_replays_;
  }

  const captured_micro_step& graph_for(int B, int T, float grad_scale, bool publishes) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(grad_scale);
    for (auto it = graphs_.begin(); it != graphs_.end(); ++it) {
      if (it->B != B || it->T != T || it->grad_scale_bits != bits || it->publishes != publishes)
        continue;
      if (it->attention_workspace == attention_workspace()) return *it;
      graphs_.erase(it);  // cuDNN's workspace moved (a new shape needed more): capture again
      break;
    }
    if (graphs_.size() >= max_graphs) graphs_.erase(graphs_.begin());
    captured_micro_step c;
    c.B = B, c.T = T, c.grad_scale_bits = bits, c.publishes = publishes;
    c.attention_workspace = attention_workspace();
    try {
      capture(c, grad_scale);
    } catch (const cuda_error& e) {
      throw cuda_error(name() + ": capturing the micro-step (B=" + std::to_string(B) +
                           ", T=" + std::to_string(T) + ") as a CUDA graph failed: " + e.what() +
                           " (cuda_graph = false runs it eagerly)",
                       e.code());
    }
    graphs_.push_back(std::move(c));
    ++graph_captures_;
    return graphs_.back();
  }

  // Records the micro-step's kernels on the private capture stream (its launches do not run).
  // Legal during capture because this shape already ran eagerly: every GEMM shape has its
  // algorithm, cuDNN its graphs and workspace, CUB its scratch, the arena its size — nothing in
  // here allocates, synchronises or reads a device value on the host.
  void capture(captured_micro_step& c, float grad_scale) {
    struct cutter {
      captured_micro_step* out;
      cudaStream_t stream;
      std::optional<kernels::stream_capture> open;
      static void ready(void* self, std::size_t bucket) {
        auto& me = *static_cast<cutter*>(self);
        me.out->pieces.push_back({me.open->end(), std::ptrdiff_t(bucket)});
        me.open.reset();
        me.open.emplace(me.stream);
      }
    };
    const cudaStream_t cs = capture_stream_->get();
    const stream_scope scope(*this, cs);
    cutter cut{&c, cs, std::nullopt};
    cut.open.emplace(cs);
    const bucket_observer observer =
        c.publishes ? bucket_observer{&cut, &cutter::ready} : bucket_observer{};
    micro_step_kernels(graph_inputs(), graph_targets(), c.B, c.T, grad_scale, /*restart=*/false,
                       observer);
    graph_piece tail{cut.open->end(), -1};
    cut.open.reset();
    if (tail.exec.nodes() > 0) c.pieces.push_back(std::move(tail));
  }

  void begin_step(cudaStream_t s) {
    TRAINKIT_CUDA_CHECK(cudaMemsetAsync(flags(), 0, 2 * sizeof(int), s));
  }

  // {loss sum, flags} to `out` (pinned or pageable host memory): the double, then the two int
  // flags packed into the second double's bytes.
  void enqueue_step_copy(double* out, const double* loss_sum, cudaStream_t s) {
    TRAINKIT_CUDA_CHECK(cudaMemcpyAsync(out, loss_sum, sizeof(double), cudaMemcpyDeviceToHost, s));
    TRAINKIT_CUDA_CHECK(
        cudaMemcpyAsync(out + 1, flags(), 2 * sizeof(int), cudaMemcpyDeviceToHost, s));
  }

  void check_flags(double packed, const char* who) const {
    int bad[2];
    std::memcpy(bad, &packed, sizeof(bad));
    if (bad[0] || bad[1])
      throw config_error(name() + "::" + who + ": " + (bad[0] ? "input" : "target") +
                         " token outside [0, vocab_size=" + std::to_string(config_.vocab_size) +
                         ")");
  }

  config_type config_;
  options_type options_;
  std::vector<tensor_info> layout_;
  std::vector<gradient_bucket> buckets_;
  std::array<std::size_t, std::size_t(tensor_id::tensor_count)> offsets_{};
  tensor_id head_{};
  std::string device_name_;
  std::unique_ptr<trainkit::cuda::stream> stream_;
  std::unique_ptr<trainkit::linalg::matmul_context> blas_;
  std::unique_ptr<trainkit::cuda::stream> capture_stream_;  // cuda_graph only; never runs work
  std::unique_ptr<kernels::attention_engine> cudnn_;        // attention=cudnn only
  std::optional<Block> block_;  // after the stream: its constructor may upload tables on it
  trainkit::cuda::device_buffer<trainkit::bf16> params_;
  trainkit::cuda::device_buffer<trainkit::bf16> grads_;
  trainkit::cuda::device_buffer<std::byte> arena_;
  plan_type plan_;
  int arena_batch_ = 0, arena_seq_ = 0;
  int last_rows_ = 0;                                // rows of the last forward's logits
  trainkit::cuda::device_buffer<double> loss_sums_;  // (2,) Σ micro-step mean losses; forward()'s
  trainkit::cuda::device_buffer<int> flags_;         // (2,) see flags()
  trainkit::cuda::pinned_buffer<double> host_step_;  // (2,) the step's sum, its bad-token flags
  int step_count_ = 1;                               // micro-steps of the step being read
  cudaStream_t work_ = nullptr;                      // see stream_scope
  std::vector<captured_micro_step> graphs_;          // cuda_graph: at most max_graphs
  std::vector<std::array<int, 2>> warmed_;           // (B, T) run eagerly on this arena
  trainkit::cuda::device_buffer<std::int32_t> graph_tokens_;  // inputs, then targets
  int graph_captures_ = 0, graph_replays_ = 0;
};

}  // namespace trainkit::model
