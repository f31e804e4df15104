// bench_checkpoint — the training-loop stall a checkpoint of a 2 GiB state causes: the
// synchronous checkpointer (the whole write + fsync blocks the loop) against the asynchronous one
// (only the snapshot blocks), with a plain memcpy of the state as the floor.
//
// Goal (issue 3): async stall <= 5% of the sync stall, and <= 1.5x a plain memcpy of the state.
// This is the asynchronous checkpointer's worst case: no step runs between `save` and the next
// update, so `before_update` (called at once, and timed with `save`) waits for the whole copy.
// Inside training the copy overlaps the next forward/backward (bench/ckpt_stall.sh measures that).
// The state is four f32 tensors of 512 MiB (parameters, two AdamW moments, one more), written to
// $TRAINKIT_BENCH_CKPT_DIR (default: a fresh directory under the system temp dir; put it on the
// disk you train on). Each async iteration first waits, untimed, for the previous save to finish
// writing — a loop whose checkpoint interval is longer than one write, the case the design is for
// (a shorter interval makes the next save wait, and that wait is stall; the background write time
// printed below is the shortest interval that never waits). The first async save, which also
// allocates and pre-faults the staging memory, is reported separately; later saves reuse it.
// Writing 2 GiB several times is slow, so iterations are few (fixed below).
// TRAINKIT_BENCH_CKPT_MIB sets another state size (four equal tensors; bench/ckpt_stall.sh times
// the memcpy of a d12 state with it).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "trainkit/checkpoint/asio_checkpointer.hpp"
#include "trainkit/checkpoint/sync_checkpointer.hpp"
#include "trainkit/core/crc32c.hpp"
#include "trainkit/core/timing.hpp"

namespace ck = trainkit::checkpoint;
namespace fs = std::filesystem;

namespace {

constexpr int tensor_count = 4;

// Floats per tensor: 512 MiB each (2 GiB in all), or a quarter of $TRAINKIT_BENCH_CKPT_MIB.
std::size_t tensor_floats_from_env() {
  const char* env = std::getenv("TRAINKIT_BENCH_CKPT_MIB");
  const double mib = env != nullptr ? std::atof(env) : 2048.0;
  const auto floats = std::size_t(mib * double(1 << 20) / tensor_count / sizeof(float));
  return floats > 0 ? floats : 1;
}
const std::size_t tensor_floats = tensor_floats_from_env();

struct bench_state {
  std::vector<std::vector<float>> tensors;
  fs::path dir;

  bench_state() {
    const char* env = std::getenv("TRAINKIT_BENCH_CKPT_DIR");
    dir = env != nullptr
              ? fs::path(env)
              : fs::temp_directory_path() / ("trainkit_bench_ckpt_" + std::to_string(::getpid()));
    for (int t = 0; t < tensor_count; ++t) {
      std::vector<float> v(tensor_floats);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(i % 1013) * 0.001f + float(t);
      tensors.push_back(std::move(v));
    }
  }
  ~bench_state() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  std::size_t bytes() const { return tensor_count * tensor_floats * sizeof(float); }

  ck::checkpoint_state view(std::uint64_t step) {
    static const char* names[tensor_count] = {"params", "optim.m", "optim.v", "extra"};
    ck::checkpoint_state s;
    s.step = step;
    for (int t = 0; t < tensor_count; ++t)
      s.tensors.push_back(trainkit::make_state_tensor(names[t], std::span(tensors[t]),
                                                      {std::int64_t(tensor_floats)}));
    s.meta["data_position"] = "epoch=0 shard=0 offset=" + std::to_string(step);
    return s;
  }
};

bench_state& state_2gb() {
  static bench_state s;
  return s;
}

struct figures {
  double memcpy_ms = 0, sync_ms = 0, async_ms = 0, async_first_ms = 0, async_write_ms = 0;
} g;

void BM_memcpy(benchmark::State& state) {
  auto& s = state_2gb();
  std::vector<std::unique_ptr<float[]>> dst;
  for (int t = 0; t < tensor_count; ++t) {
    dst.emplace_back(new float[tensor_floats]);
    std::memset(dst.back().get(), 0, tensor_floats * sizeof(float));  // fault the pages in
  }
  double total = 0;
  for (auto _ : state) {
    trainkit::stopwatch clock;
    for (int t = 0; t < tensor_count; ++t)
      std::memcpy(dst[t].get(), s.tensors[t].data(), tensor_floats * sizeof(float));
    benchmark::ClobberMemory();
    const double ms = clock.elapsed_ms();
    total += ms;
    state.SetIterationTime(ms / 1e3);
  }
  g.memcpy_ms = total / double(state.iterations());
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(s.bytes()));
}

// CRC-32C of the state (the checkpoint's second pass over it, on its own thread beside the write):
// the SSE4.2 instruction (where the CPU has it) against the portable tables.
template <bool Hardware>
void BM_crc32c(benchmark::State& state) {
  auto& s = state_2gb();
#ifdef TRAINKIT_CRC32C_HAS_SSE42
  if (Hardware && !trainkit::detail::cpu_has_sse42()) {
    state.SkipWithError("this CPU has no SSE4.2");
    return;
  }
#else
  if (Hardware) {
    state.SkipWithError("no hardware CRC-32C on this architecture");
    return;
  }
#endif
  std::uint32_t sum = 0;
  for (auto _ : state) {
    for (const auto& t : s.tensors) {
#ifdef TRAINKIT_CRC32C_HAS_SSE42
      if constexpr (Hardware) {
        sum ^= trainkit::detail::crc32c_extend_sse42(0, t.data(), t.size() * sizeof(float));
        continue;
      }
#endif
      sum ^= trainkit::detail::crc32c_extend_table(0, t.data(), t.size() * sizeof(float));
    }
  }
  benchmark::DoNotOptimize(sum);
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(s.bytes()));
}

void BM_sync_checkpointer(benchmark::State& state) {
  auto& s = state_2gb();
  ck::sync_checkpointer c({s.dir / "sync", 1});
  std::uint64_t step = 0;
  double total = 0;
  for (auto _ : state) {
    c.save(s.view(++step));
    total += c.last_stall_ms();
    state.SetIterationTime(c.last_stall_ms() / 1e3);
  }
  g.sync_ms = total / double(state.iterations());
  state.counters["stall_ms"] = g.sync_ms;
}

void BM_asio_checkpointer(benchmark::State& state) {
  auto& s = state_2gb();
  ck::asio_checkpointer c({s.dir / "async", 1});
  std::uint64_t step = 0;
  c.save(s.view(++step));  // first save: allocates and pre-faults the staging memory
  c.before_update();
  g.async_first_ms = c.last_stall_ms() + c.last_update_wait_ms();
  double total = 0, write_total = 0;
  for (auto _ : state) {
    state.PauseTiming();
    trainkit::stopwatch write_clock;  // the "training" between checkpoints: longer than a write
    c.wait();
    write_total += write_clock.elapsed_ms();
    state.ResumeTiming();
    c.save(s.view(++step));
    c.before_update();  // no step in between: the whole copy is stall
    const double stall = c.last_stall_ms() + c.last_update_wait_ms();
    total += stall;
    state.SetIterationTime(stall / 1e3);
  }
  trainkit::stopwatch write_clock;
  c.wait();
  write_total += write_clock.elapsed_ms();
  if (auto err = c.take_error()) state.SkipWithError(err->c_str());
  g.async_ms = total / double(state.iterations());
  // Each wait covers the rest of one save's write after its (tiny) snapshot.
  g.async_write_ms = write_total / double(state.iterations());
  state.counters["stall_ms"] = g.async_ms;
  state.counters["background_write_ms"] = g.async_write_ms;
}

BENCHMARK(BM_memcpy)->Iterations(3)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_crc32c<false>)->Name("BM_crc32c_table")->Iterations(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_crc32c<true>)->Name("BM_crc32c_sse42")->Iterations(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_sync_checkpointer)->Iterations(2)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_asio_checkpointer)->Iterations(3)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::printf("checkpoint directory: %s\n", state_2gb().dir.c_str());
  benchmark::RunSpecifiedBenchmarks();
  const double gib = double(state_2gb().bytes()) / double(1 << 30);
  std::printf("\nbench_checkpoint summary: step stall per checkpoint of a %.1f GiB state\n", gib);
  std::printf("  %-32s %10s\n", "", "stall");
  if (g.memcpy_ms > 0)
    std::printf("  %-32s %8.0f ms  (%.1f GB/s; the floor)\n", "plain memcpy of the state",
                g.memcpy_ms, double(state_2gb().bytes()) / g.memcpy_ms / 1e6);
  if (g.sync_ms > 0)
    std::printf("  %-32s %8.0f ms  (write + fsync, %.2f GB/s)\n", "sync_checkpointer", g.sync_ms,
                double(state_2gb().bytes()) / g.sync_ms / 1e6);
  if (g.async_ms > 0) {
    std::printf(
        "  %-32s %8.0f ms  (save + copy with no step to hide it; first save %.0f ms "
        "incl. staging allocation)\n",
        "asio_checkpointer", g.async_ms, g.async_first_ms);
    std::printf("  %-32s %8.0f ms  (off the loop; the shortest interval that never waits)\n",
                "  its background write", g.async_write_ms);
  }
  if (g.sync_ms > 0 && g.async_ms > 0) {
    const double pct = 100.0 * g.async_ms / g.sync_ms;
    std::printf("  async / sync   = %5.1f%%   goal: <= 5%%    %s\n", pct,
                pct <= 5.0 ? "MET" : "NOT MET");
  }
  if (g.memcpy_ms > 0 && g.async_ms > 0) {
    const double ratio = g.async_ms / g.memcpy_ms;
    std::printf("  async / memcpy = %5.2fx   goal: <= 1.5x   %s\n", ratio,
                ratio <= 1.5 ? "MET" : "NOT MET");
  }
  benchmark::Shutdown();
  return 0;
}
