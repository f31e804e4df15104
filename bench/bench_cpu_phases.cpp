// bench_cpu_phases — where a CPU training step goes, phase by phase and GEMM by GEMM shape.
//
// Replays one training step of gpt2_cpu or llama_cpu kernel by kernel (the calls of
// gpt2_cpu.hpp / llama_cpu.hpp, in their order, at their shapes, over buffers of the model's sizes
// filled with random values) and books each call's wall time to a phase: each linear layer's
// forward, input-gradient and weight-gradient GEMMs by shape, attention, norms, GELU/SwiGLU, RoPE,
// embeddings, the classifier's GEMMs and its softmax cross-entropy over Vp columns, and AdamW over
// the model's parameter count. Repeats the step `--steps` times and prints each phase's median,
// its share, and its GFLOP/s for GEMMs, beside the wall time of a real model step (forward,
// backward, clip, AdamW) measured the same way, so the replay's coverage is visible.
// bench/cpu_phases_torch.py prints the same table for PyTorch's profiler on the same shapes;
// bench/cpu_vs_torch.sh runs both, interleaved (issue 37's profile).
//
//   bench_cpu_phases --arch gpt2|llama --model d12 --batch 4 --seq 256 [--steps 3] [--bf16]
//   [--eigen]
//
// --train N runs N AdamW steps (lr 1e-3, clip 1) on one fixed random batch and prints each loss:
// the model learns (memorises) in the chosen precision. --step-only times the real step alone
// (median of --steps, after one warm-up), the figure bench/cpu_vs_torch.sh compares with PyTorch.
// --bf16 runs the linear layers' GEMMs in bf16 (linalg::gemm_precision; needs oneDNN and a CPU with
// AVX512_BF16 or AMX-BF16); --eigen multiplies fp32 with Eigen where oneDNN is built in (the
// before-and-after of issue 37's first fix). Figures are wall time on a possibly shared machine:
// compare shares and interleaved runs, not absolute times across sessions.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "trainkit/core/batch.hpp"
#include "trainkit/core/cpu_features.hpp"
#include "trainkit/core/linalg/gemm_cpu.hpp"
#include "trainkit/model/cpu/kernels.hpp"
#include "trainkit/model/cpu/rmsnorm_rope_kernels.hpp"
#include "trainkit/model/detail/aligned_vector.hpp"
#include "trainkit/model/gpt2/cpu.hpp"
#include "trainkit/model/llama/cpu.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/grad_clip.hpp"

namespace {

namespace k = trainkit::model::detail;
using buffer = k::aligned_vector<float>;
using clock_type = std::chrono::steady_clock;

struct options {
  std::string arch = "gpt2", model = "d12";
  int B = 4, T = 256, steps = 3;
  bool bf16 = false;
  bool eigen = false;      // --eigen: fp32 products through Eigen even where oneDNN is built in
  bool step_only = false;  // --step-only: time the real step, no replay
  int train = 0;           // --train N: N AdamW steps on one fixed batch, the loss of each
};

/// Per-phase time of one replayed step, summed over the step's calls; plus GEMM flops per phase.
struct step_book {
  std::map<std::string, double> ms;
  std::map<std::string, double> flops;
  std::vector<std::string> order;  // first-seen order, for printing

  template <class F>
  void time(const std::string& phase, double gemm_flops, F&& f) {
    const auto t0 = clock_type::now();
    f();
    const double dt = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
    if (!ms.count(phase)) order.push_back(phase);
    ms[phase] += dt;
    flops[phase] += gemm_flops;
  }
};

buffer random_buffer(std::size_t n, float scale, std::mt19937& rng) {
  buffer b(n);
  std::normal_distribution<float> d(0.0f, scale);
  for (auto& x : b) x = d(rng);
  return b;
}

std::string shape(long M, long N, long K) {
  return std::to_string(M) + "x" + std::to_string(K) + "·" + std::to_string(K) + "x" +
         std::to_string(N);
}

// One linear layer, forward and backward, booked under `name` and its shape.
struct linear_phases {
  step_book& book;
  void forward(const std::string& name, float* out, const float* inp, const float* w,
               const float* bias, const float* residual, long N, int IC, int OC) {
    book.time("gemm " + name + " fwd " + shape(N, OC, IC), 2.0 * N * IC * OC,
              [&] { k::matmul_forward(out, inp, w, bias, residual, N, IC, OC); });
  }
  // matmul_backward's two products, timed apart (dinp, then dW + db).
  void backward(const std::string& name, float* dinp, float* dw, float* db, const float* dout,
                const float* inp, const float* w, long N, int IC, int OC) {
    using trainkit::linalg::gemm;
    using trainkit::linalg::operand;
    using trainkit::linalg::split;
    book.time("gemm " + name + " bwd-data " + shape(N, IC, OC), 2.0 * N * IC * OC, [&] {
      gemm(dinp, operand<float>{dout, OC, false}, operand<float>{w, IC, false}, N, IC, OC, false,
           split::longer_side, [](long, long, long, long) {});
    });
    book.time("gemm " + name + " bwd-weight " + shape(OC, IC, N), 2.0 * N * IC * OC, [&] {
      gemm(dw, operand<float>{dout, OC, true}, operand<float>{inp, IC, false}, OC, IC, N, true,
           split::rows, [&](long o0, long no, long, long) {
             if (!db) return;
             for (long r = 0; r < N; ++r)
               for (long o = o0; o < o0 + no; ++o) db[o] += dout[r * OC + o];
           });
    });
  }
};

// The classifier: chunked head GEMM, softmax cross-entropy, head backward (as gpt2_cpu).
void classifier(step_book& book, linear_phases& lin, buffer& logits, const buffer& lnf,
                buffer& dlnf, const float* wte, float* dwte, std::vector<double>& losses,
                const std::vector<std::int32_t>& targets, long N, int C, int V, int Vp) {
  const long chunk = std::clamp<long>((64 << 20) / (4 * long(Vp)), 1, N);
  for (long r0 = 0; r0 < N; r0 += chunk) {
    const long rows = std::min(chunk, N - r0);
    lin.forward("head", logits.data(), lnf.data() + r0 * C, wte, nullptr, nullptr, rows, C, Vp);
    book.time("softmax cross-entropy", 0, [&] {
      k::softmax_crossentropy(logits.data(), losses.data() + r0, targets.data() + r0, rows, V, Vp,
                              true, 1.0f / float(N));
    });
    lin.backward("head", dlnf.data() + r0 * C, dwte, nullptr, logits.data(), lnf.data() + r0 * C,
                 wte, rows, C, Vp);
  }
}

template <class Model>
void adamw_phase(step_book& book, Model& m, trainkit::optim::adamw_cpu& opt) {
  trainkit::optim::clip_then_update<trainkit::host_memory> clipped(1.0);
  book.time("adamw + clip", 0, [&] { clipped(opt, m, 3e-4f); });
}

void replay_gpt2(step_book& book, const options& o, trainkit::model::gpt2_cpu& m,
                 trainkit::optim::adamw_cpu& opt, std::mt19937& rng) {
  const auto& cfg = m.config();
  const int B = o.B, T = o.T, C = cfg.channels, H = cfg.num_heads, L = cfg.num_layers,
            V = cfg.vocab_size, Vp = cfg.padded_vocab_size;
  const long N = long(B) * T;
  linear_phases lin{book};
  auto r = [&](std::size_t n, float s = 1.0f) { return random_buffer(n, s, rng); };
  buffer x = r(N * C), ln = r(N * C), mean(N), rstd(N), qkv = r(N * 3 * C), att(B * H * T * T),
         atty = r(N * C), res2 = r(N * C), fch = r(N * 4 * C), fchg = r(N * 4 * C), res3 = r(N * C);
  buffer w_qkv = r(3 * C * C, 0.02f), w_att = r(C * C, 0.02f), w_fc = r(4 * C * C, 0.02f),
         w_proj = r(4 * C * C, 0.02f), b4(4 * C), lnw(C, 1.0f), lnb(C);
  buffer g_qkv(3 * C * C), g_att(C * C), g_fc(4 * C * C), g_proj(4 * C * C), gb(4 * C), glnw(C),
      glnb(C);
  buffer dres = r(N * C), dln(N * C), datty(N * C), dqkv(N * 3 * C), dfch(N * 4 * C),
         scratch(B * H * T * T);
  buffer wte = r(std::size_t(Vp) * C, 0.02f), dwte(std::size_t(Vp) * C), wpe = r(T * C, 0.02f),
         dwpe(T * C), logits(std::size_t(std::min<long>((64 << 20) / (4 * long(Vp)), N)) * Vp);
  std::vector<std::int32_t> tokens(N), targets(N);
  std::uniform_int_distribution<int> tok(0, V - 1);
  for (auto& t : tokens) t = tok(rng);
  for (auto& t : targets) t = tok(rng);
  std::vector<double> losses(N);
  std::fill(lnw.begin(), lnw.end(), 1.0f);

  book.time("embedding fwd", 0,
            [&] { k::encoder_forward(x.data(), tokens.data(), wte.data(), wpe.data(), B, T, C); });
  for (int l = 0; l < L; ++l) {
    book.time("layernorm fwd", 0, [&] {
      k::layernorm_forward(ln.data(), mean.data(), rstd.data(), x.data(), lnw.data(), lnb.data(), N,
                           C);
    });
    lin.forward("qkv", qkv.data(), ln.data(), w_qkv.data(), b4.data(), nullptr, N, C, 3 * C);
    book.time("attention fwd", 0,
              [&] { k::attention_forward(atty.data(), att.data(), qkv.data(), B, T, C, H); });
    lin.forward("attproj", res2.data(), atty.data(), w_att.data(), b4.data(), x.data(), N, C, C);
    book.time("layernorm fwd", 0, [&] {
      k::layernorm_forward(ln.data(), mean.data(), rstd.data(), res2.data(), lnw.data(), lnb.data(),
                           N, C);
    });
    lin.forward("fc", fch.data(), ln.data(), w_fc.data(), b4.data(), nullptr, N, C, 4 * C);
    book.time("gelu fwd", 0, [&] { k::gelu_forward(fchg.data(), fch.data(), 4 * N * C); });
    lin.forward("fcproj", res3.data(), fchg.data(), w_proj.data(), b4.data(), res2.data(), N, 4 * C,
                C);
  }
  book.time("layernorm fwd", 0, [&] {
    k::layernorm_forward(ln.data(), mean.data(), rstd.data(), res3.data(), lnw.data(), lnb.data(),
                         N, C);
  });
  classifier(book, lin, logits, ln, dln, wte.data(), dwte.data(), losses, targets, N, C, V, Vp);
  book.time("layernorm bwd", 0, [&] {
    k::layernorm_backward(dres.data(), glnw.data(), glnb.data(), dln.data(), res3.data(),
                          lnw.data(), mean.data(), rstd.data(), N, C);
  });
  for (int l = L - 1; l >= 0; --l) {
    lin.backward("fcproj", dfch.data(), g_proj.data(), gb.data(), dres.data(), fchg.data(),
                 w_proj.data(), N, 4 * C, C);
    book.time("gelu bwd", 0,
              [&] { k::gelu_backward(dfch.data(), fch.data(), dfch.data(), 4 * N * C); });
    lin.backward("fc", dln.data(), g_fc.data(), gb.data(), dfch.data(), ln.data(), w_fc.data(), N,
                 C, 4 * C);
    book.time("layernorm bwd", 0, [&] {
      k::layernorm_backward(dres.data(), glnw.data(), glnb.data(), dln.data(), res2.data(),
                            lnw.data(), mean.data(), rstd.data(), N, C);
    });
    lin.backward("attproj", datty.data(), g_att.data(), gb.data(), dres.data(), atty.data(),
                 w_att.data(), N, C, C);
    book.time("attention bwd", 0, [&] {
      k::attention_backward(dqkv.data(), scratch.data(), datty.data(), qkv.data(), att.data(), B, T,
                            C, H);
    });
    lin.backward("qkv", dln.data(), g_qkv.data(), gb.data(), dqkv.data(), ln.data(), w_qkv.data(),
                 N, C, 3 * C);
    book.time("layernorm bwd", 0, [&] {
      k::layernorm_backward(dres.data(), glnw.data(), glnb.data(), dln.data(), x.data(), lnw.data(),
                            mean.data(), rstd.data(), N, C);
    });
  }
  book.time("embedding bwd", 0, [&] {
    k::encoder_backward(dwte.data(), dwpe.data(), dres.data(), tokens.data(), B, T, C);
  });
  adamw_phase(book, m, opt);
}

void replay_llama(step_book& book, const options& o, trainkit::model::llama_cpu& m,
                  trainkit::optim::adamw_cpu& opt, std::mt19937& rng) {
  const auto& cfg = m.config();
  const int B = o.B, T = o.T, C = cfg.channels, H = cfg.num_heads, KV = cfg.num_kv_heads,
            hs = cfg.head_size(), D = cfg.qkv_rows(), R = cfg.fc_rows(), F = cfg.hidden_size,
            L = cfg.num_layers, V = cfg.vocab_size, Vp = cfg.padded_vocab_size;
  const long N = long(B) * T;
  const float eps = float(cfg.norm_eps);
  linear_phases lin{book};
  auto r = [&](std::size_t n, float s = 1.0f) { return random_buffer(n, s, rng); };
  buffer x = r(N * C), ln = r(N * C), rstd(N), qkv = r(N * D), qkvr(N * D), att(B * H * T * T),
         atty = r(N * C), res2 = r(N * C), fc = r(N * R), fca = r(N * F), res3 = r(N * C);
  buffer w_qkv = r(std::size_t(D) * C, 0.02f), w_att = r(C * C, 0.02f),
         w_fc = r(std::size_t(R) * C, 0.02f), w_proj = r(std::size_t(F) * C, 0.02f), lnw(C, 1.0f);
  buffer g_qkv(std::size_t(D) * C), g_att(C * C), g_fc(std::size_t(R) * C),
      g_proj(std::size_t(F) * C), glnw(C);
  buffer dres = r(N * C), dln(N * C), datty(N * C), dqkv(N * D), dfc(N * R), dfca(N * F),
         scratch(B * H * T * T);
  buffer wte = r(std::size_t(Vp) * C, 0.02f), dwte(std::size_t(Vp) * C),
         head = r(std::size_t(Vp) * C, 0.02f), dhead(std::size_t(Vp) * C),
         logits(std::size_t(std::min<long>((64 << 20) / (4 * long(Vp)), N)) * Vp);
  std::fill(lnw.begin(), lnw.end(), 1.0f);
  std::vector<std::int32_t> tokens(N), targets(N);
  std::uniform_int_distribution<int> tok(0, V - 1);
  for (auto& t : tokens) t = tok(rng);
  for (auto& t : targets) t = tok(rng);
  std::vector<double> losses(N);
  const k::rope_table rope(cfg.max_seq_len, hs, cfg.rope_theta);
  const k::gqa_shape g{B, T, H, KV, hs};

  book.time("embedding fwd", 0,
            [&] { k::embedding_forward(x.data(), tokens.data(), wte.data(), N, C); });
  for (int l = 0; l < L; ++l) {
    book.time("rmsnorm fwd", 0,
              [&] { k::rmsnorm_forward(ln.data(), rstd.data(), x.data(), lnw.data(), N, C, eps); });
    lin.forward("qkv", qkv.data(), ln.data(), w_qkv.data(), nullptr, nullptr, N, C, D);
    book.time("rope fwd (+ copy)", 0, [&] {
      std::copy(qkv.begin(), qkv.end(), qkvr.begin());
      k::rope_rotate(qkvr.data(), rope, N, T, H + KV, hs, D, false);
    });
    book.time("attention fwd", 0,
              [&] { k::gqa_attention_forward(atty.data(), att.data(), qkvr.data(), g); });
    lin.forward("attproj", res2.data(), atty.data(), w_att.data(), nullptr, x.data(), N, C, C);
    book.time("rmsnorm fwd", 0, [&] {
      k::rmsnorm_forward(ln.data(), rstd.data(), res2.data(), lnw.data(), N, C, eps);
    });
    lin.forward("fc (gate|up)", fc.data(), ln.data(), w_fc.data(), nullptr, nullptr, N, C, R);
    book.time("swiglu fwd", 0, [&] { k::swiglu_forward(fca.data(), fc.data(), N, F); });
    lin.forward("fcproj", res3.data(), fca.data(), w_proj.data(), nullptr, res2.data(), N, F, C);
  }
  book.time("rmsnorm fwd", 0, [&] {
    k::rmsnorm_forward(ln.data(), rstd.data(), res3.data(), lnw.data(), N, C, eps);
  });
  classifier(book, lin, logits, ln, dln, head.data(), dhead.data(), losses, targets, N, C, V, Vp);
  book.time("rmsnorm bwd", 0, [&] {
    k::rmsnorm_backward(dres.data(), glnw.data(), dln.data(), res3.data(), lnw.data(), rstd.data(),
                        N, C);
  });
  for (int l = L - 1; l >= 0; --l) {
    lin.backward("fcproj", dfca.data(), g_proj.data(), nullptr, dres.data(), fca.data(),
                 w_proj.data(), N, F, C);
    book.time("swiglu bwd", 0,
              [&] { k::swiglu_backward(dfc.data(), fc.data(), dfca.data(), N, F); });
    lin.backward("fc (gate|up)", dln.data(), g_fc.data(), nullptr, dfc.data(), ln.data(),
                 w_fc.data(), N, C, R);
    book.time("rmsnorm bwd", 0, [&] {
      k::rmsnorm_backward(dres.data(), glnw.data(), dln.data(), res2.data(), lnw.data(),
                          rstd.data(), N, C);
    });
    lin.backward("attproj", datty.data(), g_att.data(), nullptr, dres.data(), atty.data(),
                 w_att.data(), N, C, C);
    book.time("attention bwd", 0, [&] {
      k::gqa_attention_backward(dqkv.data(), scratch.data(), datty.data(), qkvr.data(), att.data(),
                                g);
    });
    book.time("rope bwd", 0, [&] { k::rope_rotate(dqkv.data(), rope, N, T, H + KV, hs, D, true); });
    lin.backward("qkv", dln.data(), g_qkv.data(), nullptr, dqkv.data(), ln.data(), w_qkv.data(), N,
                 C, D);
    book.time("rmsnorm bwd", 0, [&] {
      k::rmsnorm_backward(dres.data(), glnw.data(), dln.data(), x.data(), lnw.data(), rstd.data(),
                          N, C);
    });
  }
  book.time("embedding bwd", 0,
            [&] { k::embedding_backward(dwte.data(), dres.data(), tokens.data(), N, C); });
  adamw_phase(book, m, opt);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

template <class Model>
double real_step_ms(Model& m, trainkit::optim::adamw_cpu& opt, const options& o,
                    std::mt19937& rng) {
  trainkit::host_batch batch(o.B, o.T);
  std::uniform_int_distribution<int> tok(0, m.config().vocab_size - 1);
  for (auto& t : batch.inputs) t = tok(rng);
  for (auto& t : batch.targets) t = tok(rng);
  trainkit::optim::clip_then_update<trainkit::host_memory> clipped(1.0);
  const auto t0 = clock_type::now();
  m.zero_grad();
  m.forward_backward(trainkit::view_of(batch), 1.0f);
  clipped(opt, m, 3e-4f);
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

template <class Model, class Replay>
int run(const options& o, Model& m, Replay replay) {
  trainkit::optim::adamw_cpu opt(m, trainkit::optim::adamw_config{});
  std::mt19937 rng(1337);
  std::map<std::string, std::vector<double>> ms;
  std::map<std::string, double> flops;
  std::vector<std::string> order;
  std::vector<double> real, replayed;
  if (o.train > 0) {  // the model learns in this precision: one batch, memorised step by step
    trainkit::host_batch batch(o.B, o.T);
    std::uniform_int_distribution<int> tok(0, m.config().vocab_size - 1);
    for (auto& t : batch.inputs) t = tok(rng);
    for (auto& t : batch.targets) t = tok(rng);
    trainkit::optim::clip_then_update<trainkit::host_memory> clipped(1.0);
    for (int s = 0; s < o.train; ++s) {
      m.zero_grad();
      const float loss = m.forward_backward(trainkit::view_of(batch), 1.0f);
      clipped(opt, m, 1e-3f);
      std::printf("train %s %s %s step %d loss %.4f\n", o.arch.c_str(), o.model.c_str(),
                  o.bf16 ? "bf16" : "fp32", s + 1, loss);
      std::fflush(stdout);
    }
    return 0;
  }
  real_step_ms(m, opt, o, rng);  // sizes the activations, warms the pages
  if (o.step_only) {
    std::vector<double> steps;
    for (int s = 0; s < o.steps; ++s) steps.push_back(real_step_ms(m, opt, o, rng));
    const double ms_per_step = median(steps);
    std::printf("trainkit %s %s B=%d T=%d %s: step %.1f ms (tok/s %.1f)\n", o.arch.c_str(),
                o.model.c_str(), o.B, o.T, o.bf16 ? "bf16" : "fp32", ms_per_step,
                double(o.B) * o.T / (ms_per_step * 1e-3));
    return 0;
  }
  for (int s = 0; s < o.steps + 1; ++s) {
    step_book book;
    trainkit::linalg::new_weights_epoch();  // as the model's forward does: bf16 copies afresh
    replay(book, o, m, opt, rng);
    if (s == 0) continue;  // warm-up
    double total = 0;
    for (const auto& [name, t] : book.ms) {
      ms[name].push_back(t);
      total += t;
    }
    replayed.push_back(total);
    flops = book.flops;
    order = book.order;
    real.push_back(real_step_ms(m, opt, o, rng));
  }
  std::map<std::string, double> med;
  double total = 0;
  for (const auto& [name, v] : ms) total += (med[name] = median(v));
  std::sort(order.begin(), order.end(),
            [&](const auto& a, const auto& b) { return med[a] > med[b]; });
  std::printf("# bench_cpu_phases %s %s B=%d T=%d %s, %d replayed steps (medians)\n",
              o.arch.c_str(), o.model.c_str(), o.B, o.T, o.bf16 ? "bf16 GEMMs" : "fp32", o.steps);
  std::printf("%-52s %10s %7s %9s\n", "phase", "ms/step", "share", "GFLOP/s");
  double gemm_ms = 0, gemm_flops = 0;
  for (const auto& name : order) {
    const double gf = flops[name] > 0 ? flops[name] / (med[name] * 1e6) : 0;
    if (flops[name] > 0) {
      gemm_ms += med[name];
      gemm_flops += flops[name];
    }
    std::printf("%-52s %10.1f %6.1f%% ", name.c_str(), med[name], 100 * med[name] / total);
    if (gf > 0)
      std::printf("%9.1f\n", gf);
    else
      std::printf("%9s\n", "");
  }
  std::printf("%-52s %10.1f %6.1f%% %9.1f\n", "all linear-layer GEMMs", gemm_ms,
              100 * gemm_ms / total, gemm_flops / (gemm_ms * 1e6));
  std::printf("%-52s %10.1f\n", "replayed step (sum of phases)", total);
  std::printf("%-52s %10.1f  (tok/s %.1f)\n", "real step (model forward_backward + clip + AdamW)",
              median(real), double(o.B) * o.T / (median(real) * 1e-3));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_cpu_phases: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--arch")
      o.arch = value();
    else if (a == "--model")
      o.model = value();
    else if (a == "--batch")
      o.B = std::atoi(value().c_str());
    else if (a == "--seq")
      o.T = std::atoi(value().c_str());
    else if (a == "--steps")
      o.steps = std::atoi(value().c_str());
    else if (a == "--bf16")
      o.bf16 = true;
    else if (a == "--eigen")
      o.eigen = true;
    else if (a == "--step-only")
      o.step_only = true;
    else if (a == "--train")
      o.train = std::atoi(value().c_str());
    else {
      std::fprintf(stderr, "bench_cpu_phases: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (o.B <= 0 || o.T <= 0 || o.steps <= 0 || (o.arch != "gpt2" && o.arch != "llama")) {
    std::fprintf(stderr, "bench_cpu_phases: bad --arch/--batch/--seq/--steps\n");
    return 2;
  }
  try {
    namespace la = trainkit::linalg;
    la::gemm_settings settings;
    if (o.bf16) settings.precision = la::gemm_precision::bf16;
    if (o.eigen) settings.library = la::gemm_library::eigen;
    const la::scoped_gemm_settings scoped(settings);  // throws when the CPU or build cannot
    std::printf("# CPU: %s (%s); GEMMs: %s, %s\n", trainkit::this_cpu().model.c_str(),
                trainkit::this_cpu().flags().c_str(), o.bf16 ? "bf16" : "fp32",
                settings.library == la::gemm_library::onednn ? "oneDNN" : "Eigen");
    if (o.arch == "gpt2") {
      trainkit::model::gpt2_cpu m(trainkit::model::gpt2_config::preset(o.model), 1337);
      return run(o, m, replay_gpt2);
    }
    trainkit::model::llama_cpu m(trainkit::model::llama_config::preset(o.model), 1337);
    return run(o, m, replay_llama);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cpu_phases: %s\n", e.what());
    return 2;
  }
}
