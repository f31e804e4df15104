// trainkit/model/llama/cuda.hpp — the CUDA Llama-style model (bf16 weights and activations, fp32
// accumulation, cuBLASLt matmuls), a trainkit::model::model in device memory.
//
// The network, parameter layout (with roles), initialisation and gradient buckets of
// llama/config.hpp / llama/cpu.hpp: token embedding, pre-RMSNorm blocks (fused q|k|v projection,
// optional QK-norm, RoPE, grouped-query causal attention, output projection; SwiGLU or ReLU² MLP),
// final RMSNorm, untied or tied head. A model of one seed starts from llama_cpu's weights rounded
// to bf16. Everything that is not Llama-specific is gpt2_cuda's, reused as it is: the cuBLASLt
// matmul context (with autotuning), the attention engines (flash_attention.cuh and cuDNN through
// attention_engine.hpp, both with GQA), the fused classifier, the device token buckets for the
// embedding gradient, the loss accumulation and the step protocol's synchronisation contract
// (zero_grad and forward_backward only enqueue work on the context's stream; the loss and the
// bad-token flags are copied to pinned memory on the last micro-step and read by step_loss()
// after the trainer synchronised; buckets are published right after the last kernel writing them
// is enqueued). The Llama kernels (rmsnorm.cuh with the residual add fused, rope.cuh,
// gated_mlp.cuh) are tested against CPU twins (detail/llama_cuda_twins.hpp).
//
// Not offered here (gpt2_cuda has them): activation recomputation, CUDA graphs, the naive
// attention (GQA lives in flash and cuDNN only; flash or cuDNN keep no T×T matrix) and the atomic
// embedding backward. Gradients are bf16, one rounding per element per micro-batch, as gpt2_cuda's
// (docs/cuda.md, "Precision"). Activations live in one arena (model/llama/cuda_memory.hpp).
// Needs nvcc (the kernels are in the included headers); link trainkit::cuda.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
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
#include "trainkit/model/cuda/encoder.cuh"
#include "trainkit/model/cuda/flash_attention.cuh"
#include "trainkit/model/cuda/gated_mlp.cuh"
#include "trainkit/model/llama/cuda_memory.hpp"
#include "trainkit/model/cuda/loss_sum.cuh"
#include "trainkit/model/cuda/rmsnorm.cuh"
#include "trainkit/model/cuda/rope.cuh"
#include "trainkit/model/cuda/token_buckets.cuh"
#include "trainkit/model/llama/init.hpp"
#include "trainkit/model/detail/rope_table.hpp"
#include "trainkit/model/llama/config.hpp"

namespace trainkit::model {

/// Run-time choices of the CUDA Llama.
struct llama_cuda_options {
  /// Arena shape to reserve up front; 0 = sized by the first batch (a larger one grows it).
  int batch_size = 0;
  int seq_len = 0;
  /// flash (trainkit's kernels, head sizes 64 and 128) or cudnn (cudnn_attention.hpp compiled
  /// into the program); naive is refused: its kernels have no GQA.
  gpt2_attention attention = gpt2_attention::flash;
  /// The same bits run to run: cuDNN's deterministic backward, no autotuned GEMM algorithm;
  /// flash (dQ atomics) is refused in this mode.
  bool deterministic = false;
  /// Time cuBLASLt's top algorithms per GEMM shape and keep the fastest (not in deterministic
  /// mode).
  bool gemm_autotune = true;

  friend bool operator==(const llama_cuda_options&, const llama_cuda_options&) = default;
};

/// A host model the CUDA model can copy its shape and weights from (llama_cpu, or anything with a
/// llama_config and float parameters in llama_parameter_layout order).
template <class M>
concept llama_host_weights = requires(const M& m) {
  { m.config() } -> std::convertible_to<llama_config>;
  { m.parameters() } -> std::convertible_to<std::span<const float>>;
};

class llama_cuda {
  using bf16_t = kernels::bf16_t;

 public:
  using memory_space = device_memory;
  using parameter_type = trainkit::bf16;

  /// llama_cpu's initialisation of `seed`, rounded to bf16. Throws config_error or cuda_error.
  llama_cuda(llama_config cfg, std::uint64_t seed, llama_cuda_options opt = {})
      : llama_cuda(cfg, initial_parameters(cfg, seed), opt) {}

  /// The shape and weights of a host model (llama_cpu).
  template <llama_host_weights Host>
  explicit llama_cuda(const Host& host, llama_cuda_options opt = {})
      : llama_cuda(llama_config(host.config()), std::span<const float>(host.parameters()), opt) {}

  /// Weights given as floats in llama_parameter_layout(cfg) order, rounded to bf16.
  llama_cuda(llama_config cfg, std::span<const float> params, llama_cuda_options opt = {})
      : config_(validated(cfg)),
        options_(checked_options(opt, config_)),
        layout_(llama_parameter_layout(config_)),
        buckets_(llama_gradient_buckets(config_)),
        stream_(std::make_unique<trainkit::cuda::stream>()),
        blas_(std::make_unique<trainkit::linalg::matmul_context>()) {
    blas_->set_autotune(options_.gemm_autotune && !options_.deterministic);
    if (params.size() != config_.num_parameters())
      throw config_error("llama_cuda: " + std::to_string(params.size()) +
                         " parameters given, shape " + config_.to_string() + " has " +
                         std::to_string(config_.num_parameters()));
    if (options_.attention == gpt2_attention::cudnn)
      cudnn_ = kernels::cudnn_attention_factory()(options_.deterministic);
    for (std::size_t i = 0; i < layout_.size(); ++i) offsets_[i] = layout_[i].offset;
    // A tied head is wte: the head's reads and gradient go to wte's offset (as llama_cpu).
    if (config_.tied_embeddings) offsets_[std::size_t(lm_head)] = offsets_[std::size_t(wte)];
    device_name_ = trainkit::cuda::query_device().name;
    params_ = trainkit::cuda::device_buffer<trainkit::bf16>(params.size());
    grads_ = trainkit::cuda::device_buffer<trainkit::bf16>(params.size());
    check_buckets_tile(buckets_, params.size(), "llama_cuda");
    loss_sums_ = trainkit::cuda::device_buffer<double>(2);  // [0] the step's, [1] forward()'s
    host_step_ = trainkit::cuda::pinned_buffer<double>(2);  // {Σ micro-step means, flags}
    upload_rope_table();
    upload_parameters(params);
    zero_grad();
    if (options_.batch_size > 0 && options_.seq_len > 0)
      reserve(options_.batch_size, options_.seq_len);
  }

  llama_cuda(llama_cuda&&) noexcept = default;
  llama_cuda& operator=(llama_cuda&&) noexcept = default;
  llama_cuda(const llama_cuda&) = delete;
  llama_cuda& operator=(const llama_cuda&) = delete;

  const llama_config& config() const noexcept { return config_; }
  const llama_cuda_options& options() const noexcept { return options_; }
  /// The tensors with their roles (embedding, matrix, norm, head), as llama_cpu reports them.
  std::span<const tensor_info> parameter_layout() const noexcept { return layout_; }
  /// Device memory: do not dereference on the host.
  std::span<trainkit::bf16> parameters() noexcept { return params_.device_span(); }
  std::span<trainkit::bf16> gradients() noexcept { return grads_.device_span(); }
  std::size_t num_parameters() const noexcept { return params_.size(); }
  double flops_per_token(int T) const { return config_.flops_per_token(T); }
  const std::string& device_name() const noexcept { return device_name_; }
  cudaStream_t stream() const noexcept { return stream_->get(); }
  int matmul_fallbacks() const noexcept { return blas_->fallbacks(); }

  /// Sizes the activation arena for batches up to (B, T); reallocates only to grow.
  void reserve(int B, int T) {
    if (arena_.size() && B <= arena_batch_ && T <= arena_seq_) return;
    const int nb = std::max(B, arena_batch_), nt = std::max(T, arena_seq_);
    const std::size_t attention_ws =
        cudnn_ ? cudnn_->plan_workspace(nb, nt, config_.channels, config_.num_heads,
                                        config_.num_kv_heads)
               : 0;
    plan_ = plan_llama_cuda_arena(config_, nb, nt, flash(), attention_ws);
    if (cudnn_) cudnn_->use_workspace(nullptr, 0);        // not into the arena about to be freed
    arena_ = trainkit::cuda::device_buffer<std::byte>();  // free first: one arena at a time
    arena_ = trainkit::cuda::device_buffer<std::byte>(plan_.total_bytes);
    if (cudnn_ && attention_ws > 0)
      cudnn_->use_workspace(slot<std::byte>(plan_.attention_workspace), attention_ws);
    token_buckets_.reserve(std::size_t(nb) * nt, config_.vocab_size);
    arena_batch_ = nb;
    arena_seq_ = nt;
  }

  /// Memory by use for the arena's current shape.
  gpt2_cuda_memory_report memory_report() const {
    if (!arena_.size())
      throw config_error("llama_cuda::memory_report: no arena yet (call reserve(B, T) first)");
    gpt2_cuda_memory_report r = llama_cuda_memory(config_, arena_batch_, arena_seq_, flash(),
                                                  plan_.attention_workspace.bytes);
    if (cudnn_) r.workspace += cudnn_->own_workspace_bytes();
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
  /// the step's (on the device), enqueued on the context's stream; publishes the buckets during
  /// the last micro-step's backward. Bad token ids are found on the device and reported by
  /// step_loss().
  void forward_backward(batch_view<device_memory> batch, const micro_step& micro,
                        trainkit::cuda::execution_context& ctx) {
    const bucket_observer none{};
    micro_step_on(batch, micro.grad_scale, micro.first(), micro.last(),
                  micro.last() ? micro.on_bucket : none, ctx.stream());
    step_count_ = micro.count;
  }

  /// The mean of the step's micro-step losses, valid once the context has been synchronised after
  /// the last micro-step. Throws config_error when a token of the step was outside [0, V).
  double step_loss() const {
    check_flags(host_step_[1], "forward_backward");
    return host_step_[0] / double(std::max(step_count_, 1));
  }

  /// The buckets backward finishes, in that order: llama_gradient_buckets(config()).
  std::span<const gradient_bucket> gradient_buckets() const noexcept { return buckets_; }

  /// One micro-step outside a trainer, on the model's own stream; returns with the work done.
  float forward_backward(batch_view<device_memory> batch, float grad_scale) {
    micro_step_on(batch, grad_scale, true, true, bucket_observer{}, stream());
    stream_->synchronize();
    step_count_ = 1;
    return float(step_loss());
  }

  /// Mean cross-entropy over the batch's B·T targets; gradients untouched. On the model's own
  /// stream, returns with the work done.
  float forward(batch_view<device_memory> batch) {
    const int B = batch.batch_size, T = batch.seq_len;
    check_batch(batch);
    reserve(B, T);
    const std::size_t N = std::size_t(B) * T;
    const cudaStream_t s = stream();
    const stream_scope scope(*this, s);
    begin_step(N, s);
    forward_trunk(batch.inputs, B, T);
    kernels::classifier(slot<bf16_t>(plan_.logits), losses(), batch.targets, flags() + 1, int(N),
                        config_.vocab_size, config_.padded_vocab_size, 0.0f,
                        /*backward=*/false, s);
    kernels::accumulate_mean_loss(loss_sums_.data() + 1, losses(), int(N), true, s);
    double out[2];
    enqueue_step_copy(out, loss_sums_.data() + 1, s);
    stream_->synchronize();
    check_flags(out[1], "forward");
    return float(out[0]);
  }

  /// Logits (B·T, Vp) of the last forward() as floats on the host (tests, sampling by a caller).
  void logits_to_host(std::span<float> out) const {
    const std::size_t n = std::size_t(last_rows_) * config_.padded_vocab_size;
    if (out.size() != n)
      throw config_error("llama_cuda: logits destination holds " + std::to_string(out.size()) +
                         " floats, the last forward has " + std::to_string(n));
    stream_->synchronize();
    std::vector<trainkit::bf16> host(n);
    trainkit::cuda::copy_to_host(
        std::span<trainkit::bf16>(host),
        reinterpret_cast<const trainkit::bf16*>(slot<bf16_t>(plan_.logits)), stream());
    for (std::size_t i = 0; i < n; ++i) out[i] = host[i].to_float();
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
  using enum llama_tensor;

  static_assert(trainkit::linalg::matmul_context::workspace_bytes ==
                gpt2_cuda_cublas_workspace_bytes);

  static std::vector<float> initial_parameters(const llama_config& cfg, std::uint64_t seed) {
    cfg.validate();
    std::vector<float> p(cfg.num_parameters());
    detail::llama_initialize(cfg, seed, std::span<float>(p));
    return p;
  }

  // The shape the kernels can run, each refusal naming the llama_config field.
  static llama_config validated(const llama_config& cfg) {
    cfg.validate();
    auto fail = [](const char* field, const std::string& why) {
      throw config_error(std::string("llama_cuda: llama_config.") + field + " " + why);
    };
    if (cfg.channels % 8 != 0)
      fail("channels",
           std::to_string(cfg.channels) + " must be a multiple of 8 (16-byte vector accesses)");
    if (cfg.head_size() % 16 != 0)
      fail("channels", "/ num_heads = head size " + std::to_string(cfg.head_size()) +
                           " must be a multiple of 16 (rope.cuh rotates 8 pairs a thread)");
    if (cfg.qk_norm && cfg.head_size() > 256)
      fail("qk_norm",
           "needs head size at most 256 (head_rmsnorm), got " + std::to_string(cfg.head_size()));
    if (cfg.hidden_size % 8 != 0)
      fail("hidden_size", std::to_string(cfg.hidden_size) + " must be a multiple of 8");
    return cfg;
  }

  // Checked before any device work, so a bad choice is reported on a machine without a GPU too.
  static llama_cuda_options checked_options(const llama_cuda_options& opt,
                                            const llama_config& cfg) {
    const int hs = cfg.head_size();
    switch (opt.attention) {
      case gpt2_attention::naive:
        throw config_error(
            "llama_cuda_options.attention = naive: the naive attention kernels have no grouped "
            "queries; use flash or cudnn");
      case gpt2_attention::flash:
        if (hs != 64 && hs != 128)
          throw config_error(
              "llama_cuda_options.attention = flash needs head size 64 or 128, "
              "shape " +
              cfg.to_string() + " has " + std::to_string(hs));
        if (opt.deterministic)
          throw config_error(
              "llama_cuda_options.attention = flash is not bit-reproducible (dQ atomics); set "
              "deterministic = false or use attention = cudnn");
        return opt;
      case gpt2_attention::cudnn:
        if (!kernels::cudnn_attention_factory())
          throw config_error(
              "llama_cuda_options.attention = cudnn, but this program has no cuDNN attention: "
              "compile <trainkit/model/cuda/cudnn_attention.hpp> into one of its .cpp files and "
              "link trainkit::cudnn");
        return opt;
    }
    throw config_error("llama_cuda_options.attention: unknown choice " +
                       std::to_string(int(opt.attention)));
  }

  bool flash() const noexcept { return options_.attention == gpt2_attention::flash; }

  void check_batch(const batch_view<device_memory>& b) const {
    if (b.batch_size <= 0 || b.seq_len <= 0 || b.seq_len > config_.max_seq_len)
      throw config_error("llama_cuda: batch shape B=" + std::to_string(b.batch_size) +
                         " T=" + std::to_string(b.seq_len) + " is empty or exceeds max_seq_len " +
                         std::to_string(config_.max_seq_len));
    if (!b.inputs || !b.targets)
      throw config_error("llama_cuda: the batch has no input or target tokens");
  }

  void upload_rope_table() {
    const detail::rope_table table(config_.max_seq_len, config_.head_size(), config_.rope_theta);
    rope_cos_ = trainkit::cuda::device_buffer<float>(table.cos.size());
    rope_sin_ = trainkit::cuda::device_buffer<float>(table.sin.size());
    trainkit::cuda::copy_to_device(rope_cos_.data(), std::span<const float>(table.cos), stream());
    trainkit::cuda::copy_to_device(rope_sin_.data(), std::span<const float>(table.sin), stream());
    rope_ = kernels::rope_device_table{rope_cos_.data(), rope_sin_.data(), table.T, table.half};
  }

  void upload_parameters(std::span<const float> in) {
    if (in.size() != params_.size())
      throw config_error("llama_cuda: " + std::to_string(in.size()) + " parameters given, " +
                         std::to_string(params_.size()) + " expected");
    std::vector<trainkit::bf16> host(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) host[i] = trainkit::bf16::from_float(in[i]);
    trainkit::cuda::copy_to_device(params_.data(), std::span<const trainkit::bf16>(host), stream());
  }

  void download(std::span<float> out, const trainkit::cuda::device_buffer<trainkit::bf16>& src,
                const char* what) const {
    if (out.size() != src.size())
      throw config_error(std::string("llama_cuda: ") + what + " destination holds " +
                         std::to_string(out.size()) + " floats, the model has " +
                         std::to_string(src.size()));
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
  // Flags after the N losses: [0] bad input token, [1] bad target.
  int* flags() const noexcept { return reinterpret_cast<int*>(losses() + step_rows_); }
  bf16_t* param(llama_tensor id) noexcept {
    return kernels::as_device_bf16(params_.data() + offsets_[std::size_t(id)]);
  }
  bf16_t* grad(llama_tensor id) noexcept {
    return kernels::as_device_bf16(grads_.data() + offsets_[std::size_t(id)]);
  }

  // The stream the private launch code enqueues on: the context's during the protocol, the
  // model's own otherwise (gpt2_cuda's stream_scope).
  class stream_scope {
   public:
    stream_scope(llama_cuda& m, cudaStream_t s) : m_(m), saved_(m.work_) { m_.work_ = s; }
    ~stream_scope() { m_.work_ = saved_; }
    stream_scope(const stream_scope&) = delete;
    stream_scope& operator=(const stream_scope&) = delete;

   private:
    llama_cuda& m_;
    cudaStream_t saved_;
  };
  cudaStream_t work() const noexcept { return work_ ? work_ : stream_->get(); }

  void micro_step_on(batch_view<device_memory> batch, float grad_scale, bool first, bool last,
                     const bucket_observer& on_bucket, cudaStream_t s) {
    const int B = batch.batch_size, T = batch.seq_len;
    check_batch(batch);
    reserve(B, T);
    const stream_scope scope(*this, s);
    const std::size_t N = std::size_t(B) * T;
    if (first) begin_step(N, s);  // bad-token flags collect over the step's micro-steps
    step_rows_ = N;
    forward_trunk(batch.inputs, B, T);
    kernels::classifier(slot<bf16_t>(plan_.logits), losses(), batch.targets, flags() + 1, int(N),
                        config_.vocab_size, config_.padded_vocab_size, grad_scale / float(N),
                        /*backward=*/true, s);
    kernels::accumulate_mean_loss(loss_sums_.data(), losses(), int(N), first, s);
    backward_trunk(batch.inputs, B, T, on_bucket);
    if (last) enqueue_step_copy(host_step_.data(), loss_sums_.data(), s);
  }

  void begin_step(std::size_t N, cudaStream_t s) {
    step_rows_ = N;
    TRAINKIT_CUDA_CHECK(cudaMemsetAsync(flags(), 0, 2 * sizeof(int), s));
  }

  void enqueue_step_copy(double* out, const double* loss_sum, cudaStream_t s) {
    TRAINKIT_CUDA_CHECK(cudaMemcpyAsync(out, loss_sum, sizeof(double), cudaMemcpyDeviceToHost, s));
    TRAINKIT_CUDA_CHECK(
        cudaMemcpyAsync(out + 1, flags(), 2 * sizeof(int), cudaMemcpyDeviceToHost, s));
  }

  void check_flags(double packed, const char* who) const {
    int bad[2];
    std::memcpy(bad, &packed, sizeof(bad));
    if (bad[0] || bad[1])
      throw config_error(std::string("llama_cuda::") + who + ": " + (bad[0] ? "input" : "target") +
                         " token outside [0, vocab_size=" + std::to_string(config_.vocab_size) +
                         ")");
  }

  // out (N, OC) = inp (N, IC) · wᵀ (no bias anywhere in the family).
  void linear_forward(bf16_t* out, const bf16_t* inp, const bf16_t* w, int N, int IC, int OC) {
    trainkit::linalg::matmul_arguments x;
    x.a = inp, x.lda = IC;
    x.b = w, x.trans_b = true, x.ldb = IC;
    x.d = out, x.ldd = OC;
    x.m = N, x.n = OC, x.k = IC;
    blas_->run(x, work());
  }

  // dinp (N, IC) = dout · w (assigned); dw (OC, IC) += doutᵀ · inp.
  void linear_backward(bf16_t* dinp, bf16_t* dw, const bf16_t* dout, const bf16_t* inp,
                       const bf16_t* w, int N, int IC, int OC) {
    trainkit::linalg::matmul_arguments gw;
    gw.a = dout, gw.trans_a = true, gw.lda = OC;
    gw.b = inp, gw.ldb = IC;
    gw.d = dw, gw.ldd = IC;
    gw.m = OC, gw.n = IC, gw.k = N;
    gw.beta = 1.0f;
    blas_->run(gw, work());
    trainkit::linalg::matmul_arguments gi;
    gi.a = dout, gi.lda = OC;
    gi.b = w, gi.ldb = IC;
    gi.d = dinp, gi.ldd = IC;
    gi.m = N, gi.n = IC, gi.k = OC;
    blas_->run(gi, work());
  }

  struct layer_views {
    bf16_t *ln1, *qkvr, *atty, *res2, *ln2, *fc, *fc_act, *res3;
    float *ln1_rstd, *qk_rstd, *lse, *ln2_rstd;
  };

  // Layer l's kept tensors for a batch of (B, T): llama_cuda_layer (llama/cuda_memory.hpp, tested
  // on the CPU: inside their slots, disjoint across layers).
  layer_views layer(int l, int B, int T) const {
    const llama_cuda_layer_slots ls = llama_cuda_layer(plan_, config_, B, T, l);
    layer_views v;
    v.ln1 = slot<bf16_t>(ls.ln1);
    v.qkvr = slot<bf16_t>(ls.qkvr);
    v.atty = slot<bf16_t>(ls.atty);
    v.res2 = slot<bf16_t>(ls.res2);
    v.ln2 = slot<bf16_t>(ls.ln2);
    v.fc = slot<bf16_t>(ls.fc);
    v.fc_act = slot<bf16_t>(ls.fc_act);
    v.res3 = slot<bf16_t>(ls.res3);
    v.ln1_rstd = slot<float>(ls.ln1_rstd);
    v.qk_rstd = config_.qk_norm ? slot<float>(ls.qk_rstd) : nullptr;
    v.lse = slot<float>(ls.lse);
    v.ln2_rstd = slot<float>(ls.ln2_rstd);
    return v;
  }

  void attention_forward(const layer_views& v, int B, int T, cudaStream_t s) {
    const int C = config_.channels, H = config_.num_heads, KV = config_.num_kv_heads;
    if (flash())
      kernels::flash_attention_forward(v.atty, v.lse, v.qkvr, B, T, C, H, KV, s);
    else
      cudnn_->forward(v.atty, v.lse, v.qkvr, B, T, C, H, KV, s);
  }

  void attention_backward(const layer_views& v, bf16_t* dqkv, const bf16_t* datty, int B, int T,
                          cudaStream_t s) {
    const int C = config_.channels, H = config_.num_heads, KV = config_.num_kv_heads;
    if (flash())
      kernels::flash_attention_backward(dqkv, slot<float>(plan_.att_delta),
                                        slot<float>(plan_.dq_accum), datty, v.qkvr, v.atty, v.lse,
                                        B, T, C, H, KV, s);
    else
      cudnn_->backward(dqkv, datty, v.qkvr, v.atty, v.lse, B, T, C, H, KV, s);
  }

  void forward_trunk(const std::int32_t* inputs, int B, int T) {
    const int C = config_.channels, L = config_.num_layers, H = config_.num_heads,
              KV = config_.num_kv_heads, hs = config_.head_size(), D = config_.qkv_rows(),
              R = config_.fc_rows(), F = config_.hidden_size;
    const int N = B * T;
    const float eps = config_.norm_eps;
    const cudaStream_t s = work();
    bf16_t* encoded = slot<bf16_t>(plan_.encoded);
    bf16_t* proj = slot<bf16_t>(plan_.proj);
    kernels::encoder_forward(encoded, inputs, param(wte), nullptr, flags(), B, T, C,
                             config_.vocab_size, s);
    {
      const layer_views v0 = layer(0, B, T);
      kernels::rmsnorm_forward(nullptr, v0.ln1, v0.ln1_rstd, encoded, nullptr, param(ln1w), N, C,
                               eps, s);
    }
    for (int l = 0; l < L; ++l) {
      const layer_views v = layer(l, B, T);
      const bf16_t* x = l == 0 ? encoded : layer(l - 1, B, T).res3;  // (N, C)
      const std::size_t lc = std::size_t(l) * C;
      // q | k | v straight into the kept buffer; QK-norm and RoPE in place; attention reads it.
      linear_forward(v.qkvr, v.ln1, param(qkvw) + lc * D, N, C, D);
      if (config_.qk_norm)
        kernels::head_rmsnorm_forward(v.qkvr, v.qk_rstd, N, H + KV, hs, D, eps, s);
      kernels::rope_forward(v.qkvr, rope_, N, T, H, KV, hs, s);
      attention_forward(v, B, T, s);
      linear_forward(proj, v.atty, param(attprojw) + lc * C, N, C, C);
      kernels::rmsnorm_forward(v.res2, v.ln2, v.ln2_rstd, x, proj, param(ln2w) + lc, N, C, eps,
                               s);  // res2 = x + proj, ln2 = RMSNorm(res2)
      linear_forward(v.fc, v.ln2, param(fcw) + lc * R, N, C, R);
      if (config_.mlp == llama_mlp::swiglu)
        kernels::swiglu_forward(v.fc_act, v.fc, N, F, s);
      else
        kernels::relu_squared_forward(v.fc_act, v.fc, std::int64_t(N) * F, s);
      linear_forward(proj, v.fc_act, param(fcprojw) + lc * F, N, F, C);
      if (l + 1 < L) {
        const layer_views next = layer(l + 1, B, T);
        kernels::rmsnorm_forward(v.res3, next.ln1, next.ln1_rstd, v.res2, proj,
                                 param(ln1w) + lc + C, N, C, eps, s);
      } else {
        kernels::rmsnorm_forward(v.res3, slot<bf16_t>(plan_.lnf), slot<float>(plan_.lnf_rstd),
                                 v.res2, proj, param(lnfw), N, C, eps, s);
      }
    }
    // Head: logits (N, Vp) = lnf · lm_headᵀ (wte when tied).
    linear_forward(slot<bf16_t>(plan_.logits), slot<bf16_t>(plan_.lnf), param(lm_head), N, C,
                   config_.padded_vocab_size);
    last_rows_ = N;
  }

  void backward_trunk(const std::int32_t* inputs, int B, int T, const bucket_observer& on_bucket) {
    const int C = config_.channels, L = config_.num_layers, H = config_.num_heads,
              KV = config_.num_kv_heads, hs = config_.head_size(), D = config_.qkv_rows(),
              R = config_.fc_rows(), F = config_.hidden_size;
    const int N = B * T;
    const cudaStream_t s = work();
    bf16_t* dres = slot<bf16_t>(plan_.dres);
    bf16_t* dln = slot<bf16_t>(plan_.dln);
    bf16_t* datty = slot<bf16_t>(plan_.datty);
    bf16_t* dqkv = slot<bf16_t>(plan_.dqkv);
    bf16_t* dfc = slot<bf16_t>(plan_.dfc);
    bf16_t* dfc_act = slot<bf16_t>(plan_.dfc_act);
    float* partial = slot<float>(plan_.norm_partial);
    bf16_t* encoded = slot<bf16_t>(plan_.encoded);

    // Head: dlm_head += dlogitsᵀ · lnf, dlnf = dlogits · lm_head (the classifier left dlogits in
    // the logits buffer).
    linear_backward(dln, grad(lm_head), slot<bf16_t>(plan_.logits), slot<bf16_t>(plan_.lnf),
                    param(lm_head), N, C, config_.padded_vocab_size);
    TRAINKIT_CUDA_CHECK(cudaMemsetAsync(dres, 0, std::size_t(N) * C * sizeof(bf16_t), s));
    kernels::rmsnorm_backward(dres, grad(lnfw), partial, dln, layer(L - 1, B, T).res3, param(lnfw),
                              slot<float>(plan_.lnf_rstd), N, C, s);
    on_bucket(0);  // lnfw (+ lm_head)
    for (int l = L - 1; l >= 0; --l) {
      const layer_views v = layer(l, B, T);
      const bf16_t* x = l == 0 ? encoded : layer(l - 1, B, T).res3;
      const std::size_t lc = std::size_t(l) * C;
      // MLP: res3 = res2 + act(ln2 · fcwᵀ) · fcprojwᵀ
      linear_backward(dfc_act, grad(fcprojw) + lc * F, dres, v.fc_act, param(fcprojw) + lc * F, N,
                      F, C);
      if (config_.mlp == llama_mlp::swiglu)
        kernels::swiglu_backward(dfc, v.fc, dfc_act, N, F, s);
      else
        kernels::relu_squared_backward(dfc, v.fc, dfc_act, std::int64_t(N) * F, s);
      linear_backward(dln, grad(fcw) + lc * R, dfc, v.ln2, param(fcw) + lc * R, N, C, R);
      kernels::rmsnorm_backward(dres, grad(ln2w) + lc, partial, dln, v.res2, param(ln2w) + lc,
                                v.ln2_rstd, N, C, s);
      // Attention: res2 = x + attention(rope(qk_norm(ln1 · qkvwᵀ))) · attprojwᵀ
      linear_backward(datty, grad(attprojw) + lc * C, dres, v.atty, param(attprojw) + lc * C, N, C,
                      C);
      attention_backward(v, dqkv, datty, B, T, s);
      // QK-norm's backward in the rotated frame, then the inverse rotation (llama_cpu's order:
      // the parameter-free RMSNorm commutes with the rotation).
      if (config_.qk_norm)
        kernels::head_rmsnorm_backward(dqkv, v.qkvr, v.qk_rstd, N, H + KV, hs, D, s);
      kernels::rope_backward(dqkv, rope_, N, T, H, KV, hs, s);
      linear_backward(dln, grad(qkvw) + lc * D, dqkv, v.ln1, param(qkvw) + lc * D, N, C, D);
      kernels::rmsnorm_backward(dres, grad(ln1w) + lc, partial, dln, x, param(ln1w) + lc,
                                v.ln1_rstd, N, C, s);
      on_bucket(llama_layer_bucket(config_, l));
    }
    // Embedding: fp32 sums per token, one bf16 rounding per element (token_buckets.cuh).
    std::int32_t* packed = slot<std::int32_t>(plan_.buckets);
    token_buckets_.build(packed, inputs, N, config_.vocab_size, s);
    kernels::encoder_backward_buckets(grad(wte), dres, packed, N, C, s);
    on_bucket(llama_embedding_bucket(config_));
  }

  llama_config config_;
  llama_cuda_options options_;
  std::vector<tensor_info> layout_;
  std::vector<gradient_bucket> buckets_;
  std::array<std::size_t, std::size_t(llama_tensor::tensor_count)> offsets_{};
  std::string device_name_;
  std::unique_ptr<trainkit::cuda::stream> stream_;
  std::unique_ptr<trainkit::linalg::matmul_context> blas_;
  std::unique_ptr<kernels::attention_engine> cudnn_;  // attention=cudnn only
  trainkit::cuda::device_buffer<trainkit::bf16> params_;
  trainkit::cuda::device_buffer<trainkit::bf16> grads_;
  trainkit::cuda::device_buffer<float> rope_cos_, rope_sin_;  // (max_T, hs/2)
  kernels::rope_device_table rope_;
  trainkit::cuda::device_buffer<std::byte> arena_;
  llama_cuda_arena_plan plan_;
  int arena_batch_ = 0, arena_seq_ = 0;
  std::size_t step_rows_ = 0;
  int last_rows_ = 0;  // rows of the last forward's logits
  kernels::device_token_buckets token_buckets_;
  trainkit::cuda::device_buffer<double> loss_sums_;  // (2,) Σ micro-step mean losses; forward()'s
  trainkit::cuda::pinned_buffer<double> host_step_;  // (2,) the step's sum, its bad-token flags
  int step_count_ = 1;
  cudaStream_t work_ = nullptr;  // see stream_scope
};

static_assert(model<llama_cuda>, "llama_cuda must satisfy trainkit::model::model");
static_assert(names_its_device<llama_cuda>, "llama_cuda reports its device for the MFU peak");

}  // namespace trainkit::model
