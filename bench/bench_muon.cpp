// bench_muon — what the Muon optimizer family costs on the CPU, as a share of a training step.
//
// Goal (issue 27): Muon's optimizer time ÷ step time <= 10% at d12 with 65,536 tokens per step on
// the CPU. A d12 step of 65,536 tokens is 64 micro-batches of B1·T1024 (forward + backward), far
// too long to time whole on a shared 2-core machine, so the step is measured as one micro-batch's
// forward + backward (after a warm-up) times the micro-batches a step needs, plus the optimizer's
// update, timed on its own (muon_cpu.update: five Newton–Schulz iterations for each of d12's 72
// matrices — q, k and v separately — and AdamW over the embeddings, norms and biases). The figure
// printed beside the goal is update ÷ (micro-batches · forward_backward + update); adamw_cpu's
// update is timed too, for comparison. The Newton–Schulz GFLOP/s shows how close the iteration
// comes to the machine's sgemm rate.
//
//   bench_muon [PRESET [TOKENS_PER_STEP]]      (defaults d12 65536; d2/d6 for a quick look)
// Wall time; OMP_NUM_THREADS threads (all cores by default). Memory: ~3 GB at d12.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "trainkit/core/batch.hpp"
#include "trainkit/core/execution_context.hpp"
#include "trainkit/model/gpt2/cpu.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/detail/newton_schulz.hpp"
#include "trainkit/optim/muon_cpu.hpp"

namespace {

namespace tk = trainkit;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

tk::host_batch random_batch(int B, int T, int vocab, std::uint32_t seed) {
  tk::host_batch b(B, T);
  std::mt19937 rng(seed);
  for (auto& t : b.inputs) t = std::int32_t(rng() % std::uint32_t(vocab));
  for (auto& t : b.targets) t = std::int32_t(rng() % std::uint32_t(vocab));
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string preset = argc > 1 ? argv[1] : "d12";
  const long tokens_per_step = argc > 2 ? std::atol(argv[2]) : 65536;
  constexpr int B = 1, T = 1024;
  tk::model::gpt2_cpu model(tk::model::gpt2_config::preset(preset), 1337);
  const int T_model = std::min(T, model.config().max_seq_len);
  const long micro_batches = std::max(1L, tokens_per_step / long(B * T_model));

  // One micro-batch's forward + backward, after a warm-up one.
  const tk::host_batch batch = random_batch(B, T_model, model.config().vocab_size, 1);
  model.forward_backward(tk::view_of(batch), 1.0f);
  auto t0 = std::chrono::steady_clock::now();
  model.forward_backward(tk::view_of(batch), 1.0f);
  const double fwd_bwd_s = seconds_since(t0);

  tk::host_context ctx;
  tk::optim::muon_cpu muon(model, {});
  muon.update(model, 6e-4f, {1.0}, ctx);  // warm-up: workspaces, pages of the state
  t0 = std::chrono::steady_clock::now();
  muon.update(model, 6e-4f, {1.0}, ctx);
  const double muon_s = seconds_since(t0);

  tk::optim::adamw_cpu adamw(model, {});
  adamw.update(model, 6e-4f, {1.0}, ctx);
  t0 = std::chrono::steady_clock::now();
  adamw.update(model, 6e-4f, {1.0}, ctx);
  const double adamw_s = seconds_since(t0);

  double ns_flops = 0;
  for (const tk::optim::muon_matrix& m : muon.matrices())
    ns_flops += tk::optim::detail::newton_schulz_flops(m.rows, m.cols, muon.config().ns_steps);

  const double step_s = double(micro_batches) * fwd_bwd_s + muon_s;
  const double share = muon_s / step_s;
  std::printf("bench_muon: %s, %ld tokens per step = %ld micro-batches of B%d T%d\n",
              preset.c_str(), tokens_per_step, micro_batches, B, T_model);
  std::printf("  forward+backward, one micro-batch   %10.3f s\n", fwd_bwd_s);
  std::printf("  muon_cpu update (%zu matrices)       %10.3f s   (%.1f GFLOP/s in Newton-Schulz)\n",
              muon.matrices().size(), muon_s, ns_flops / muon_s * 1e-9);
  std::printf("  adamw_cpu update (for comparison)    %10.3f s\n", adamw_s);
  std::printf("  Muon's optimizer time / step time    %10.1f %%   goal <= 10%% %s\n", 100.0 * share,
              share <= 0.10 ? "(met)" : "(NOT met)");
  return 0;
}
