// bench_llama — training-step throughput of the CPU Llama (llama_cpu + adamw_cpu) at the issue's
// two points, d6 B=4 T=64 and d12 B=4 T=256, beside PyTorch on the same architecture.
//
// Goal (issue 26): tokens/s trainkit ÷ PyTorch (transformers' LlamaForCausalLM, same shape, eager
// and torch.compile, same threads) >= 1.3 at d6 and >= 1.0 at d12. PyTorch's figures come from
// bench/llama_torch_cpu.py through $TRAINKIT_LLAMA_TORCH_JSON (its header has the two commands);
// without it only trainkit's tok/s and GFLOP/s are printed. The ratio is against the faster of
// eager and compiled. GFLOP/s uses llama_config::flops_per_token (docs/architecture.md, "Model
// families"). Figures are wall time; run on a quiet machine with OMP_NUM_THREADS matching
// --threads of the Python script.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "trainkit/core/batch.hpp"
#include "trainkit/model/llama/cpu.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/grad_clip.hpp"

namespace {

trainkit::host_batch random_batch(int B, int T, int vocab, std::uint32_t seed) {
  trainkit::host_batch b(B, T);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> tok(0, vocab - 1);
  for (auto& x : b.inputs) x = tok(rng);
  for (auto& x : b.targets) x = tok(rng);
  return b;
}

/// PyTorch's best tok/s for `preset` from $TRAINKIT_LLAMA_TORCH_JSON; 0 when absent.
double torch_tok_s(const char* preset, double* eager, double* compiled) {
  *eager = *compiled = 0;
  const char* path = std::getenv("TRAINKIT_LLAMA_TORCH_JSON");
  if (!path || !*path) return 0;
  std::ifstream in(path);
  if (!in) return 0;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.contains(preset)) return 0;
  const auto& r = j[preset];
  if (r.contains("eager") && r["eager"].is_number()) *eager = r["eager"].get<double>();
  if (r.contains("compile") && r["compile"].is_number()) *compiled = r["compile"].get<double>();
  return std::max(*eager, *compiled);
}

void bench_llama_train_step(benchmark::State& state, const char* preset, int B, int T,
                            double goal) {
  trainkit::model::llama_cpu m(trainkit::model::llama_config::preset(preset), 1337);
  trainkit::optim::adamw_cpu opt(m, trainkit::optim::adamw_config{});
  // Clipping at 1 (the trainer's default threshold), then AdamW.
  trainkit::optim::clip_then_update<trainkit::host_memory> clipped_update(1.0);
  std::uint32_t seed = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const trainkit::host_batch batch = random_batch(B, T, m.config().vocab_size, seed++);
    state.ResumeTiming();
    m.zero_grad();
    benchmark::DoNotOptimize(m.forward_backward(trainkit::view_of(batch), 1.0f));
    clipped_update(opt, m, 3e-4f);
  }
  const double tokens = double(state.iterations()) * B * T;
  state.counters["tok/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(tokens * m.flops_per_token(T) * 1e-9, benchmark::Counter::kIsRate);
  state.counters["goal_ratio"] = goal;
  double eager = 0, compiled = 0;
  const double torch = torch_tok_s(preset, &eager, &compiled);
  if (torch > 0) {
    state.counters["torch_eager_tok/s"] = eager;
    if (compiled > 0) state.counters["torch_compile_tok/s"] = compiled;
    // A rate counter is divided by the elapsed time: (tokens / torch) / s = (tok/s) / torch.
    state.counters["ratio"] = benchmark::Counter(tokens / torch, benchmark::Counter::kIsRate);
    state.SetLabel("ratio = trainkit tok/s / best PyTorch tok/s (" + std::to_string(int(torch)) +
                   "); goal >= " + std::to_string(goal).substr(0, 3));
  } else {
    state.SetLabel("no PyTorch figure: set TRAINKIT_LLAMA_TORCH_JSON (bench/llama_torch_cpu.py)");
  }
}

void configure(benchmark::internal::Benchmark* b) {
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime()->MinTime(3.0);
}

}  // namespace

BENCHMARK_CAPTURE(bench_llama_train_step, d6_B4_T64, "d6", 4, 64, 1.3)->Apply(configure);
BENCHMARK_CAPTURE(bench_llama_train_step, d12_B4_T256, "d12", 4, 256, 1.0)->Apply(configure);

BENCHMARK_MAIN();
