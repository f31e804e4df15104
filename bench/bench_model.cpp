// bench_model — training-step throughput of the CPU GPT-2 (gpt2_cpu) at B=4, T=64.
//
// Goal (issue 2): a full training step (forward + backward + AdamW) at >= 3x llm.c's CPU trainer
// on the same 2 cores: llm.c does ~790 tok/s (d2) and ~190 tok/s (d6), so the goals are
// >= 2370 and >= 570 tok/s. Each benchmark reports tok/s, the goal, and the GFLOP/s the step
// achieves by the count of docs/architecture.md, "Accounting and MFU" (flops_per_token(T) ·
// tok/s), to compare with the ~200 GFLOP/s Eigen's sgemm reaches here. `fwd_bwd` runs without
// the optimizer to show its share.
// Figures are wall time (UseRealTime); the CPU column is the whole process's (all OpenMP threads),
// so a wall time well above CPU/threads shows the threads waited for cores another process held.
// Build with -march=native (or at least AVX2+FMA): without it Eigen falls back to SSE2 and the
// GEMMs run ~4x slower.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>

#include "trainkit/core/batch.hpp"
#include "trainkit/model/gpt2/cpu.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/grad_clip.hpp"

namespace {

constexpr int batch_size = 4;
constexpr int seq_len = 64;

trainkit::host_batch random_batch(int vocab, std::uint32_t seed) {
  trainkit::host_batch b(batch_size, seq_len);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> tok(0, vocab - 1);
  for (auto& x : b.inputs) x = tok(rng);
  for (auto& x : b.targets) x = tok(rng);
  return b;
}

void report(benchmark::State& state, const trainkit::model::gpt2_cpu& m, double llmc_tok_s,
            bool with_goal) {
  const double tokens = double(state.iterations()) * batch_size * seq_len;
  state.counters["tok/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(tokens * m.flops_per_token(seq_len) * 1e-9, benchmark::Counter::kIsRate);
  if (with_goal) {
    state.counters["goal_tok/s"] = 3 * llmc_tok_s;
    state.SetLabel("llm.c ~790 (d2) / ~190 (d6) tok/s on 2 cores; goal >= 3x");
  }
}

void bench_train_step(benchmark::State& state, const char* preset, double llmc_tok_s) {
  trainkit::model::gpt2_cpu m(trainkit::model::gpt2_config::preset(preset), 1337);
  trainkit::optim::adamw_cpu opt(m, trainkit::optim::adamw_config{});
  // Clipping at 1 (the trainer's default threshold), then AdamW.
  trainkit::optim::clip_then_update<trainkit::host_memory> clipped_update(1.0);
  std::uint32_t seed = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const trainkit::host_batch batch = random_batch(m.config().vocab_size, seed++);
    state.ResumeTiming();
    m.zero_grad();
    const float loss = m.forward_backward(trainkit::view_of(batch), 1.0f);
    clipped_update(opt, m, 3e-4f);
    benchmark::DoNotOptimize(loss);
  }
  report(state, m, llmc_tok_s, true);
}

void bench_forward_backward(benchmark::State& state, const char* preset) {
  trainkit::model::gpt2_cpu m(trainkit::model::gpt2_config::preset(preset), 1337);
  const trainkit::host_batch batch = random_batch(m.config().vocab_size, 1);
  for (auto _ : state) {
    m.zero_grad();
    benchmark::DoNotOptimize(m.forward_backward(trainkit::view_of(batch), 1.0f));
  }
  report(state, m, 0, false);
}

// Several seconds per case: a d6 step takes ~0.5 s and the machine is shared.
void configure(benchmark::internal::Benchmark* b) {
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime()->MinTime(3.0);
}

}  // namespace

BENCHMARK_CAPTURE(bench_train_step, d2, "d2", 790.0)->Apply(configure);
BENCHMARK_CAPTURE(bench_train_step, d6, "d6", 190.0)->Apply(configure);
BENCHMARK_CAPTURE(bench_forward_backward, d2, "d2")->Apply(configure);
BENCHMARK_CAPTURE(bench_forward_backward, d6, "d6")->Apply(configure);

BENCHMARK_MAIN();
