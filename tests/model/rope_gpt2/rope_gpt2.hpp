// tests/model/rope_gpt2/rope_gpt2.hpp — a third model family, written as a test fixture to prove
// that a family is a config, a block and its kernels, nothing else (docs/writing_a_policy.md).
//
// "RoPE GPT-2": GPT-2's block (fused qkv with biases, multi-head causal attention, a 4C tanh-GELU
// MLP with biases, the head tied to wte) with RMSNorm instead of LayerNorm and rotary position
// embeddings on q and k instead of a position table. Nothing in it is new: every kernel is one the
// library already has (cpu/kernels.hpp, cpu/rmsnorm_rope_kernels.hpp), and everything that is not
// the block — buffers, step protocol, micro-step accumulation, buckets, head and loss, checks,
// checkpoint walk — is transformer_cpu's. It lives under tests/ and is registered by one line in
// tests/model/CMakeLists.txt.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/core/step_protocol.hpp"
#include "trainkit/core/tensor.hpp"
#include "trainkit/model/concepts.hpp"
#include "trainkit/model/cpu/kernels.hpp"
#include "trainkit/model/cpu/rmsnorm_rope_kernels.hpp"
#include "trainkit/model/detail/aligned_vector.hpp"
#include "trainkit/model/detail/normal_sampler.hpp"
#include "trainkit/model/detail/rope_table.hpp"
#include "trainkit/model/transformer/cpu.hpp"
#include "trainkit/model/transformer/layout.hpp"

namespace rope_gpt2 {

namespace tkm = trainkit::model;

/// The shape: GPT-2's fields, with RoPE's θ and RMSNorm's ε instead of a position table.
struct config {
  int max_seq_len = 64;  // rows of the RoPE table
  int vocab_size = 0;
  int padded_vocab_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int channels = 0;
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;

  std::string to_string() const {
    return "L=" + std::to_string(num_layers) + " H=" + std::to_string(num_heads) +
           " C=" + std::to_string(channels) + " V=" + std::to_string(vocab_size);
  }
  void validate() const {
    auto positive = [](const char* field, int v) {
      if (v <= 0)
        throw trainkit::config_error(std::string("rope_gpt2::config.") + field +
                                     " must be positive, got " + std::to_string(v));
    };
    positive("max_seq_len", max_seq_len);
    positive("vocab_size", vocab_size);
    positive("num_layers", num_layers);
    positive("num_heads", num_heads);
    positive("channels", channels);
    if (padded_vocab_size < vocab_size)
      throw trainkit::config_error("rope_gpt2::config.padded_vocab_size is below vocab_size");
    if (channels % num_heads != 0 || (channels / num_heads) % 2 != 0)
      throw trainkit::config_error("rope_gpt2::config.channels / num_heads must be even");
  }
  std::size_t num_parameters() const {
    const std::size_t C = std::size_t(channels), L = std::size_t(num_layers);
    const std::size_t per_layer =
        C + 3 * C * C + 3 * C + C * C + C + C + 4 * C * C + 4 * C + 4 * C * C + C;
    return std::size_t(padded_vocab_size) * C + L * per_layer + C;
  }
  double flops_per_token(int T) const {
    return 6.0 * double(num_parameters()) + 12.0 * double(num_layers) * channels * T;
  }
};

/// The parameter tensors, in layout order.
enum class tensor : std::size_t {
  wte,
  ln1w,
  qkvw,
  qkvb,
  attprojw,
  attprojb,
  ln2w,
  fcw,
  fcb,
  fcprojw,
  fcprojb,
  lnfw,
  tensor_count
};

inline std::vector<trainkit::tensor_info> parameter_layout(const config& cfg) {
  using trainkit::tensor_role;
  const std::int64_t Vp = cfg.padded_vocab_size, L = cfg.num_layers, C = cfg.channels;
  tkm::layout_builder b;
  b.add("wte", {Vp, C}, tensor_role::embedding);
  b.add("ln1w", {L, C}, tensor_role::norm);
  b.add("qkvw", {L, 3 * C, C}, tensor_role::matrix, {C, C, C});
  b.add("qkvb", {L, 3 * C}, tensor_role::bias);
  b.add("attprojw", {L, C, C}, tensor_role::matrix);
  b.add("attprojb", {L, C}, tensor_role::bias);
  b.add("ln2w", {L, C}, tensor_role::norm);
  b.add("fcw", {L, 4 * C, C}, tensor_role::matrix);
  b.add("fcb", {L, 4 * C}, tensor_role::bias);
  b.add("fcprojw", {L, C, 4 * C}, tensor_role::matrix);
  b.add("fcprojb", {L, C}, tensor_role::bias);
  b.add("lnfw", {C}, tensor_role::norm);
  return std::move(b).take();
}

/// The block for transformer_cpu (the cpu_block concept).
template <class Scalar>
class block {
 public:
  using scalar_type = Scalar;
  using config_type = config;
  using tensor = rope_gpt2::tensor;
  using pass = tkm::cpu_pass<Scalar, tensor>;
  static constexpr std::string_view model_name = "rope_gpt2_cpu";
  static constexpr std::string_view config_name = "rope_gpt2::config";

  static std::vector<trainkit::tensor_info> parameter_layout(const config& cfg) {
    return rope_gpt2::parameter_layout(cfg);
  }
  static std::vector<trainkit::gradient_bucket> gradient_buckets(const config& cfg) {
    auto i = [](tensor t) { return std::size_t(t); };
    return tkm::transformer_gradient_buckets(parameter_layout(cfg), cfg.num_layers, "head",
                                             {i(tensor::lnfw)}, i(tensor::ln1w), i(tensor::fcprojb),
                                             {i(tensor::wte)});
  }
  /// GPT-2's recipe: N(0, 0.02), the residual projections N(0, 0.02/√(2L)), biases 0, gains 1.
  static void initialize(const config& cfg, std::uint64_t seed, std::span<Scalar> params) {
    std::fill(params.begin(), params.end(), Scalar(0));
    tkm::detail::normal_sampler normal(seed);
    const double residual_std = 0.02 / std::sqrt(2.0 * cfg.num_layers);
    for (const trainkit::tensor_info& t : parameter_layout(cfg)) {
      Scalar* p = params.data() + t.offset;
      if (t.role == trainkit::tensor_role::norm) std::fill_n(p, t.numel(), Scalar(1));
      if (t.role != trainkit::tensor_role::matrix && t.role != trainkit::tensor_role::embedding)
        continue;
      const double sd = (t.name == "attprojw" || t.name == "fcprojw") ? residual_std : 0.02;
      const std::size_t n = t.role == trainkit::tensor_role::embedding
                                ? std::size_t(cfg.vocab_size) * std::size_t(cfg.channels)
                                : t.numel();
      for (std::size_t i = 0; i < n; ++i) p[i] = Scalar(sd * normal());
    }
  }
  static tensor head(const config&) noexcept { return tensor::wte; }

  explicit block(const config& cfg)
      : config_(cfg), rope_(cfg.max_seq_len, cfg.channels / cfg.num_heads, cfg.rope_theta) {}

  void prepare(int B, int T) {
    const std::size_t L = std::size_t(config_.num_layers), C = std::size_t(config_.channels),
                      H = std::size_t(config_.num_heads), N = std::size_t(B) * T;
    a_.encoded.assign(N * C, 0);
    for (auto* v : {&a_.ln1, &a_.atty, &a_.res2, &a_.ln2, &a_.res3}) v->assign(L * N * C, 0);
    for (auto* v : {&a_.ln1_rstd, &a_.ln2_rstd}) v->assign(L * N, 0);
    a_.qkvr.assign(L * N * 3 * C, 0);
    a_.att.assign(L * B * H * T * T, 0);
    a_.fch.assign(L * N * 4 * C, 0);
    a_.fch_gelu.assign(L * N * 4 * C, 0);
    a_.lnf_rstd.assign(N, 0);
    for (auto* v : {&d_.residual, &d_.ln, &d_.atty}) v->assign(N * C, 0);
    d_.qkv.assign(N * 3 * C, 0);
    d_.fch.assign(N * 4 * C, 0);
    d_.att.assign(B * H * T * T, 0);
  }

  void embed(const pass& p, const std::int32_t* inputs) {
    tkm::detail::embedding_forward(a_.encoded.data(), inputs, p.tensor(tensor::wte), p.rows(),
                                   config_.channels);
  }

  void forward_layer(const pass& p, int l) {
    namespace k = tkm::detail;
    using enum tensor;
    const int B = p.batch, T = p.seq, C = config_.channels, H = config_.num_heads, hs = C / H;
    const k::index N = p.rows();
    const std::size_t NC = std::size_t(N) * C, BHTT = std::size_t(B) * H * T * T,
                      lc = std::size_t(l) * C;
    const Scalar eps = Scalar(config_.norm_eps);
    const Scalar* x = input_of(l, NC);
    Scalar* ln1 = a_.ln1.data() + l * NC;
    Scalar* qkvr = a_.qkvr.data() + 3 * l * NC;
    Scalar* atty = a_.atty.data() + l * NC;
    Scalar* res2 = a_.res2.data() + l * NC;
    Scalar* ln2 = a_.ln2.data() + l * NC;
    Scalar* fch = a_.fch.data() + 4 * l * NC;
    Scalar* fch_gelu = a_.fch_gelu.data() + 4 * l * NC;
    k::rmsnorm_forward(ln1, a_.ln1_rstd.data() + l * N, x, p.tensor(ln1w) + lc, N, C, eps);
    k::matmul_forward<Scalar>(qkvr, ln1, p.tensor(qkvw) + lc * 3 * C, p.tensor(qkvb) + 3 * lc,
                              nullptr, N, C, 3 * C);
    k::rope_rotate(qkvr, rope_, N, T, 2 * H, hs, 3 * C, /*inverse=*/false);  // q and k heads
    k::attention_forward(atty, a_.att.data() + l * BHTT, qkvr, B, T, C, H);
    k::matmul_forward(res2, atty, p.tensor(attprojw) + lc * C, p.tensor(attprojb) + lc, x, N, C, C);
    k::rmsnorm_forward(ln2, a_.ln2_rstd.data() + l * N, res2, p.tensor(ln2w) + lc, N, C, eps);
    k::matmul_forward<Scalar>(fch, ln2, p.tensor(fcw) + lc * 4 * C, p.tensor(fcb) + 4 * lc, nullptr,
                              N, C, 4 * C);
    k::gelu_forward(fch_gelu, fch, 4 * N * C);
    k::matmul_forward(a_.res3.data() + l * NC, fch_gelu, p.tensor(fcprojw) + lc * 4 * C,
                      p.tensor(fcprojb) + lc, res2, N, 4 * C, C);
  }

  void forward_final(const pass& p, Scalar* out) {
    const std::size_t NC = std::size_t(p.rows()) * config_.channels;
    tkm::detail::rmsnorm_forward(out, a_.lnf_rstd.data(), input_of(config_.num_layers, NC),
                                 p.tensor(tensor::lnfw), p.rows(), config_.channels,
                                 Scalar(config_.norm_eps));
  }

  void backward_final(const pass& p, const Scalar* dout) {
    const std::size_t NC = std::size_t(p.rows()) * config_.channels;
    std::fill(d_.residual.begin(), d_.residual.end(), Scalar(0));
    tkm::detail::rmsnorm_backward(d_.residual.data(), p.grad(tensor::lnfw), dout,
                                  input_of(config_.num_layers, NC), p.tensor(tensor::lnfw),
                                  a_.lnf_rstd.data(), p.rows(), config_.channels);
  }

  void backward_layer(const pass& p, int l) {
    namespace k = tkm::detail;
    using enum tensor;
    const int B = p.batch, T = p.seq, C = config_.channels, H = config_.num_heads, hs = C / H;
    const k::index N = p.rows();
    const std::size_t NC = std::size_t(N) * C, BHTT = std::size_t(B) * H * T * T,
                      lc = std::size_t(l) * C;
    Scalar* dres = d_.residual.data();
    k::matmul_backward(d_.fch.data(), p.grad(fcprojw) + lc * 4 * C, p.grad(fcprojb) + lc, dres,
                       a_.fch_gelu.data() + 4 * l * NC, p.tensor(fcprojw) + lc * 4 * C, N, 4 * C,
                       C);
    k::gelu_backward(d_.fch.data(), a_.fch.data() + 4 * l * NC, d_.fch.data(), 4 * N * C);
    k::matmul_backward(d_.ln.data(), p.grad(fcw) + lc * 4 * C, p.grad(fcb) + 4 * lc, d_.fch.data(),
                       a_.ln2.data() + l * NC, p.tensor(fcw) + lc * 4 * C, N, C, 4 * C);
    k::rmsnorm_backward(dres, p.grad(ln2w) + lc, d_.ln.data(), a_.res2.data() + l * NC,
                        p.tensor(ln2w) + lc, a_.ln2_rstd.data() + l * N, N, C);
    k::matmul_backward(d_.atty.data(), p.grad(attprojw) + lc * C, p.grad(attprojb) + lc, dres,
                       a_.atty.data() + l * NC, p.tensor(attprojw) + lc * C, N, C, C);
    k::attention_backward(d_.qkv.data(), d_.att.data(), d_.atty.data(), a_.qkvr.data() + 3 * l * NC,
                          a_.att.data() + l * BHTT, B, T, C, H);
    k::rope_rotate(d_.qkv.data(), rope_, N, T, 2 * H, hs, 3 * C, /*inverse=*/true);
    k::matmul_backward(d_.ln.data(), p.grad(qkvw) + lc * 3 * C, p.grad(qkvb) + 3 * lc,
                       d_.qkv.data(), a_.ln1.data() + l * NC, p.tensor(qkvw) + lc * 3 * C, N, C,
                       3 * C);
    k::rmsnorm_backward(dres, p.grad(ln1w) + lc, d_.ln.data(), input_of(l, NC), p.tensor(ln1w) + lc,
                        a_.ln1_rstd.data() + l * N, N, C);
  }

  void backward_embed(const pass& p, const std::int32_t* inputs) {
    tkm::detail::embedding_backward(p.grad(tensor::wte), d_.residual.data(), inputs, p.rows(),
                                    config_.channels);
  }

 private:
  using buffer = tkm::detail::aligned_vector<Scalar>;
  struct {
    buffer encoded, ln1, ln1_rstd, qkvr, att, atty, res2, ln2, ln2_rstd, fch, fch_gelu, res3,
        lnf_rstd;
  } a_;
  struct {
    buffer residual, ln, atty, qkv, fch, att;
  } d_;

  const Scalar* input_of(int l, std::size_t NC) const noexcept {
    return l == 0 ? a_.encoded.data() : a_.res3.data() + (l - 1) * NC;
  }

  config config_;
  tkm::detail::rope_table rope_;
};

template <class Scalar>
using model = tkm::transformer_cpu<block<Scalar>>;

static_assert(tkm::model<model<float>>, "the fixture family must satisfy trainkit::model::model");

}  // namespace rope_gpt2
