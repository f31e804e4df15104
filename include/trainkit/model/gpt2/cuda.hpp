// trainkit/model/gpt2/cuda.hpp — the fused CUDA GPT-2 (bf16 weights and activations, fp32
// accumulation, cuBLASLt matmuls), a trainkit::model::model in device memory: GPT-2's block on the
// shared CUDA transformer (model/transformer/cuda.hpp).
//
// The same network, parameter layout and initialisation as gpt2_cpu (llm.c's GPT-2): a model of
// one seed starts from gpt2_cpu's weights rounded to bf16, so the two can be compared layer by
// layer. Parameters and gradients are flat bf16 device buffers in gpt2_parameter_layout order
// (what adamw_cuda and checkpoints walk). Gradients are bf16, as llm.c keeps them: every
// contribution is summed in fp32 inside its kernel or GEMM and rounded once when added, so a
// micro-batch costs one bf16 rounding per gradient element (relative 2⁻⁹); the optimizer is
// expected to keep fp32 master weights. Activations live in one arena sized for (B, T) up front
// (model/gpt2/cuda_memory.hpp; memory_report()). transformer_cuda owns the step protocol, streams,
// loss read-back, bucket publishing, the head and CUDA graphs (options.cuda_graph); this file is
// the block: the encoder with positions, LayerNorm fused with the residual adds, naive, flash or
// cuDNN attention, the GELU MLP with biases, recomputation (options.recompute), and the wte
// gradient from the fp32 token buckets (model/cuda/token_buckets.cuh) or bf16 atomics.
// Kernels: model/cuda/*.cuh, each with its CPU reference in cpu/kernels.hpp.
// docs/cuda.md describes the memory layout, precision, and the deterministic and recompute modes.
// Needs nvcc (the kernels are in this header); link trainkit::cuda.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/model/concepts.hpp"
#include "trainkit/model/cuda/attention.cuh"
#include "trainkit/model/cuda/attention_engine.hpp"
#include "trainkit/model/cuda/elementwise.cuh"
#include "trainkit/model/cuda/encoder.cuh"
#include "trainkit/model/cuda/layernorm.cuh"
#include "trainkit/model/cuda/token_buckets.cuh"
#include "trainkit/model/gpt2/config.hpp"
#include "trainkit/model/gpt2/cuda_memory.hpp"
#include "trainkit/model/gpt2/init.hpp"
#include "trainkit/model/transformer/cuda.hpp"

namespace trainkit::model {

/// A host model the CUDA GPT-2 can copy its shape and weights from (gpt2_cpu, or anything with
/// a gpt2_config and float parameters in gpt2_parameter_layout order).
template <class M>
concept gpt2_host_weights = host_weights_for<M, gpt2_config>;

/// GPT-2's block for transformer_cuda (the cuda_block concept).
class gpt2_cuda_block {
  using bf16_t = kernels::bf16_t;

 public:
  using config_type = gpt2_config;
  using options_type = gpt2_cuda_options;
  using plan_type = gpt2_cuda_arena_plan;
  using tensor = gpt2_tensor;  // llm.c order, shared with gpt2_cpu
  using pass = cuda_pass<plan_type, tensor>;
  static constexpr std::string_view model_name = "gpt2_cuda";
  static constexpr std::string_view config_name = "gpt2_config";

  static std::vector<tensor_info> parameter_layout(const gpt2_config& cfg) {
    return gpt2_parameter_layout(cfg);
  }
  static std::vector<gradient_bucket> gradient_buckets(const gpt2_config& cfg) {
    return gpt2_gradient_buckets(cfg);
  }
  /// gpt2_cpu's initialisation of `seed` (rounded to bf16 on upload).
  static std::vector<float> initial_parameters(const gpt2_config& cfg, std::uint64_t seed) {
    return detail::gpt2_initial_parameters<float>(cfg, seed);
  }
  static tensor head(const gpt2_config&) noexcept { return tensor::wte; }
  static int kv_heads(const gpt2_config& cfg) noexcept { return cfg.num_heads; }

  static gpt2_config validated(const gpt2_config& cfg) {
    cfg.validate();
    if (cfg.channels % 8 != 0 || (cfg.channels / cfg.num_heads) % 8 != 0)
      throw config_error("gpt2_cuda: channels " + std::to_string(cfg.channels) +
                         " and head size must be multiples of 8 (16-byte vector accesses)");
    return cfg;
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
    check_attention_engine(opt.attention, cfg.channels / cfg.num_heads, opt.deterministic,
                           cfg.to_string(), "gpt2_cuda_options.attention");
    return opt;
  }

  static gpt2_cuda_arena_plan plan(const gpt2_config& cfg, int B, int T,
                                   const gpt2_cuda_options& opt, std::size_t attention_workspace) {
    return plan_gpt2_cuda_arena(cfg, B, T, opt.recompute, opt.attention, attention_workspace);
  }
  static cuda_memory_report memory(const gpt2_config& cfg, int B, int T,
                                   const gpt2_cuda_options& opt, std::size_t attention_workspace) {
    return gpt2_cuda_memory(cfg, B, T, opt.recompute, opt.attention, attention_workspace);
  }

  gpt2_cuda_block(const gpt2_config& cfg, const gpt2_cuda_options& opt, cudaStream_t)
      : config_(cfg), options_(opt) {}

  void reserve(int B, int T) {
    if (!options_.embedding_atomics)
      token_buckets_.reserve(std::size_t(B) * std::size_t(T), config_.vocab_size);
  }

  // The embedding (flags[0] raised for a bad input token), then layer 0's first LayerNorm.
  void embed(const pass& p, const std::int32_t* inputs) {
    const int C = config_.channels, N = p.rows();
    bf16_t* encoded = p.slot<bf16_t>(p.plan.encoded);
    kernels::encoder_forward(encoded, inputs, p.param(wte), p.param(wpe), p.flags, p.B, p.T, C,
                             config_.vocab_size, p.stream);
    const layer_views v0 = layer(p, 0);
    kernels::layernorm_forward(nullptr, v0.ln1, v0.ln1_mean, v0.ln1_rstd, encoded, nullptr,
                               p.param(ln1w), p.param(ln1b), N, C, p.stream);
  }

  // Layer l from its ln1 on; its residual add is fused with the next LayerNorm (the next layer's
  // ln1, or the final one into plan.lnf).
  void forward_layer(const pass& p, int l) {
    const int C = config_.channels, L = config_.num_layers, N = p.rows();
    const cudaStream_t s = p.stream;
    bf16_t* proj = p.slot<bf16_t>(p.plan.proj);
    const layer_views v = layer(p, l);
    const bf16_t* x = input_of(p, l);  // (B, T, C)
    const std::size_t lc = std::size_t(l) * C;
    // flash and cudnn read q, k, v in place: the GEMM writes this layer's kept copy directly.
    bf16_t* qkv_l =
        options_.attention == gpt2_attention::naive ? p.slot<bf16_t>(p.plan.qkv) : v.qkvr;
    p.linear_forward(qkv_l, v.ln1, p.param(qkvw) + lc * 3 * C, N, C, 3 * C, p.param(qkvb) + 3 * lc,
                     kernels::epilogue::bias);
    attention_forward(p, v, qkv_l);
    p.linear_forward(proj, v.atty, p.param(attprojw) + lc * C, N, C, C, p.param(attprojb) + lc,
                     kernels::epilogue::bias);
    kernels::layernorm_forward(v.res2, v.ln2, v.ln2_mean, v.ln2_rstd, x, proj, p.param(ln2w) + lc,
                               p.param(ln2b) + lc, N, C, s);
    p.linear_forward(v.fch_gelu, v.ln2, p.param(fcw) + lc * 4 * C, N, C, 4 * C,
                     p.param(fcb) + 4 * lc, kernels::epilogue::gelu_aux_bias, v.fch);
    p.linear_forward(proj, v.fch_gelu, p.param(fcprojw) + lc * 4 * C, N, 4 * C, C,
                     p.param(fcprojb) + lc, kernels::epilogue::bias);
    if (l + 1 < L) {
      const layer_views next = layer(p, l + 1);
      kernels::layernorm_forward(v.res3, next.ln1, next.ln1_mean, next.ln1_rstd, v.res2, proj,
                                 p.param(ln1w) + lc + C, p.param(ln1b) + lc + C, N, C, s);
    } else {
      kernels::layernorm_forward(v.res3, p.slot<bf16_t>(p.plan.lnf), p.slot<float>(p.plan.lnf_mean),
                                 p.slot<float>(p.plan.lnf_rstd), v.res2, proj, p.param(lnfw),
                                 p.param(lnfb), N, C, s);
    }
  }

  // The final LayerNorm's backward from ∂lnf (plan.dln) into the residual stream's gradient.
  void backward_final(const pass& p) {
    const int C = config_.channels, N = p.rows();
    bf16_t* dres = p.slot<bf16_t>(p.plan.dres);
    TRAINKIT_CUDA_CHECK(cudaMemsetAsync(dres, 0, std::size_t(N) * C * sizeof(bf16_t), p.stream));
    kernels::layernorm_backward(dres, p.grad(lnfw), p.grad(lnfb), p.slot<float>(p.plan.ln_partial),
                                p.slot<bf16_t>(p.plan.dln), layer(p, config_.num_layers - 1).res3,
                                p.param(lnfw), p.slot<float>(p.plan.lnf_mean),
                                p.slot<float>(p.plan.lnf_rstd), N, C, p.stream);
  }

  void backward_layer(const pass& p, int l) {
    const int C = config_.channels, N = p.rows();
    const cudaStream_t s = p.stream;
    const layer_views v = layer(p, l);
    const bf16_t* x = input_of(p, l);
    const std::size_t lc = std::size_t(l) * C;
    bf16_t* dres = p.slot<bf16_t>(p.plan.dres);
    bf16_t* dln = p.slot<bf16_t>(p.plan.dln);
    bf16_t* datty = p.slot<bf16_t>(p.plan.datty);
    bf16_t* dfch = p.slot<bf16_t>(p.plan.dfch);
    bf16_t* dqkv = p.slot<bf16_t>(p.plan.qkv);  // the forward's qkv scratch, free by now
    bf16_t* bias_grad = p.slot<bf16_t>(p.plan.bias_grad);
    float* partial = p.slot<float>(p.plan.ln_partial);
    if (options_.recompute >= 1)
      kernels::gelu_forward(v.fch_gelu, v.fch, std::int64_t(N) * 4 * C, s);
    if (options_.recompute >= 2)
      kernels::layernorm_forward(nullptr, v.ln2, nullptr, nullptr, v.res2, nullptr,
                                 p.param(ln2w) + lc, p.param(ln2b) + lc, N, C, s);
    // MLP: res3 = res2 + gelu(ln2·fcwᵀ + fcb)·fcprojwᵀ + fcprojb
    p.linear_backward(dfch, p.grad(fcprojw) + lc * 4 * C, dres, v.fch_gelu,
                      p.param(fcprojw) + lc * 4 * C, N, 4 * C, C, p.grad(fcprojb) + lc, bias_grad,
                      /*gelu_aux=*/v.fch);
    p.linear_backward(dln, p.grad(fcw) + lc * 4 * C, dfch, v.ln2, p.param(fcw) + lc * 4 * C, N, C,
                      4 * C, p.grad(fcb) + 4 * lc, bias_grad);
    kernels::layernorm_backward(dres, p.grad(ln2w) + lc, p.grad(ln2b) + lc, partial, dln, v.res2,
                                p.param(ln2w) + lc, v.ln2_mean, v.ln2_rstd, N, C, s);
    // attention: res2 = x + attention(ln1(x))·attprojwᵀ + attprojb
    p.linear_backward(datty, p.grad(attprojw) + lc * C, dres, v.atty, p.param(attprojw) + lc * C, N,
                      C, C, p.grad(attprojb) + lc, bias_grad);
    attention_backward(p, v, dqkv, datty);
    if (options_.recompute >= 2)
      kernels::layernorm_forward(nullptr, v.ln1, nullptr, nullptr, x, nullptr, p.param(ln1w) + lc,
                                 p.param(ln1b) + lc, N, C, s);
    p.linear_backward(dln, p.grad(qkvw) + lc * 3 * C, dqkv, v.ln1, p.param(qkvw) + lc * 3 * C, N, C,
                      3 * C, p.grad(qkvb) + 3 * lc, bias_grad);
    kernels::layernorm_backward(dres, p.grad(ln1w) + lc, p.grad(ln1b) + lc, partial, dln, x,
                                p.param(ln1w) + lc, v.ln1_mean, v.ln1_rstd, N, C, s);
  }

  void backward_embed(const pass& p, const std::int32_t* inputs) {
    const int C = config_.channels, N = p.rows();
    const bf16_t* dres = p.slot<bf16_t>(p.plan.dres);
    kernels::encoder_backward_wpe(p.grad(wpe), dres, p.B, p.T, C, p.stream);
    if (!options_.embedding_atomics) {  // fp32 sums per token, one bf16 rounding per element
      std::int32_t* packed = p.slot<std::int32_t>(p.plan.buckets);
      token_buckets_.build(packed, inputs, N, config_.vocab_size, p.stream);
      // The number of buckets is known on the device only: N blocks, those past it return.
      kernels::encoder_backward_buckets(p.grad(wte), dres, packed, N, C, p.stream);
    } else {
      kernels::encoder_backward_atomic(p.grad(wte), dres, inputs, N, C, config_.vocab_size,
                                       p.stream);
    }
  }

 private:
  using enum gpt2_tensor;

  struct layer_views {
    bf16_t *ln1, *qkvr, *att, *atty, *res2, *ln2, *fch, *fch_gelu, *res3;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd, *lse;
  };

  layer_views layer(const pass& p, int l) const {
    const std::size_t C = std::size_t(config_.channels), N = std::size_t(p.rows()), NC = N * C;
    const std::size_t lr = options_.recompute >= 2 ? 0 : std::size_t(l);
    const std::size_t lg = options_.recompute >= 1 ? 0 : std::size_t(l);
    const bool naive = options_.attention == gpt2_attention::naive;
    const std::size_t att =
        naive ? kernels::attention_matrix_elements(p.B, config_.num_heads, p.T) : 0;
    const std::size_t rows = naive ? 0 : std::size_t(p.B) * config_.num_heads * p.T;
    const gpt2_cuda_arena_plan& a = p.plan;
    layer_views v;
    v.ln1 = p.slot<bf16_t>(a.ln1) + lr * NC;
    v.qkvr = p.slot<bf16_t>(a.qkvr) + std::size_t(l) * 3 * NC;
    v.att = p.slot<bf16_t>(a.att) + std::size_t(l) * att;
    v.atty = p.slot<bf16_t>(a.atty) + std::size_t(l) * NC;
    v.res2 = p.slot<bf16_t>(a.res2) + std::size_t(l) * NC;
    v.ln2 = p.slot<bf16_t>(a.ln2) + lr * NC;
    v.fch = p.slot<bf16_t>(a.fch) + std::size_t(l) * 4 * NC;
    v.fch_gelu = p.slot<bf16_t>(a.fch_gelu) + lg * 4 * NC;
    v.res3 = p.slot<bf16_t>(a.res3) + std::size_t(l) * NC;
    v.ln1_mean = p.slot<float>(a.ln1_mean) + std::size_t(l) * N;
    v.ln1_rstd = p.slot<float>(a.ln1_rstd) + std::size_t(l) * N;
    v.ln2_mean = p.slot<float>(a.ln2_mean) + std::size_t(l) * N;
    v.ln2_rstd = p.slot<float>(a.ln2_rstd) + std::size_t(l) * N;
    v.lse = p.slot<float>(a.lse) + std::size_t(l) * rows;
    return v;
  }

  // Layer l's input: the embeddings for l = 0, else layer l-1's output.
  const bf16_t* input_of(const pass& p, int l) const {
    return l == 0 ? p.slot<bf16_t>(p.plan.encoded) : layer(p, l - 1).res3;
  }

  // One layer's attention, out = v.atty (B, T, C), from qkv (B, T, 3C).
  void attention_forward(const pass& p, const layer_views& v, const bf16_t* qkv) {
    const int C = config_.channels, H = config_.num_heads;
    if (options_.attention == gpt2_attention::naive)
      kernels::attention_forward(p.blas, v.atty, qkv, attention_views(p, v), p.B, p.T, C, H,
                                 p.stream);
    else
      p.attention_forward(v.atty, v.lse, qkv, C, H, H);
  }

  void attention_backward(const pass& p, const layer_views& v, bf16_t* dqkv, const bf16_t* datty) {
    const int C = config_.channels, H = config_.num_heads;
    if (options_.attention == gpt2_attention::naive)
      kernels::attention_backward(p.blas, dqkv, datty, attention_views(p, v), p.B, p.T, C, H,
                                  p.stream);
    else
      p.attention_backward(dqkv, datty, v.qkvr, v.atty, v.lse, C, H, H);
  }

  kernels::attention_buffers attention_views(const pass& p, const layer_views& v) const {
    kernels::attention_buffers a;
    a.qkvr = v.qkvr;
    a.att = v.att;
    a.scores = p.slot<float>(p.plan.scores);
    a.dscores = p.slot<bf16_t>(p.plan.dscores);
    a.heads = p.slot<bf16_t>(p.plan.heads);
    a.dqkvr = p.slot<bf16_t>(p.plan.dqkvr);
    return a;
  }

  gpt2_config config_;
  gpt2_cuda_options options_;
  kernels::device_token_buckets token_buckets_;  // the wte gradient's bucket scratch
};

/// The CUDA GPT-2: transformer_cuda with GPT-2's block.
class gpt2_cuda : public transformer_cuda<gpt2_cuda_block> {
 public:
  using transformer_cuda<gpt2_cuda_block>::transformer_cuda;
};

static_assert(model<gpt2_cuda>, "gpt2_cuda must satisfy trainkit::model::model");
static_assert(names_its_device<gpt2_cuda>, "gpt2_cuda reports its device for the MFU peak");

}  // namespace trainkit::model
