// trainkit/model/gpt2/cpu.hpp — the CPU reference GPT-2 (Eigen + OpenMP), float or double: GPT-2's
// block on the shared CPU transformer (model/transformer/cpu.hpp).
//
// The model llm.c's train_gpt2.c trains: token and position embeddings, pre-LayerNorm blocks
// (causal multi-head attention with a fused qkv projection, then a 4C tanh-GELU MLP, each added to
// the residual stream), a final LayerNorm and an LM head tied to wte. Parameters and gradients are
// flat buffers in llm.c's layout (gpt2/config.hpp). The backward pass is written by hand
// (cpu/kernels.hpp). transformer_cpu owns the step protocol, the head, the buffers and the checks;
// this file is the block: which kernels run on which tensors, and the activations they keep. As in
// llm.c, attention probabilities are kept for backward: L·B·H·T² values (2.4 GB for d12 at B=4,
// T=1024 in float), the largest activation at long sequence lengths.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "trainkit/core/step_protocol.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/model/concepts.hpp"
#include "trainkit/model/cpu/kernels.hpp"
#include "trainkit/model/detail/aligned_vector.hpp"
#include "trainkit/model/gpt2/config.hpp"
#include "trainkit/model/gpt2/init.hpp"
#include "trainkit/model/transformer/cpu.hpp"

namespace trainkit::model {

/// GPT-2's block for transformer_cpu (the cpu_block concept): embeddings with positions,
/// LayerNorm, multi-head attention, a GELU MLP, biases everywhere, the head tied to wte.
template <class Scalar>
class gpt2_cpu_block {
 public:
  using scalar_type = Scalar;
  using config_type = gpt2_config;
  using tensor = gpt2_tensor;  // llm.c order, shared with gpt2_cuda
  static constexpr std::string_view model_name = "gpt2_cpu";
  static constexpr std::string_view config_name = "gpt2_config";

  static std::vector<tensor_info> parameter_layout(const gpt2_config& cfg) {
    return gpt2_parameter_layout(cfg);
  }
  static std::vector<gradient_bucket> gradient_buckets(const gpt2_config& cfg) {
    return gpt2_gradient_buckets(cfg);
  }
  /// gpt2/init.hpp: matrices and embeddings N(0, 0.02), the residual projections
  /// N(0, 0.02/√(2L)), biases 0, LayerNorm gains 1, wte's padded rows zero, as gpt2_cuda.
  static void initialize(const gpt2_config& cfg, std::uint64_t seed, std::span<Scalar> params) {
    detail::gpt2_initialize(cfg, seed, params);
  }
  static tensor head(const gpt2_config&) noexcept { return tensor::wte; }

  explicit gpt2_cpu_block(const gpt2_config& cfg) : config_(cfg) {}

  // Sizes the activations for (B, T); called by transformer_cpu when the shape changes.
  void prepare(int B, int T) {
    const std::size_t L = std::size_t(config_.num_layers), C = std::size_t(config_.channels),
                      H = std::size_t(config_.num_heads), N = std::size_t(B) * T;
    activations& a = act_;
    a.encoded.assign(N * C, 0);
    for (auto* v : {&a.ln1, &a.atty, &a.res2, &a.ln2, &a.res3}) v->assign(L * N * C, 0);
    for (auto* v : {&a.ln1_mean, &a.ln1_rstd, &a.ln2_mean, &a.ln2_rstd}) v->assign(L * N, 0);
    a.qkv.assign(L * N * 3 * C, 0);
    a.att.assign(L * B * H * T * T, 0);
    a.fch.assign(L * N * 4 * C, 0);
    a.fch_gelu.assign(L * N * 4 * C, 0);
    a.lnf_mean.assign(N, 0);
    a.lnf_rstd.assign(N, 0);
    activation_grads& g = dact_;
    g.residual.assign(N * C, 0);
    g.ln.assign(N * C, 0);
    g.atty.assign(N * C, 0);
    g.qkv.assign(N * 3 * C, 0);
    g.fch.assign(N * 4 * C, 0);
    g.att.assign(B * H * T * T, 0);
  }

  using pass = cpu_pass<Scalar, tensor>;

  void embed(const pass& p, const std::int32_t* inputs) {
    detail::encoder_forward(act_.encoded.data(), inputs, p.tensor(wte), p.tensor(wpe), p.batch,
                            p.seq, config_.channels);
  }

  void forward_layer(const pass& p, int l) {
    namespace k = detail;
    const int B = p.batch, T = p.seq, C = config_.channels, H = config_.num_heads;
    const k::index N = p.rows();
    const std::size_t NC = std::size_t(N) * C, BHTT = std::size_t(B) * H * T * T;
    activations& a = act_;
    const Scalar* x = input_of(l, NC);  // (B, T, C)
    Scalar* ln1 = a.ln1.data() + l * NC;
    Scalar* qkv = a.qkv.data() + 3 * l * NC;
    Scalar* atty = a.atty.data() + l * NC;
    Scalar* res2 = a.res2.data() + l * NC;
    Scalar* ln2 = a.ln2.data() + l * NC;
    Scalar* fch = a.fch.data() + 4 * l * NC;
    Scalar* fch_gelu = a.fch_gelu.data() + 4 * l * NC;
    Scalar* res3 = a.res3.data() + l * NC;
    k::layernorm_forward(ln1, a.ln1_mean.data() + l * N, a.ln1_rstd.data() + l * N, x,
                         p.tensor(ln1w) + l * C, p.tensor(ln1b) + l * C, N, C);
    k::matmul_forward<Scalar>(qkv, ln1, p.tensor(qkvw) + std::size_t(l) * 3 * C * C,
                              p.tensor(qkvb) + l * 3 * C, nullptr, N, C, 3 * C);
    k::attention_forward(atty, a.att.data() + l * BHTT, qkv, B, T, C, H);
    k::matmul_forward(res2, atty, p.tensor(attprojw) + std::size_t(l) * C * C,
                      p.tensor(attprojb) + l * C, x, N, C, C);
    k::layernorm_forward(ln2, a.ln2_mean.data() + l * N, a.ln2_rstd.data() + l * N, res2,
                         p.tensor(ln2w) + l * C, p.tensor(ln2b) + l * C, N, C);
    k::matmul_forward<Scalar>(fch, ln2, p.tensor(fcw) + std::size_t(l) * 4 * C * C,
                              p.tensor(fcb) + l * 4 * C, nullptr, N, C, 4 * C);
    k::gelu_forward(fch_gelu, fch, 4 * N * C);
    k::matmul_forward(res3, fch_gelu, p.tensor(fcprojw) + std::size_t(l) * 4 * C * C,
                      p.tensor(fcprojb) + l * C, res2, N, 4 * C, C);
  }

  void forward_final(const pass& p, Scalar* out) {
    const std::size_t NC = std::size_t(p.rows()) * config_.channels;
    detail::layernorm_forward(out, act_.lnf_mean.data(), act_.lnf_rstd.data(),
                              input_of(config_.num_layers, NC), p.tensor(lnfw), p.tensor(lnfb),
                              p.rows(), config_.channels);
  }

  void backward_final(const pass& p, const Scalar* dout) {
    const std::size_t NC = std::size_t(p.rows()) * config_.channels;
    std::fill(dact_.residual.begin(), dact_.residual.end(), Scalar(0));
    detail::layernorm_backward(
        dact_.residual.data(), p.grad(lnfw), p.grad(lnfb), dout, input_of(config_.num_layers, NC),
        p.tensor(lnfw), act_.lnf_mean.data(), act_.lnf_rstd.data(), p.rows(), config_.channels);
  }

  void backward_layer(const pass& p, int l) {
    namespace k = detail;
    const int B = p.batch, T = p.seq, C = config_.channels, H = config_.num_heads;
    const k::index N = p.rows();
    const std::size_t NC = std::size_t(N) * C, BHTT = std::size_t(B) * H * T * T;
    activations& a = act_;
    activation_grads& d = dact_;
    Scalar* dres = d.residual.data();
    const Scalar* x = input_of(l, NC);
    const std::size_t lc = std::size_t(l) * C;
    // res3 = res2 + fch_gelu·fcprojwᵀ + fcprojb
    k::matmul_backward(d.fch.data(), p.grad(fcprojw) + lc * 4 * C, p.grad(fcprojb) + lc, dres,
                       a.fch_gelu.data() + 4 * l * NC, p.tensor(fcprojw) + lc * 4 * C, N, 4 * C, C);
    k::gelu_backward(d.fch.data(), a.fch.data() + 4 * l * NC, d.fch.data(), 4 * N * C);
    k::matmul_backward(d.ln.data(), p.grad(fcw) + lc * 4 * C, p.grad(fcb) + 4 * lc, d.fch.data(),
                       a.ln2.data() + l * NC, p.tensor(fcw) + lc * 4 * C, N, C, 4 * C);
    k::layernorm_backward(dres, p.grad(ln2w) + lc, p.grad(ln2b) + lc, d.ln.data(),
                          a.res2.data() + l * NC, p.tensor(ln2w) + lc, a.ln2_mean.data() + l * N,
                          a.ln2_rstd.data() + l * N, N, C);
    // res2 = x + atty·attprojwᵀ + attprojb
    k::matmul_backward(d.atty.data(), p.grad(attprojw) + lc * C, p.grad(attprojb) + lc, dres,
                       a.atty.data() + l * NC, p.tensor(attprojw) + lc * C, N, C, C);
    k::attention_backward(d.qkv.data(), d.att.data(), d.atty.data(), a.qkv.data() + 3 * l * NC,
                          a.att.data() + l * BHTT, B, T, C, H);
    k::matmul_backward(d.ln.data(), p.grad(qkvw) + lc * 3 * C, p.grad(qkvb) + 3 * lc, d.qkv.data(),
                       a.ln1.data() + l * NC, p.tensor(qkvw) + lc * 3 * C, N, C, 3 * C);
    k::layernorm_backward(dres, p.grad(ln1w) + lc, p.grad(ln1b) + lc, d.ln.data(), x,
                          p.tensor(ln1w) + lc, a.ln1_mean.data() + l * N, a.ln1_rstd.data() + l * N,
                          N, C);
  }

  void backward_embed(const pass& p, const std::int32_t* inputs) {
    detail::encoder_backward(p.grad(wte), p.grad(wpe), dact_.residual.data(), inputs, p.batch,
                             p.seq, config_.channels);
  }

 private:
  using buffer = detail::aligned_vector<Scalar>;  // 64-byte aligned: see aligned_vector.hpp
  using enum gpt2_tensor;

  // Layer l's input: the embeddings for l = 0, else layer l-1's output (l = L: the last output).
  const Scalar* input_of(int l, std::size_t NC) const noexcept {
    return l == 0 ? act_.encoded.data() : act_.res3.data() + (l - 1) * NC;
  }

  // Forward activations for one batch shape; per-layer ones are stacked (L, ...).
  struct activations {
    buffer encoded;                  // (B, T, C)
    buffer ln1, ln1_mean, ln1_rstd;  // (L, B, T, C), (L, B, T) ×2
    buffer qkv;                      // (L, B, T, 3C)
    buffer att;                      // (L, B, H, T, T) softmax probabilities
    buffer atty;                     // (L, B, T, C) attention output before projection
    buffer res2;                     // (L, B, T, C) residual after attention
    buffer ln2, ln2_mean, ln2_rstd;  // (L, B, T, C), (L, B, T) ×2
    buffer fch, fch_gelu;            // (L, B, T, 4C)
    buffer res3;                     // (L, B, T, C) residual after the MLP
    buffer lnf_mean, lnf_rstd;       // (B, T) ×2
  };

  // Gradients of activations, one layer's worth, reused layer after layer.
  struct activation_grads {
    buffer residual;  // (B, T, C) running ∂loss/∂residual stream
    buffer ln;        // (B, T, C) ∂ of a LayerNorm output (ln1 or ln2)
    buffer atty;      // (B, T, C)
    buffer qkv;       // (B, T, 3C)
    buffer fch;       // (B, T, 4C) ∂fch_gelu, then ∂fch in place
    buffer att;       // (B, H, T, T) scratch for the softmax backward
  };

  gpt2_config config_;
  activations act_;
  activation_grads dact_;
};

/// The CPU GPT-2: transformer_cpu with GPT-2's block (a class, not an alias, so headers without
/// Eigen can declare it: gpt2/llmc_file.hpp).
template <class Scalar>
class basic_gpt2_cpu : public transformer_cpu<gpt2_cpu_block<Scalar>> {
 public:
  using transformer_cpu<gpt2_cpu_block<Scalar>>::transformer_cpu;
};

static_assert(model<basic_gpt2_cpu<float>>, "gpt2_cpu must satisfy trainkit::model::model");
static_assert(model<basic_gpt2_cpu<double>>,
              "gpt2_cpu<double> must satisfy trainkit::model::model");

using gpt2_cpu = basic_gpt2_cpu<float>;

}  // namespace trainkit::model
