// profile_kernels — device time of every kernel and GEMM of one GPT-2 training step, at the d12
// and d48 shapes (T = 1024), each beside the work it does and its fraction of the device's
// measured ceilings.
//
// Ceilings first, in the same run (METHOD.md): a large bf16 GEMM through the model's own cuBLASLt
// path (8192³, fp32 accumulation) and a 2 GiB device-to-device copy (bytes read + written). Then,
// per shape, each operation of a layer as gpt2_cuda issues it: the four linear layers forward
// (with their fused epilogues) and backward (weight/bias-gradient GEMM, input-gradient GEMM),
// attention forward and backward (materialised T×T: FLOPs counted for the full square, which is
// what the GEMMs compute), the LM head GEMMs and the classifier kernel, LayerNorm forward (with
// the residual add) and backward, GELU (the recompute kernel), the encoder backward (atomic and
// deterministic bucket variants, wpe) and the AdamW update over the whole model. GEMMs are
// reported in TFLOP/s against the GEMM ceiling, the rest in GB/s (fewest bytes each must move)
// against the copy ceiling. Inputs are random (never zeros); each figure is the median of 10
// event-timed runs after 2 warm-ups. Also printed: the matmul fallback count (GEMMs whose fused
// epilogue cuBLASLt had no algorithm for) and gpt2_cuda's memory report for the shapes.
//   profile_kernels [--out FILE] [--batch B]     (B = 8 by default; the table also goes to FILE)
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/device.hpp"
#include "trainkit/core/cuda/stream.hpp"
#include "trainkit/core/linalg/gemm_cublaslt.cuh"
#include "trainkit/model/cuda/attention.cuh"
#include "trainkit/model/cuda/classifier.cuh"
#include "trainkit/model/cuda/elementwise.cuh"
#include "trainkit/model/cuda/encoder.cuh"
#include "trainkit/model/cuda/layernorm.cuh"
#include "trainkit/model/gpt2/config.hpp"
#include "trainkit/model/gpt2/cuda_memory.hpp"
#include "trainkit/optim/cuda/adamw.cuh"
#include "trainkit/optim/cuda/grad_clip.cuh"

namespace tk = trainkit;
namespace k = trainkit::model::kernels;
using k::bf16_t;

namespace {

// Uniform in ±scale from a hash of the index: random-looking, reproducible, never all zeros.
__global__ void fill_random_kernel(bf16_t* p, std::size_t n, std::uint64_t seed, float scale) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  std::uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  p[i] = __float2bfloat16((float(x >> 40) / float(1 << 24) * 2.0f - 1.0f) * scale);
}

__global__ void fill_tokens_kernel(std::int32_t* p, std::size_t n, int V) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] = std::int32_t((i * 2654435761ull + 12345) % std::uint64_t(V));
}

struct profiler {
  cudaStream_t s;
  FILE* out;
  double gemm_tflops = 0, copy_gbs = 0;

  void line(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

  template <class F>
  double median_ms(F&& f, int warm = 2, int reps = 10) {
    for (int i = 0; i < warm; ++i) f();
    tk::cuda::event a, b;
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      a.record(s);
      f();
      b.record(s);
      t.push_back(tk::cuda::elapsed_ms(a, b));
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
  // One row: FLOPs (GEMM) or bytes (memory-bound), the rate and its share of the ceiling.
  template <class F>
  void flops(const char* shape, const char* what, double f, F&& run) {
    const double ms = median_ms(run), rate = f / (ms * 1e9);
    line("%-5s %-34s %9.3f %10.1f TFLOP/s %6.1f%%\n", shape, what, ms, rate,
         gemm_tflops > 0 ? 100 * rate / gemm_tflops : 0.0);
  }
  template <class F>
  void bytes(const char* shape, const char* what, double b, F&& run) {
    const double ms = median_ms(run), rate = b / (ms * 1e6);
    line("%-5s %-34s %9.3f %10.1f GB/s    %6.1f%%\n", shape, what, ms, rate,
         copy_gbs > 0 ? 100 * rate / copy_gbs : 0.0);
  }
};

void profiler::line(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::fputs(buf, stdout);
  std::fflush(stdout);
  if (out) std::fputs(buf, out), std::fflush(out);
}

template <class T>
tk::cuda::device_buffer<T> buffer(std::size_t n) {
  return tk::cuda::device_buffer<T>(n);
}

void fill(tk::cuda::device_buffer<bf16_t>& b, std::uint64_t seed, float scale, cudaStream_t s) {
  fill_random_kernel<<<k::ceil_div(b.size(), 256), 256, 0, s>>>(b.data(), b.size(), seed, scale);
  TRAINKIT_CUDA_CHECK_LAUNCH("fill_random_kernel");
}

k::matmul_arguments linear_fwd(bf16_t* out, const bf16_t* in, const bf16_t* w, const bf16_t* bias,
                               int N, int IC, int OC, k::epilogue ep, bf16_t* aux) {
  k::matmul_arguments x;
  x.a = in, x.lda = IC;
  x.b = w, x.trans_b = true, x.ldb = IC;
  x.d = out, x.ldd = OC;
  x.m = N, x.n = OC, x.k = IC;
  x.ep = ep, x.bias = bias, x.aux = aux, x.ld_aux = OC;
  return x;
}

void profile_shape(profiler& p, k::matmul_context& mm, const char* preset, int B, int T) {
  const auto cfg = tk::model::gpt2_config::preset(preset);
  const int C = cfg.channels, H = cfg.num_heads, Vp = cfg.padded_vocab_size, V = cfg.vocab_size;
  const int N = B * T;
  const std::size_t NC = std::size_t(N) * C;
  const cudaStream_t s = p.s;
  p.line("\n---- %s (L%d C%d H%d) B=%d T=%d: %d tokens ----\n", preset, cfg.num_layers, C, H, B, T,
         N);
  p.line("%-5s %-34s %9s %18s %7s\n", "shape", "operation", "ms", "rate", "of ceil");
  // One layer's weights and activations (the layer loop repeats these L times).
  auto x = buffer<bf16_t>(NC), ln = buffer<bf16_t>(NC), res = buffer<bf16_t>(NC);
  auto qkv = buffer<bf16_t>(3 * NC), atty = buffer<bf16_t>(NC), proj = buffer<bf16_t>(NC);
  auto fch = buffer<bf16_t>(4 * NC), fch_gelu = buffer<bf16_t>(4 * NC),
       dfch = buffer<bf16_t>(4 * NC);
  auto dx = buffer<bf16_t>(4 * NC), dout = buffer<bf16_t>(4 * NC);
  auto qkvw = buffer<bf16_t>(3 * std::size_t(C) * C), qkvb = buffer<bf16_t>(3 * C);
  auto attw = buffer<bf16_t>(std::size_t(C) * C), attb = buffer<bf16_t>(C);
  auto fcw = buffer<bf16_t>(4 * std::size_t(C) * C), fcb = buffer<bf16_t>(4 * C);
  auto fcpw = buffer<bf16_t>(4 * std::size_t(C) * C), fcpb = buffer<bf16_t>(C);
  auto dw = buffer<bf16_t>(4 * std::size_t(C) * C), db = buffer<bf16_t>(4 * C);
  auto bias_grad = buffer<bf16_t>(4 * C);
  auto lnw = buffer<bf16_t>(C), lnb = buffer<bf16_t>(C), dlnw = buffer<bf16_t>(C),
       dlnb = buffer<bf16_t>(C);
  auto mean = buffer<float>(N), rstd = buffer<float>(N);
  auto partial = buffer<float>(k::layernorm_partial_floats(std::size_t(N), C));
  std::uint64_t seed = 1;
  for (auto* b :
       {&x,    &ln,   &res, &qkv, &atty, &proj, &fch, &fch_gelu, &dfch, &dx,  &dout, &qkvw, &qkvb,
        &attw, &attb, &fcw, &fcb, &fcpw, &fcpb, &dw,  &db,       &lnw,  &lnb, &dlnw, &dlnb})
    fill(*b, seed++, b == &lnw ? 1.0f : 0.5f, s);

  const double nc = double(N) * C;
  struct lin {
    const char* name;
    bf16_t *out, *in, *w, *b;
    int IC, OC;
    k::epilogue ep;
  };
  const lin lins[] = {
      {"qkv", qkv.data(), ln.data(), qkvw.data(), qkvb.data(), C, 3 * C, k::epilogue::bias},
      {"attproj", proj.data(), atty.data(), attw.data(), attb.data(), C, C, k::epilogue::bias},
      {"fc (+gelu)", fch_gelu.data(), ln.data(), fcw.data(), fcb.data(), C, 4 * C,
       k::epilogue::gelu_aux_bias},
      {"fcproj", proj.data(), fch_gelu.data(), fcpw.data(), fcpb.data(), 4 * C, C,
       k::epilogue::bias},
  };
  for (const lin& l : lins) {
    const double f = 2.0 * N * double(l.IC) * l.OC;
    const std::string fwd = std::string(l.name) + " fwd";
    p.flops(preset, fwd.c_str(), f,
            [&] { mm.run(linear_fwd(l.out, l.in, l.w, l.b, N, l.IC, l.OC, l.ep, fch.data()), s); });
    const std::string bw = std::string(l.name) + " bwd dW+db (bgradb)";
    p.flops(preset, bw.c_str(), f, [&] {
      k::matmul_arguments gw;
      gw.a = dout.data(), gw.trans_a = true, gw.lda = l.OC;
      gw.b = l.in, gw.ldb = l.IC;
      gw.d = dw.data(), gw.ldd = l.IC;
      gw.m = l.OC, gw.n = l.IC, gw.k = N;
      gw.beta = 1.0f;
      gw.ep = k::epilogue::bgradb;
      gw.bias_grad = bias_grad.data();
      mm.run(gw, s);
      k::accumulate(db.data(), bias_grad.data(), l.OC, s);
    });
    const bool dgelu = l.IC == 4 * C;
    const std::string bx = std::string(l.name) + (dgelu ? " bwd dX (+dgelu)" : " bwd dX");
    p.flops(preset, bx.c_str(), f, [&] {
      k::matmul_arguments gi;
      gi.a = dout.data(), gi.lda = l.OC;
      gi.b = l.w, gi.ldb = l.IC;
      gi.d = dx.data(), gi.ldd = l.IC;
      gi.m = N, gi.n = l.IC, gi.k = l.OC;
      if (dgelu) gi.ep = k::epilogue::dgelu, gi.aux = fch.data(), gi.ld_aux = l.IC;
      mm.run(gi, s);
    });
  }

  {  // attention
    const std::size_t att = k::attention_matrix_elements(B, H, T);
    auto qkvr = buffer<bf16_t>(3 * NC), attm = buffer<bf16_t>(att), heads = buffer<bf16_t>(NC),
         dqkvr = buffer<bf16_t>(3 * NC), dscores = buffer<bf16_t>(att);
    auto scores = buffer<float>(att);
    k::attention_buffers ab;
    ab.qkvr = qkvr.data(), ab.att = attm.data(), ab.scores = scores.data();
    ab.dscores = dscores.data(), ab.heads = heads.data(), ab.dqkvr = dqkvr.data();
    const double f_fwd = 4.0 * B * double(T) * T * C;  // S = QKᵀ and Y = PV over the full square
    p.flops(preset, "attention fwd (T x T materialised)", f_fwd,
            [&] { k::attention_forward(mm, atty.data(), qkv.data(), ab, B, T, C, H, s); });
    p.flops(preset, "attention bwd", 2 * f_fwd,
            [&] { k::attention_backward(mm, qkv.data(), atty.data(), ab, B, T, C, H, s); });
  }

  {  // LM head and classifier
    auto wte = buffer<bf16_t>(std::size_t(Vp) * C), dwte = buffer<bf16_t>(std::size_t(Vp) * C);
    auto logits = buffer<bf16_t>(std::size_t(N) * Vp);
    auto losses = buffer<float>(std::size_t(N) + 2);
    auto targets = buffer<std::int32_t>(N), tokens = buffer<std::int32_t>(N);
    fill(wte, 101, 0.02f, s);
    fill(dwte, 102, 0.01f, s);
    fill_tokens_kernel<<<k::ceil_div(std::size_t(N), 256), 256, 0, s>>>(targets.data(), N, V);
    TRAINKIT_CUDA_CHECK_LAUNCH("fill_tokens_kernel");
    fill_tokens_kernel<<<k::ceil_div(std::size_t(N), 256), 256, 0, s>>>(tokens.data(), N, V - 7);
    TRAINKIT_CUDA_CHECK_LAUNCH("fill_tokens_kernel");
    const double f = 2.0 * N * double(C) * Vp;
    k::matmul_arguments head;
    head.a = ln.data(), head.lda = C;
    head.b = wte.data(), head.trans_b = true, head.ldb = C;
    head.d = logits.data(), head.ldd = Vp;
    head.m = N, head.n = Vp, head.k = C;
    p.flops(preset, "lm head fwd (logits)", f, [&] { mm.run(head, s); });
    // Forward-only classifier: the logits stay logits, so every repetition sees the same input.
    p.bytes(preset, "classifier (softmax + loss, fwd)", 2.0 * N * Vp, [&] {
      k::classifier(logits.data(), losses.data(), targets.data(),
                    reinterpret_cast<int*>(losses.data() + N), N, V, Vp, 0.0f, false, s);
    });
    p.bytes(preset, "classifier (fwd + dlogits in place)", 4.0 * N * Vp, [&] {
      k::classifier(logits.data(), losses.data(), targets.data(),
                    reinterpret_cast<int*>(losses.data() + N), N, V, Vp, 1.0f / N, true, s);
    });
    p.flops(preset, "lm head bwd dwte", f, [&] {
      k::matmul_arguments gw;
      gw.a = logits.data(), gw.trans_a = true, gw.lda = Vp;
      gw.b = ln.data(), gw.ldb = C;
      gw.d = dwte.data(), gw.ldd = C;
      gw.m = Vp, gw.n = C, gw.k = N;
      gw.beta = 1.0f;
      mm.run(gw, s);
    });
    p.flops(preset, "lm head bwd dX", f, [&] {
      k::matmul_arguments gi;
      gi.a = logits.data(), gi.lda = Vp;
      gi.b = wte.data(), gi.ldb = C;
      gi.d = dx.data(), gi.ldd = C;
      gi.m = N, gi.n = C, gi.k = Vp;
      mm.run(gi, s);
    });
    // Encoder backward: dout rows scattered into the token rows of dwte (+ the wpe sum).
    p.bytes(preset, "encoder bwd wte (atomic)", 2.0 * 2.0 * nc, [&] {
      k::encoder_backward_atomic(dwte.data(), dout.data(), tokens.data(), N, C, V, s);
    });
    std::vector<std::int32_t> host_tokens(N);
    tk::cuda::copy_to_host(std::span<std::int32_t>(host_tokens), tokens.data(), s);
    const auto buckets = k::make_token_buckets(host_tokens, V);
    const std::vector<std::int32_t> packed = buckets.packed();
    auto dev_packed = buffer<std::int32_t>(packed.size());
    tk::cuda::copy_to_device(dev_packed.data(), std::span<const std::int32_t>(packed), s);
    p.bytes(preset, "encoder bwd wte (buckets, determ.)", 2.0 * 2.0 * nc, [&] {
      k::encoder_backward_buckets(dwte.data(), dout.data(), dev_packed.data(),
                                  int(buckets.tokens.size()), C, s);
    });
    auto dwpe = buffer<bf16_t>(std::size_t(T) * C);
    fill(dwpe, 103, 0.01f, s);
    p.bytes(preset, "encoder bwd wpe", 2.0 * nc,
            [&] { k::encoder_backward_wpe(dwpe.data(), dout.data(), B, T, C, s); });
  }

  // LayerNorm with the residual add: reads a and b, writes the sum and the normalised output.
  p.bytes(preset, "layernorm fwd (+ residual)", 4 * 2.0 * nc, [&] {
    k::layernorm_forward(res.data(), ln.data(), mean.data(), rstd.data(), x.data(), proj.data(),
                         lnw.data(), lnb.data(), N, C, s);
  });
  // Reads dout and x, reads and writes dinp (accumulated).
  p.bytes(preset, "layernorm bwd", 4 * 2.0 * nc, [&] {
    k::layernorm_backward(dx.data(), dlnw.data(), dlnb.data(), partial.data(), dout.data(),
                          res.data(), lnw.data(), mean.data(), rstd.data(), N, C, s);
  });
  p.bytes(preset, "gelu fwd (recompute)", 2 * 2.0 * 4 * nc,
          [&] { k::gelu_forward(fch_gelu.data(), fch.data(), std::int64_t(4 * NC), s); });

  {  // AdamW over the whole model: bf16 grads and params, fp32 master, m, v
    const std::size_t n = cfg.num_parameters();
    auto params = buffer<bf16_t>(n), grads = buffer<bf16_t>(n);
    auto master = buffer<float>(n), m = buffer<float>(n), v = buffer<float>(n);
    auto scale = buffer<float>(2);
    fill(grads, 201, 0.01f, s);
    fill(params, 202, 0.02f, s);
    tk::optim::kernels::bf16_to_float(master.data(), params.data(), n, s);
    m.fill_bytes_async(0, s);
    v.fill_bytes_async(0, s);
    const float one[2] = {1.0f, 1.0f};
    tk::cuda::copy_to_device(scale.data(), std::span<const float>(one), s);
    tk::optim::kernels::segment_table table;
    table.count = 1;
    table.seg[0].begin = 0;
    table.seg[0].end = n;
    table.seg[0].first_chunk = 0;
    table.seg[0].decay = 0.1f;
    table.total_chunks = std::uint32_t((n + tk::optim::kernels::update_chunk - 1) /
                                       tk::optim::kernels::update_chunk);
    tk::optim::kernels::update_constants c;
    c.lr = 1e-4f, c.beta1 = 0.9f, c.one_minus_beta1 = 0.1f, c.beta2 = 0.95f;
    c.one_minus_beta2 = 0.05f, c.bias1 = 0.1f, c.bias2 = 0.05f, c.eps = 1e-8f, c.step = 1;
    // Reads grad (2), master, m, v (12); writes master, m, v (12) and params (2).
    p.bytes(preset, "adamw update (whole model)", 28.0 * double(n), [&] {
      tk::optim::kernels::adamw_update(params.data(), master.data(), m.data(), v.data(),
                                       grads.data(), scale.data(), table, c, s);
    });
    const std::size_t temp_bytes = tk::optim::kernels::sum_of_squares_temp_bytes(n);
    auto temp = buffer<std::byte>(std::max<std::size_t>(temp_bytes, 1));
    auto sum = buffer<double>(1);
    p.bytes(preset, "adamw grad norm (sum of squares)", 2.0 * double(n), [&] {
      tk::optim::kernels::sum_of_squares(sum.data(), grads.data(), n, temp.data(), temp_bytes, s);
    });
  }
  p.line("%s memory report (gpt2_cuda at B=%d T=%d, recompute 0): %s\n", preset, B, T,
         tk::model::gpt2_cuda_memory(cfg, B, T, 0).to_string().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const char* out_path = nullptr;
  int B = 8;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out_path = argv[++i];
    } else if (std::strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
      B = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: profile_kernels [--out FILE] [--batch B]\n");
      return 2;
    }
  }
  if (B <= 0) {
    std::fprintf(stderr, "profile_kernels: --batch must be positive\n");
    return 2;
  }
  if (!tk::cuda::device_present()) {
    std::printf("profile_kernels: no CUDA device present; nothing measured\n");
    return 0;
  }
  FILE* out = out_path ? std::fopen(out_path, "w") : nullptr;
  if (out_path && !out) {
    std::fprintf(stderr, "profile_kernels: cannot write %s\n", out_path);
    return 2;
  }
  try {
    tk::cuda::stream stream;
    profiler p{stream.get(), out};
    k::matmul_context mm;
    const auto dev = tk::cuda::query_device();
    p.line("profile_kernels on %s (%d SMs); median of 10 event-timed runs after 2 warm-ups\n",
           dev.name.c_str(), dev.sm_count);
    {  // ceilings
      const int n = 8192;
      auto a = buffer<bf16_t>(std::size_t(n) * n), b = buffer<bf16_t>(std::size_t(n) * n),
           d = buffer<bf16_t>(std::size_t(n) * n);
      fill(a, 11, 1.0f, stream.get());
      fill(b, 12, 1.0f, stream.get());
      k::matmul_arguments x;
      x.a = a.data(), x.b = b.data(), x.d = d.data();
      x.m = x.n = x.k = n;
      x.lda = x.ldb = x.ldd = n;
      const double ms = p.median_ms([&] { mm.run(x, stream.get()); }, 3, 10);
      p.gemm_tflops = 2.0 * n * double(n) * n / (ms * 1e9);
      const std::size_t bytes = std::size_t(2) << 30;
      auto src = buffer<std::byte>(bytes), dst = buffer<std::byte>(bytes);
      TRAINKIT_CUDA_CHECK(cudaMemsetAsync(src.data(), 0x5a, bytes, stream.get()));
      const double cms = p.median_ms([&] {
        TRAINKIT_CUDA_CHECK(
            cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, stream.get()));
      });
      p.copy_gbs = 2.0 * double(bytes) / (cms * 1e6);
      p.line("ceiling: bf16 GEMM 8192^3 (cuBLASLt, fp32 accumulate) %.1f TFLOP/s (%.3f ms)\n",
             p.gemm_tflops, ms);
      p.line("ceiling: device-to-device copy 2 GiB %.0f GB/s read+write (%.3f ms)\n", p.copy_gbs,
             cms);
    }
    profile_shape(p, mm, "d12", B, 1024);
    profile_shape(p, mm, "d48", B, 1024);
    stream.synchronize();
    p.line("\nmatmul fallbacks (epilogue through the fallback kernels): %d\n", mm.fallbacks());
    const auto mem = tk::cuda::device_memory_info();
    p.line("device memory: %.1f GiB free of %.1f GiB\n", double(mem.free) / double(1ull << 30),
           double(mem.total) / double(1ull << 30));
    p.line("profile done\n");
  } catch (const std::exception& e) {
    std::printf("profile_kernels failed: %s\n", e.what());
    if (out) std::fclose(out);
    return 1;
  }
  if (out) std::fclose(out);
  return 0;
}
