// tests/cuda/reference.cpp — implements reference.hpp over cpu/kernels.hpp and
// gpt2/cpu.hpp (g++ and Eigen; linked into the .cu GPU tests).
#include "reference.hpp"

#include <algorithm>
#include <span>

#include "trainkit/model/cpu/kernels.hpp"
#include "trainkit/model/gpt2/cpu.hpp"

namespace trainkit::test_ref {

namespace k = trainkit::model::detail;

void encoder_forward(fvec& out, const ivec& tokens, const fvec& wte, const fvec& wpe, int B, int T,
                     int C) {
  out.assign(std::size_t(B) * T * C, 0.0f);
  k::encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
}

void encoder_backward(fvec& dwte, fvec& dwpe, const fvec& dout, const ivec& tokens, int B, int T,
                      int C) {
  k::encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C);
}

void layernorm_forward(fvec& out, fvec& mean, fvec& rstd, const fvec& inp, const fvec& w,
                       const fvec& b, int N, int C) {
  out.assign(std::size_t(N) * C, 0.0f);
  mean.assign(N, 0.0f);
  rstd.assign(N, 0.0f);
  k::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C);
}

void layernorm_backward(fvec& dinp, fvec& dw, fvec& db, const fvec& dout, const fvec& inp,
                        const fvec& w, const fvec& mean, const fvec& rstd, int N, int C) {
  k::layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(),
                        mean.data(), rstd.data(), N, C);
}

void linear_forward(fvec& out, const fvec& inp, const fvec& w, const fvec& bias, int N, int IC,
                    int OC) {
  out.assign(std::size_t(N) * OC, 0.0f);
  k::matmul_forward<float>(out.data(), inp.data(), w.data(), bias.empty() ? nullptr : bias.data(),
                           nullptr, N, IC, OC);
}

void linear_backward(fvec& dinp, fvec& dw, fvec& db, const fvec& dout, const fvec& inp,
                     const fvec& w, int N, int IC, int OC) {
  dinp.assign(std::size_t(N) * IC, 0.0f);
  k::matmul_backward(dinp.data(), dw.data(), db.empty() ? nullptr : db.data(), dout.data(),
                     inp.data(), w.data(), N, IC, OC);
}

void gelu_forward(fvec& out, const fvec& inp) {
  out.assign(inp.size(), 0.0f);
  k::gelu_forward(out.data(), inp.data(), k::index(inp.size()));
}

void gelu_backward(fvec& dinp, const fvec& inp, const fvec& dout) {
  dinp.assign(inp.size(), 0.0f);
  k::gelu_backward(dinp.data(), inp.data(), dout.data(), k::index(inp.size()));
}

void attention_forward(fvec& out, fvec& att, const fvec& qkv, int B, int T, int C, int H) {
  out.assign(std::size_t(B) * T * C, 0.0f);
  att.assign(std::size_t(B) * H * T * T, 0.0f);
  k::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H);
}

void attention_backward(fvec& dqkv, const fvec& dout, const fvec& qkv, const fvec& att, int B,
                        int T, int C, int H) {
  dqkv.assign(std::size_t(B) * T * 3 * C, 0.0f);
  fvec scratch(std::size_t(B) * H * T * T);
  k::attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), B, T, C,
                        H);
}

void softmax_crossentropy(fvec& logits, std::vector<double>& losses, const ivec& targets, int rows,
                          int V, int Vp, bool backward, float dloss) {
  losses.assign(rows, 0.0);
  k::softmax_crossentropy(logits.data(), losses.data(), targets.data(), rows, V, Vp, backward,
                          dloss);
}

model_result gpt2_forward_backward(const model::gpt2_config& cfg, const fvec& params,
                                   const ivec& inputs, const ivec& targets, int B, int T) {
  model::gpt2_cpu m(cfg, model::zero_parameters);
  std::copy(params.begin(), params.end(), m.parameters().begin());
  host_batch batch(B, T);
  batch.inputs = inputs;
  batch.targets = targets;
  model_result r;
  r.loss = m.forward_backward(view_of(batch), 1.0f);
  r.loss = m.last_loss();
  r.grads.assign(m.gradients().begin(), m.gradients().end());
  return r;
}

fvec gpt2_cpu_initial_parameters(const model::gpt2_config& cfg, std::uint64_t seed) {
  model::gpt2_cpu m(cfg, seed);
  return fvec(m.parameters().begin(), m.parameters().end());
}

}  // namespace trainkit::test_ref
