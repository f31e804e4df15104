// trainkit/model/gpt2/cuda.hpp — the fused CUDA GPT-2 (bf16 weights and activations, fp32
// accumulation, cuBLASLt matmuls), a trainkit::model::model in device memory.
//
// The same network, parameter layout and initialisation as gpt2_cpu (llm.c's GPT-2): a model of
// one seed starts from gpt2_cpu's weights rounded to bf16, so the two can be compared layer by
// layer. Parameters and gradients are flat bf16 device buffers in gpt2_parameter_layout order
// (what adamw_cuda and checkpoints walk). Gradients are bf16, as llm.c keeps them: every
// contribution is summed in fp32 inside its kernel or GEMM and rounded once when added, so a
// micro-batch costs one bf16 rounding per gradient element (relative 2⁻⁹); the optimizer is
// expected to keep fp32 master weights. Activations live in one arena sized for (B, T) up front
// (model/gpt2/cuda_memory.hpp; memory_report()).
//
// The step protocol (core/step_protocol.hpp) runs on the trainer's execution context: zero_grad
// and forward_backward only enqueue work on the context's stream — no host synchronisation, the
// loss of each micro-step is added to a device double and copied to pinned memory on the last
// micro-step, and step_loss() reads it after the trainer synchronised the context. Buckets are
// published right after the last kernel writing them is enqueued. The encoder's token buckets (the
// wte gradient's fp32 sums per token) are built on the device too (model/cuda/token_buckets.cuh). The exception: a batch
// shape larger than the arena's reallocates it (cudaMalloc synchronises the device).
// With options.cuda_graph the micro-step's kernels are captured once per (B, T, grad_scale) and
// replayed as one graph (several when buckets are published, one per bucket, so a reducer still
// starts on each as backward finishes it): the batch is first copied into fixed token buffers,
// the step's start (flags, loss sum) and end (the copy to pinned memory) stay outside the graph,
// so the captured work does not depend on the micro-step's index. docs/cuda.md, "CUDA graphs".
// The other public functions (forward, the convenience forward_backward, copies) run on the
// model's own stream and return with their work complete. Batches passed to the protocol must be
// complete in the context's stream order (pinned_prefetcher bound to the context does that).
// Kernels: model/cuda/*.cuh, each with its CPU reference in cpu/kernels.hpp.
// docs/cuda.md describes the memory layout, precision, and the deterministic and recompute modes.
// Needs nvcc (the kernels are in this header); link trainkit::cuda.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
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
#include "trainkit/model/cuda/attention.cuh"
#include "trainkit/model/cuda/attention_engine.hpp"
#include "trainkit/model/cuda/classifier.cuh"
#include "trainkit/model/cuda/cuda_graph.hpp"
#include "trainkit/model/cuda/elementwise.cuh"
#include "trainkit/model/cuda/encoder.cuh"
#include "trainkit/model/cuda/flash_attention.cuh"
#include "trainkit/model/gpt2/cuda_memory.hpp"
#include "trainkit/model/cuda/layernorm.cuh"
#include "trainkit/model/cuda/loss_sum.cuh"
#include "trainkit/model/cuda/token_buckets.cuh"
#include "trainkit/model/detail/batch_checks.hpp"
#include "trainkit/model/gpt2/init.hpp"
#include "trainkit/model/gpt2/config.hpp"

namespace trainkit::model {

/// A host model the CUDA model can copy its shape and weights from (gpt2_cpu, or anything with
/// a gpt2_config and float parameters in gpt2_parameter_layout order).
template <class M>
concept gpt2_host_weights = requires(const M& m) {
  { m.config() } -> std::convertible_to<gpt2_config>;
  { m.parameters() } -> std::convertible_to<std::span<const float>>;
};

class gpt2_cuda {
  using bf16_t = kernels::bf16_t;

 public:
  using memory_space = device_memory;
  using parameter_type = trainkit::bf16;

  /// gpt2_cpu's initialisation of `seed`, rounded to bf16. Throws config_error or cuda_error.
  gpt2_cuda(gpt2_config cfg, std::uint64_t seed, gpt2_cuda_options opt = {})
      : gpt2_cuda(cfg, detail::gpt2_initial_parameters<float>(cfg, seed), opt) {}

  /// The shape and weights of a host model (e.g. gpt2_cpu, or one loaded from an llm.c file).
  template <gpt2_host_weights Host>
  explicit gpt2_cuda(const Host& host, gpt2_cuda_options opt = {})
      : gpt2_cuda(gpt2_config(host.config()), std::span<const float>(host.parameters()), opt) {}

  /// Weights given as floats in gpt2_parameter_layout(cfg) order, rounded to bf16. To start from
  /// an llm.c model file: read_llmc_parameters (gpt2/llmc_file.hpp) into a vector, then this.
  gpt2_cuda(gpt2_config cfg, std::span<const float> params, gpt2_cuda_options opt = {})
      : config_(validated(cfg)),
        options_(checked_options(opt, config_)),
        layout_(gpt2_parameter_layout(config_)),
        buckets_(gpt2_gradient_buckets(config_)),
        stream_(std::make_unique<trainkit::cuda::stream>()),
        blas_(std::make_unique<kernels::matmul_context>()) {
    blas_->set_autotune(options_.gemm_autotune && !options_.deterministic);
    if (params.size() != config_.num_parameters())
      throw config_error("gpt2_cuda: " + std::to_string(params.size()) +
                         " parameters given, shape " + config_.to_string() + " has " +
                         std::to_string(config_.num_parameters()));
    if (options_.attention == gpt2_attention::cudnn)
      cudnn_ = kernels::cudnn_attention_factory()(options_.deterministic);
    for (std::size_t i = 0; i < layout_.size(); ++i) offsets_[i] = layout_[i].offset;
    device_name_ = trainkit::cuda::query_device().name;
    params_ = trainkit::cuda::device_buffer<trainkit::bf16>(params.size());
    grads_ = trainkit::cuda::device_buffer<trainkit::bf16>(params.size());
    check_buckets_tile(buckets_, params.size(), "gpt2_cuda");
    loss_sums_ = trainkit::cuda::device_buffer<double>(2);  // [0] the step's, [1] forward()'s
    host_step_ = trainkit::cuda::pinned_buffer<double>(2);  // {Σ micro-step means, flags}
    if (options_.cuda_graph) capture_stream_ = std::make_unique<trainkit::cuda::stream>(true);
    upload_parameters(params);
    zero_grad();
    if (options_.batch_size > 0 && options_.seq_len > 0)
      reserve(options_.batch_size, options_.seq_len);
  }

  gpt2_cuda(gpt2_cuda&&) noexcept = default;
  gpt2_cuda& operator=(gpt2_cuda&&) noexcept = default;
  gpt2_cuda(const gpt2_cuda&) = delete;
  gpt2_cuda& operator=(const gpt2_cuda&) = delete;

  const gpt2_config& config() const noexcept { return config_; }
  const gpt2_cuda_options& options() const noexcept { return options_; }
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
  const std::vector<kernels::matmul_context::tuning_record>& gemm_tuning() const noexcept {
    return blas_->tuning_log();
  }

  /// mfu_settings.calibrate (trainer/calibrate.hpp): the best of `reps` cuBLASLt bf16 GEMMs of n³ with fp32
  /// accumulation — the model's own matmul path — timed with events on the model's stream. 8192³
  /// is 1.1 TFLOP a repetition: long enough for the clocks to settle, small next to the arena.
  /// Inputs are a constant non-zero byte pattern (0x3c3c ≈ 0.0115): zeros would draw less power and
  /// flatter the rate.
  gemm_calibration calibrate_gemm(int n = 8192, int reps = 5) {
    if (n <= 0 || reps <= 0)
      throw config_error("calibrate_gemm: n and reps must be positive (" + std::to_string(n) +
                         ", " + std::to_string(reps) + ")");
    const std::size_t elems = std::size_t(n) * std::size_t(n);
    trainkit::cuda::device_buffer<kernels::bf16_t> a(elems), b(elems), d(elems);
    a.fill_bytes_async(0x3c, stream());
    b.fill_bytes_async(0x3c, stream());
    kernels::matmul_arguments x;
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
        cudnn_
            ? cudnn_->plan_workspace(nb, nt, config_.channels, config_.num_heads, config_.num_heads)
            : 0;
    plan_ = plan_gpt2_cuda_arena(config_, nb, nt, options_.recompute, options_.attention,
                                 attention_ws);
    if (cudnn_) cudnn_->use_workspace(nullptr, 0);  // not into the arena about to be freed
    arena_ = trainkit::cuda::device_buffer<std::byte>();  // free first: peak memory stays one arena
    arena_ = trainkit::cuda::device_buffer<std::byte>(plan_.total_bytes);
    if (cudnn_ && attention_ws > 0)
      cudnn_->use_workspace(slot<std::byte>(plan_.attention_workspace), attention_ws);
    if (!options_.embedding_atomics)
      token_buckets_.reserve(std::size_t(nb) * nt, config_.vocab_size);
    // Captured graphs hold the old arena's addresses (a new arena may even reuse them with a
    // different layout): every shape runs eagerly once more, then is captured again.
    graphs_.clear();
    warmed_.clear();
    if (options_.cuda_graph)
      graph_tokens_ = trainkit::cuda::device_buffer<std::int32_t>(2 * std::size_t(nb) * nt);
    arena_batch_ = nb;
    arena_seq_ = nt;
  }

  /// Memory by use for the arena's current shape (or for (B, T) when no arena exists yet).
  gpt2_cuda_memory_report memory_report() const {
    if (!arena_.size())
      throw config_error("gpt2_cuda::memory_report: no arena yet (call reserve(B, T) first)");
    gpt2_cuda_memory_report r =
        gpt2_cuda_memory(config_, arena_batch_, arena_seq_, options_.recompute,
                         options_.attention, plan_.attention_workspace.bytes);
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

  /// The buckets backward finishes, in that order: gpt2_gradient_buckets(config()).
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

  /// Parameters as floats on the host (tests, llm.c export via write_llmc_parameters).
  void copy_parameters_to_host(std::span<float> out) const { download(out, params_, "parameters"); }
  /// Gradients as floats on the host (tests).
  void gradients_to_host(std::span<float> out) const { download(out, grads_, "gradients"); }
  /// Replaces the parameters with floats from the host (rounded to bf16).
  void copy_parameters_from_host(std::span<const float> in) { upload_parameters(in); }

 private:
  using tensor_id = gpt2_tensor;  // llm.c order, shared with the other GPT-2 model
  using enum gpt2_tensor;

  static_assert(kernels::matmul_context::workspace_bytes == gpt2_cuda_cublas_workspace_bytes);

  static gpt2_config validated(const gpt2_config& cfg) {
    cfg.validate();
    if (cfg.channels % 8 != 0 || (cfg.channels / cfg.num_heads) % 8 != 0)
      throw config_error("gpt2_cuda: channels " + std::to_string(cfg.channels) +
                         " and head size must be multiples of 8 (16-byte vector accesses)");
    return cfg;
  }

  // Token ids are checked on the device (the encoder's flags, reported after the step).
  void check_batch(const batch_view<device_memory>& b) const {
    detail::check_gpt2_batch_shape(config_, b.batch_size, b.seq_len, "gpt2_cuda");
    detail::check_gpt2_tokens_given(b.inputs, "input", "gpt2_cuda");
    detail::check_gpt2_tokens_given(b.targets, "target", "gpt2_cuda");
  }

  void upload_parameters(std::span<const float> in) {
    if (in.size() != params_.size())
      throw config_error("gpt2_cuda: " + std::to_string(in.size()) + " parameters given, " +
                         std::to_string(params_.size()) + " expected");
    std::vector<trainkit::bf16> host(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) host[i] = trainkit::bf16::from_float(in[i]);
    trainkit::cuda::copy_to_device(params_.data(), std::span<const trainkit::bf16>(host),
                                   stream());  // ordered before the model's kernels
  }

  void download(std::span<float> out, const trainkit::cuda::device_buffer<trainkit::bf16>& src,
                const char* what) const {
    if (out.size() != src.size())
      throw config_error(std::string("gpt2_cuda: ") + what + " destination holds " +
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
  bf16_t* param(tensor_id id) noexcept {
    return kernels::as_device_bf16(params_.data() + offsets_[std::size_t(id)]);
  }
  bf16_t* grad(tensor_id id) noexcept {
    return kernels::as_device_bf16(grads_.data() + offsets_[std::size_t(id)]);
  }

  // The stream the private launch code enqueues on: the context's during the protocol, the
  // model's own otherwise. A scope, so an exception cannot leave it pointing at a context.
  class stream_scope {
   public:
    stream_scope(gpt2_cuda& m, cudaStream_t s) : m_(m), saved_(m.work_) { m_.work_ = s; }
    ~stream_scope() { m_.work_ = saved_; }
    stream_scope(const stream_scope&) = delete;
    stream_scope& operator=(const stream_scope&) = delete;

   private:
    gpt2_cuda& m_;
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
    // Bad-token flags collect over the step's micro-steps: cleared only on the first.
    if (first) begin_step(N, s);
    step_rows_ = N;
    if (options_.cuda_graph && warmed(B, T)) {
      replay_micro_step(batch, grad_scale, first, on_bucket, s);
    } else {
      micro_step_kernels(batch.inputs, batch.targets, B, T, grad_scale, first, on_bucket);
      if (options_.cuda_graph) warmed_.push_back({B, T});
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
                        /*backward=*/true, s);
    kernels::accumulate_mean_loss(loss_sums_.data(), losses(), int(N), restart, s);
    backward_trunk(inputs, B, T, on_bucket);
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
      throw cuda_error("gpt2_cuda: capturing the micro-step (B=" + std::to_string(B) +
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

  void begin_step(std::size_t N, cudaStream_t s) {
    step_rows_ = N;
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
      throw config_error(std::string("gpt2_cuda::") + who + ": " + (bad[0] ? "input" : "target") +
                         " token outside [0, vocab_size=" + std::to_string(config_.vocab_size) +
                         ")");
  }

  // out (N, OC) = inp (N, IC) · wᵀ + bias, with epilogue `ep` (bias or gelu_aux_bias).
  void linear_forward(bf16_t* out, const bf16_t* inp, const bf16_t* w, const bf16_t* bias, int N,
                      int IC, int OC, kernels::epilogue ep = kernels::epilogue::bias,
                      bf16_t* aux = nullptr) {
    kernels::matmul_arguments x;
    x.a = inp, x.lda = IC;
    x.b = w, x.trans_b = true, x.ldb = IC;
    x.d = out, x.ldd = OC;
    x.m = N, x.n = OC, x.k = IC;
    x.ep = ep, x.bias = bias, x.aux = aux, x.ld_aux = OC;
    blas_->run(x, work());
  }

  // dinp (N, IC) = dout · w (assigned; with a GELU aux, times gelu'(aux));
  // dw (OC, IC) += doutᵀ · inp; db (OC) += Σ_rows dout.
  void linear_backward(bf16_t* dinp, bf16_t* dw, bf16_t* db, const bf16_t* dout, const bf16_t* inp,
                       const bf16_t* w, int N, int IC, int OC, const bf16_t* gelu_aux = nullptr) {
    bf16_t* bias_grad = slot<bf16_t>(plan_.bias_grad);
    kernels::matmul_arguments gw;
    gw.a = dout, gw.trans_a = true, gw.lda = OC;
    gw.b = inp, gw.ldb = IC;
    gw.d = dw, gw.ldd = IC;
    gw.m = OC, gw.n = IC, gw.k = N;
    gw.beta = 1.0f;
    gw.ep = db ? kernels::epilogue::bgradb : kernels::epilogue::none;
    gw.bias_grad = bias_grad;
    blas_->run(gw, work());
    if (db) kernels::accumulate(db, bias_grad, OC, work());
    kernels::matmul_arguments gi;
    gi.a = dout, gi.lda = OC;
    gi.b = w, gi.ldb = IC;
    gi.d = dinp, gi.ldd = IC;
    gi.m = N, gi.n = IC, gi.k = OC;
    if (gelu_aux) {
      gi.ep = kernels::epilogue::dgelu;
      gi.aux = const_cast<bf16_t*>(gelu_aux);
      gi.ld_aux = IC;
    }
    blas_->run(gi, work());
  }

  struct layer_views {
    bf16_t *ln1, *qkvr, *att, *atty, *res2, *ln2, *fch, *fch_gelu, *res3;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd, *lse;
  };

  layer_views layer(int l, int B, int T) const {
    const std::size_t C = std::size_t(config_.channels), N = std::size_t(B) * T, NC = N * C;
    const std::size_t lr = options_.recompute >= 2 ? 0 : std::size_t(l);
    const std::size_t lg = options_.recompute >= 1 ? 0 : std::size_t(l);
    const bool naive = options_.attention == gpt2_attention::naive;
    const std::size_t att = naive ? kernels::attention_matrix_elements(B, config_.num_heads, T) : 0;
    const std::size_t rows = naive ? 0 : std::size_t(B) * config_.num_heads * T;
    layer_views v;
    v.ln1 = slot<bf16_t>(plan_.ln1) + lr * NC;
    v.qkvr = slot<bf16_t>(plan_.qkvr) + std::size_t(l) * 3 * NC;
    v.att = slot<bf16_t>(plan_.att) + std::size_t(l) * att;
    v.atty = slot<bf16_t>(plan_.atty) + std::size_t(l) * NC;
    v.res2 = slot<bf16_t>(plan_.res2) + std::size_t(l) * NC;
    v.ln2 = slot<bf16_t>(plan_.ln2) + lr * NC;
    v.fch = slot<bf16_t>(plan_.fch) + std::size_t(l) * 4 * NC;
    v.fch_gelu = slot<bf16_t>(plan_.fch_gelu) + lg * 4 * NC;
    v.res3 = slot<bf16_t>(plan_.res3) + std::size_t(l) * NC;
    v.ln1_mean = slot<float>(plan_.ln1_mean) + std::size_t(l) * N;
    v.ln1_rstd = slot<float>(plan_.ln1_rstd) + std::size_t(l) * N;
    v.ln2_mean = slot<float>(plan_.ln2_mean) + std::size_t(l) * N;
    v.ln2_rstd = slot<float>(plan_.ln2_rstd) + std::size_t(l) * N;
    v.lse = slot<float>(plan_.lse) + std::size_t(l) * rows;
    return v;
  }

  // Checked before any device work, so a bad choice is reported on a machine without a GPU too.
  static gpt2_cuda_options checked_options(const gpt2_cuda_options& opt, const gpt2_config& cfg) {
    if (opt.recompute < 0 || opt.recompute > 2)
      throw config_error("gpt2_cuda: recompute must be 0, 1 or 2, got " +
                         std::to_string(opt.recompute));
    if (opt.embedding_atomics && opt.deterministic)
      throw config_error(
          "gpt2_cuda_options.embedding_atomics adds in no fixed order; set deterministic = false "
          "or leave embedding_atomics off");
    const int hs = cfg.channels / cfg.num_heads;
    switch (opt.attention) {
      case gpt2_attention::naive:
        return opt;
      case gpt2_attention::flash:
        if (hs != 64 && hs != 128)
          throw config_error("gpt2_cuda: attention=flash needs head size 64 or 128, shape " +
                             cfg.to_string() + " has " + std::to_string(hs));
        // Its backward adds dq with fp32 atomics in no fixed order.
        if (opt.deterministic)
          throw config_error(
              "gpt2_cuda: attention=flash is not bit-reproducible; set deterministic = false "
              "or use attention=naive or cudnn");
        return opt;
      case gpt2_attention::cudnn:
        if (!kernels::cudnn_attention_factory())
          throw config_error(
              "gpt2_cuda: attention=cudnn, but this program has no cuDNN attention: compile "
              "<trainkit/model/cuda/cudnn_attention.hpp> into one of its .cpp files and link "
              "trainkit::cudnn (pip install nvidia-cudnn-frontend)");
        return opt;
    }
    throw config_error("gpt2_cuda: unknown attention choice " + std::to_string(int(opt.attention)));
  }

  // One layer's attention, out = v.atty (B, T, C), from qkv (B, T, 3C).
  void attention_forward(const layer_views& v, const bf16_t* qkv, int B, int T, cudaStream_t s) {
    const int C = config_.channels, H = config_.num_heads;
    switch (options_.attention) {
      case gpt2_attention::naive:
        kernels::attention_forward(*blas_, v.atty, qkv, attention_views(v), B, T, C, H, s);
        return;
      case gpt2_attention::flash:
        kernels::flash_attention_forward(v.atty, v.lse, qkv, B, T, C, H, H, s);
        return;
      case gpt2_attention::cudnn:
        cudnn_->forward(v.atty, v.lse, qkv, B, T, C, H, H, s);
        return;
    }
  }

  void attention_backward(const layer_views& v, bf16_t* dqkv, const bf16_t* datty, int B, int T,
                          cudaStream_t s) {
    const int C = config_.channels, H = config_.num_heads;
    switch (options_.attention) {
      case gpt2_attention::naive:
        kernels::attention_backward(*blas_, dqkv, datty, attention_views(v), B, T, C, H, s);
        return;
      case gpt2_attention::flash:
        kernels::flash_attention_backward(dqkv, slot<float>(plan_.att_delta),
                                          slot<float>(plan_.dq_accum), datty, v.qkvr, v.atty, v.lse,
                                          B, T, C, H, H, s);
        return;
      case gpt2_attention::cudnn:
        cudnn_->backward(dqkv, datty, v.qkvr, v.atty, v.lse, B, T, C, H, H, s);
        return;
    }
  }

  kernels::attention_buffers attention_views(const layer_views& v) const {
    kernels::attention_buffers a;
    a.qkvr = v.qkvr;
    a.att = v.att;
    a.scores = slot<float>(plan_.scores);
    a.dscores = slot<bf16_t>(plan_.dscores);
    a.heads = slot<bf16_t>(plan_.heads);
    a.dqkvr = slot<bf16_t>(plan_.dqkvr);
    return a;
  }

  void forward_trunk(const std::int32_t* inputs, int B, int T) {
    const int C = config_.channels, L = config_.num_layers;
    const int N = B * T;
    const cudaStream_t s = work();
    bf16_t* encoded = slot<bf16_t>(plan_.encoded);
    bf16_t* qkv = slot<bf16_t>(plan_.qkv);
    bf16_t* proj = slot<bf16_t>(plan_.proj);
    kernels::encoder_forward(encoded, inputs, param(wte), param(wpe), flags(), B, T, C,
                             config_.vocab_size, s);
    {
      const layer_views v0 = layer(0, B, T);
      kernels::layernorm_forward(nullptr, v0.ln1, v0.ln1_mean, v0.ln1_rstd, encoded, nullptr,
                                 param(ln1w), param(ln1b), N, C, s);
    }
    for (int l = 0; l < L; ++l) {
      const layer_views v = layer(l, B, T);
      const bf16_t* x = l == 0 ? encoded : layer(l - 1, B, T).res3;  // (B, T, C)
      const std::size_t lc = std::size_t(l) * C;
      // flash and cudnn read q, k, v in place: the GEMM writes this layer's kept copy directly.
      bf16_t* qkv_l = options_.attention == gpt2_attention::naive ? qkv : v.qkvr;
      linear_forward(qkv_l, v.ln1, param(qkvw) + lc * 3 * C, param(qkvb) + 3 * lc, N, C, 3 * C);
      attention_forward(v, qkv_l, B, T, s);
      linear_forward(proj, v.atty, param(attprojw) + lc * C, param(attprojb) + lc, N, C, C);
      kernels::layernorm_forward(v.res2, v.ln2, v.ln2_mean, v.ln2_rstd, x, proj, param(ln2w) + lc,
                                 param(ln2b) + lc, N, C, s);
      linear_forward(v.fch_gelu, v.ln2, param(fcw) + lc * 4 * C, param(fcb) + 4 * lc, N, C, 4 * C,
                     kernels::epilogue::gelu_aux_bias, v.fch);
      linear_forward(proj, v.fch_gelu, param(fcprojw) + lc * 4 * C, param(fcprojb) + lc, N, 4 * C,
                     C);
      if (l + 1 < L) {
        const layer_views next = layer(l + 1, B, T);
        kernels::layernorm_forward(v.res3, next.ln1, next.ln1_mean, next.ln1_rstd, v.res2, proj,
                                   param(ln1w) + lc + C, param(ln1b) + lc + C, N, C, s);
      } else {
        kernels::layernorm_forward(v.res3, slot<bf16_t>(plan_.lnf), slot<float>(plan_.lnf_mean),
                                   slot<float>(plan_.lnf_rstd), v.res2, proj, param(lnfw),
                                   param(lnfb), N, C, s);
      }
    }
    // LM head: logits (N, Vp) = lnf · wteᵀ
    kernels::matmul_arguments head;
    head.a = slot<bf16_t>(plan_.lnf), head.lda = C;
    head.b = param(wte), head.trans_b = true, head.ldb = C;
    head.d = slot<bf16_t>(plan_.logits), head.ldd = config_.padded_vocab_size;
    head.m = N, head.n = config_.padded_vocab_size, head.k = C;
    blas_->run(head, s);
  }

  void backward_trunk(const std::int32_t* inputs, int B, int T, const bucket_observer& on_bucket) {
    const int C = config_.channels, L = config_.num_layers;
    const int N = B * T, Vp = config_.padded_vocab_size;
    const cudaStream_t s = work();
    const bf16_t* logits = slot<bf16_t>(plan_.logits);  // now dloss/dlogits
    const bf16_t* lnf = slot<bf16_t>(plan_.lnf);
    bf16_t* dres = slot<bf16_t>(plan_.dres);
    bf16_t* dln = slot<bf16_t>(plan_.dln);
    bf16_t* datty = slot<bf16_t>(plan_.datty);
    bf16_t* dfch = slot<bf16_t>(plan_.dfch);
    bf16_t* dqkv = slot<bf16_t>(plan_.qkv);
    float* partial = slot<float>(plan_.ln_partial);
    bf16_t* encoded = slot<bf16_t>(plan_.encoded);

    // LM head backward: dwte += dlogitsᵀ · lnf; dlnf = dlogits · wte
    kernels::matmul_arguments gw;
    gw.a = logits, gw.trans_a = true, gw.lda = Vp;
    gw.b = lnf, gw.ldb = C;
    gw.d = grad(wte), gw.ldd = C;
    gw.m = Vp, gw.n = C, gw.k = N;
    gw.beta = 1.0f;
    blas_->run(gw, s);
    kernels::matmul_arguments gi;
    gi.a = logits, gi.lda = Vp;
    gi.b = param(wte), gi.ldb = C;
    gi.d = dln, gi.ldd = C;
    gi.m = N, gi.n = C, gi.k = Vp;
    blas_->run(gi, s);

    TRAINKIT_CUDA_CHECK(cudaMemsetAsync(dres, 0, std::size_t(N) * C * sizeof(bf16_t), s));
    const layer_views last = layer(L - 1, B, T);
    kernels::layernorm_backward(dres, grad(lnfw), grad(lnfb), partial, dln, last.res3, param(lnfw),
                                slot<float>(plan_.lnf_mean), slot<float>(plan_.lnf_rstd), N, C, s);
    on_bucket(0);  // lnf
    for (int l = L - 1; l >= 0; --l) {
      const layer_views v = layer(l, B, T);
      const bf16_t* x = l == 0 ? encoded : layer(l - 1, B, T).res3;
      const std::size_t lc = std::size_t(l) * C;
      if (options_.recompute >= 1)
        kernels::gelu_forward(v.fch_gelu, v.fch, std::int64_t(N) * 4 * C, s);
      if (options_.recompute >= 2)
        kernels::layernorm_forward(nullptr, v.ln2, nullptr, nullptr, v.res2, nullptr,
                                   param(ln2w) + lc, param(ln2b) + lc, N, C, s);
      // MLP: res3 = res2 + gelu(ln2·fcwᵀ + fcb)·fcprojwᵀ + fcprojb
      linear_backward(dfch, grad(fcprojw) + lc * 4 * C, grad(fcprojb) + lc, dres, v.fch_gelu,
                      param(fcprojw) + lc * 4 * C, N, 4 * C, C, /*gelu_aux=*/v.fch);
      linear_backward(dln, grad(fcw) + lc * 4 * C, grad(fcb) + 4 * lc, dfch, v.ln2,
                      param(fcw) + lc * 4 * C, N, C, 4 * C);
      kernels::layernorm_backward(dres, grad(ln2w) + lc, grad(ln2b) + lc, partial, dln, v.res2,
                                  param(ln2w) + lc, v.ln2_mean, v.ln2_rstd, N, C, s);
      // attention: res2 = x + attention(ln1(x))·attprojwᵀ + attprojb
      linear_backward(datty, grad(attprojw) + lc * C, grad(attprojb) + lc, dres, v.atty,
                      param(attprojw) + lc * C, N, C, C);
      attention_backward(v, dqkv, datty, B, T, s);
      if (options_.recompute >= 2)
        kernels::layernorm_forward(nullptr, v.ln1, nullptr, nullptr, x, nullptr, param(ln1w) + lc,
                                   param(ln1b) + lc, N, C, s);
      linear_backward(dln, grad(qkvw) + lc * 3 * C, grad(qkvb) + 3 * lc, dqkv, v.ln1,
                      param(qkvw) + lc * 3 * C, N, C, 3 * C);
      kernels::layernorm_backward(dres, grad(ln1w) + lc, grad(ln1b) + lc, partial, dln, x,
                                  param(ln1w) + lc, v.ln1_mean, v.ln1_rstd, N, C, s);
      on_bucket(gpt2_layer_bucket(config_, l));
    }
    kernels::encoder_backward_wpe(grad(wpe), dres, B, T, C, s);
    if (!options_.embedding_atomics) {  // fp32 sums per token, one bf16 rounding per element
      std::int32_t* packed = slot<std::int32_t>(plan_.buckets);
      token_buckets_.build(packed, inputs, int(N), config_.vocab_size, s);
      // The number of buckets is known on the device only: N blocks, those past it return.
      kernels::encoder_backward_buckets(grad(wte), dres, packed, int(N), C, s);
    } else {
      kernels::encoder_backward_atomic(grad(wte), dres, inputs, N, C, config_.vocab_size, s);
    }
    on_bucket(gpt2_embedding_bucket(config_));
  }

  gpt2_config config_;
  gpt2_cuda_options options_;
  std::vector<tensor_info> layout_;
  std::vector<gradient_bucket> buckets_;
  std::array<std::size_t, std::size_t(tensor_count)> offsets_{};
  std::string device_name_;
  std::unique_ptr<trainkit::cuda::stream> stream_;
  std::unique_ptr<kernels::matmul_context> blas_;
  std::unique_ptr<trainkit::cuda::stream> capture_stream_;  // cuda_graph only; never runs work
  std::unique_ptr<kernels::attention_engine> cudnn_;        // attention=cudnn only
  trainkit::cuda::device_buffer<trainkit::bf16> params_;
  trainkit::cuda::device_buffer<trainkit::bf16> grads_;
  trainkit::cuda::device_buffer<std::byte> arena_;
  gpt2_cuda_arena_plan plan_;
  int arena_batch_ = 0, arena_seq_ = 0;
  std::size_t step_rows_ = 0;
  kernels::device_token_buckets token_buckets_;      // the wte gradient's bucket scratch
  trainkit::cuda::device_buffer<double> loss_sums_;  // (2,) Σ micro-step mean losses; forward()'s
  trainkit::cuda::pinned_buffer<double> host_step_;  // (2,) the step's sum, its bad-token flags
  int step_count_ = 1;                               // micro-steps of the step being read
  cudaStream_t work_ = nullptr;                      // see stream_scope
  std::vector<captured_micro_step> graphs_;          // cuda_graph: at most max_graphs
  std::vector<std::array<int, 2>> warmed_;           // (B, T) run eagerly on this arena
  trainkit::cuda::device_buffer<std::int32_t> graph_tokens_;  // inputs, then targets
  int graph_captures_ = 0, graph_replays_ = 0;
};

static_assert(model<gpt2_cuda>, "gpt2_cuda must satisfy trainkit::model::model");
static_assert(names_its_device<gpt2_cuda>, "gpt2_cuda reports its device for the MFU peak");

}  // namespace trainkit::model
