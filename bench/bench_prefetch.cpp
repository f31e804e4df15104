// bench_prefetch — how much of a slow producer the threaded prefetcher hides from the loop.
//
// Goal (issue 2): with a consumer step of 20 ms and a producer that needs 15 ms per batch, the
// threaded prefetcher's data wait is < 1% of the step time in steady state (the first batch, which
// nothing can hide, is excluded). The inline prefetcher is measured for contrast (it must wait the
// full 15 ms every step), and so is a producer slower than the step, which no look-ahead can hide
// (wait ≈ producer - step). The step is a sleep, not a spin, so the producer thread gets a core on
// a loaded 2-core machine; both sides being sleeps, the figures measure hand-off, not CPU.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "trainkit/data/synthetic_source.hpp"
#include "trainkit/prefetch/inline_prefetcher.hpp"
#include "trainkit/prefetch/threaded_prefetcher.hpp"

namespace td = trainkit::data;
namespace tp = trainkit::prefetch;
using namespace std::chrono_literals;

namespace {

constexpr auto step = 20ms;
constexpr int steps = 40;

struct result {
  std::string name;
  double producer_ms;
  double wait_pct;
  double max_wait_ms;
  const char* goal;
};
std::vector<result> g_results;

template <class Prefetcher>
void run_loop(benchmark::State& state, const char* name, const char* goal) {
  const auto delay = std::chrono::microseconds(state.range(0));
  double total_wait = 0, max_wait = 0;
  for (auto _ : state) {
    Prefetcher p{td::synthetic_source({.batch_size = 8, .seq_len = 1024, .produce_delay = delay})};
    benchmark::DoNotOptimize(p.next().inputs);  // warm-up: the first batch cannot be hidden
    std::this_thread::sleep_for(step);
    total_wait = max_wait = 0;
    for (int i = 0; i < steps; ++i) {
      benchmark::DoNotOptimize(p.next().inputs);
      total_wait += p.wait_ms();
      max_wait = std::max(max_wait, p.wait_ms());
      std::this_thread::sleep_for(step);  // the model's step
    }
  }
  const double step_ms = std::chrono::duration<double, std::milli>(step).count();
  const double pct = 100.0 * total_wait / (steps * step_ms);
  state.counters["wait_pct_of_step"] = pct;
  state.counters["max_wait_ms"] = max_wait;
  g_results.push_back({name, double(delay.count()) / 1000.0, pct, max_wait, goal});
}

void BM_inline(benchmark::State& state) {
  run_loop<tp::inline_prefetcher<td::synthetic_source>>(state, "inline", "(contrast, no goal)");
}
void BM_threaded_4(benchmark::State& state) {
  const bool hideable = state.range(0) < 20'000;
  run_loop<tp::threaded_prefetcher<td::synthetic_source, 4>>(
      state, "threaded<4>", hideable ? "goal: < 1%" : "(producer > step: cannot hide)");
}

BENCHMARK(BM_inline)
    ->Arg(15'000)
    ->ArgName("producer_us")
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_threaded_4)
    ->Arg(15'000)
    ->Arg(25'000)
    ->ArgName("producer_us")
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  std::printf("\nbench_prefetch summary (step %d ms, %d steps, first batch excluded)\n",
              int(std::chrono::duration_cast<std::chrono::milliseconds>(step).count()), steps);
  for (const auto& r : g_results) {
    const bool met = r.wait_pct < 1.0;
    std::printf("  %-12s producer %5.1f ms  data wait %6.2f%% of step  (max %6.2f ms)  %s%s\n",
                r.name.c_str(), r.producer_ms, r.wait_pct, r.max_wait_ms, r.goal,
                std::string(r.goal).rfind("goal", 0) == 0 ? (met ? "  MET" : "  NOT MET") : "");
  }
  benchmark::Shutdown();
  return 0;
}
