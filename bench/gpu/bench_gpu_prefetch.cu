// bench_gpu_prefetch — does the pinned prefetcher's host→device copy overlap compute?
//
// A consumer loop stands in for the model: each "step" takes a batch from pinned_prefetcher<4>
// and runs a spin kernel of a fixed duration (clock64 busy-wait, the same on every step) on its
// stream. Three numbers per batch size:
//  * copy bandwidth: batch bytes over last_h2d_ms() (copy events), goal ≥ 20 GB/s from pinned
//    memory (a PCIe 5 ×16 link or better; H200 SXM hosts are faster still);
//  * host-synchronous hand-over (trainer default): step time with the prefetcher over step time
//    with a batch already on the device — goal ≤ 1.02 (copies hidden behind compute);
//  * consumer-stream hand-over (bind_consumer_stream): the same ratio with the host never waiting
//    on a copy — goal ≤ 1.02.
// Batches go up to 8 MiB (B·T = 1 Mi tokens) so the copy is long enough to time; a real GPT-2
// batch (16 × 1024 tokens, 128 KiB) is far smaller. The source must stay faster than a step, or
// the figure measures the source, not the copy: 1 Mi synthetic tokens take a few ms.
// Prints a table last: figure, goal, met.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/device.hpp"
#include "trainkit/core/cuda/stream.hpp"
#include "trainkit/data/synthetic_source.hpp"
#include "trainkit/prefetch/pinned_prefetcher.hpp"

namespace tk = trainkit;

namespace {

/// Busy-waits `cycles` SM clocks, reading the batch's first token so the work depends on it.
__global__ void spin_kernel(const std::int32_t* tokens, long long cycles, int* sink) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  if (threadIdx.x == 0 && tokens[0] == -12345) *sink = 1;  // never true: keeps the read
}

void spin(const std::int32_t* tokens, long long cycles, int* sink, cudaStream_t s) {
  spin_kernel<<<1, 32, 0, s>>>(tokens, cycles, sink);
  TRAINKIT_CUDA_CHECK_LAUNCH("spin_kernel");
}

double now_ms() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

struct row {
  std::string what;
  double value;
  double goal;
  bool higher_is_better;
  const char* unit;
};

}  // namespace

int main() {
  if (!tk::cuda::device_present()) {
    std::printf("bench_gpu_prefetch: no CUDA device present; nothing measured\n");
    return 0;
  }
  const auto dev = tk::cuda::query_device();
  int clock_khz = 0;
  TRAINKIT_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  std::printf("device %s, SM clock %.0f MHz\n", dev.name.c_str(), clock_khz / 1e3);
  const long long cycles_per_ms = (long long)clock_khz;  // kHz = cycles per ms
  constexpr double compute_ms = 10.0;  // per step: above the synthetic source's ~3 ms per Mi tokens
  constexpr int steps = 30;
  tk::cuda::device_buffer<int> sink(1);
  std::vector<row> rows;

  struct shape {
    int B, T;
  };
  for (const shape sh : {shape{16, 1024}, shape{256, 1024}, shape{1024, 1024}}) {
    tk::data::synthetic_config sc;
    sc.batch_size = sh.B;
    sc.seq_len = sh.T;
    sc.alphabet = 4096;
    const double mib = 2.0 * sh.B * sh.T * 4 / (1 << 20);
    const std::string tag = "B=" + std::to_string(sh.B) + " T=" + std::to_string(sh.T);
    std::printf("%s: %.1f MiB per batch (inputs + targets, int32)\n", tag.c_str(), mib);

    // Baseline: the same kernels on a batch already on the device.
    tk::cuda::stream compute;
    tk::cuda::device_buffer<std::int32_t> resident(std::size_t(sh.B) * sh.T);
    TRAINKIT_CUDA_CHECK(cudaMemset(resident.data(), 0x11, resident.bytes()));
    spin(resident.data(), cycles_per_ms * compute_ms, sink.data(), compute);
    compute.synchronize();
    double t0 = now_ms();
    for (int i = 0; i < steps; ++i) {
      spin(resident.data(), cycles_per_ms * compute_ms, sink.data(), compute);
      compute.synchronize();
    }
    const double base_ms = (now_ms() - t0) / steps;

    // Host-synchronous hand-over (what the trainer does with gpt2_cuda).
    double sync_ms = 0, copy_ms = 0, wait_ms = 0;
    {
      tk::prefetch::pinned_prefetcher<tk::data::synthetic_source, 4> p(
          tk::data::synthetic_source{sc});
      for (int i = 0; i < 4; ++i) {  // warm-up: fills the ring
        spin(p.next().inputs, cycles_per_ms * compute_ms, sink.data(), compute);
        compute.synchronize();
      }
      t0 = now_ms();
      for (int i = 0; i < steps; ++i) {
        const auto b = p.next();
        wait_ms += p.wait_ms();
        copy_ms += p.last_h2d_ms();
        spin(b.inputs, cycles_per_ms * compute_ms, sink.data(), compute);
        compute.synchronize();
      }
      sync_ms = (now_ms() - t0) / steps;
    }
    // Consumer-stream hand-over: the host never waits on a copy.
    double stream_ms = 0;
    {
      tk::prefetch::pinned_prefetcher<tk::data::synthetic_source, 4> p(
          tk::data::synthetic_source{sc});
      p.bind_consumer_stream(compute);
      for (int i = 0; i < 4; ++i)
        spin(p.next().inputs, cycles_per_ms * compute_ms, sink.data(), compute);
      compute.synchronize();
      t0 = now_ms();
      for (int i = 0; i < steps; ++i) {
        spin(p.next().inputs, cycles_per_ms * compute_ms, sink.data(), compute);
        compute.synchronize();  // a step's end, as a model returning with its work done
      }
      stream_ms = (now_ms() - t0) / steps;
      p.bind_consumer_stream(nullptr);
    }
    const double gbps = copy_ms > 0 ? (mib * steps / 1024.0) / (copy_ms / 1e3) : 0;
    std::printf(
        "  compute only %.3f ms/step | host-sync %.3f ms (wait %.3f ms, copy %.3f ms) | "
        "stream %.3f ms | copy %.1f GB/s\n",
        base_ms, sync_ms, wait_ms / steps, copy_ms / steps, stream_ms, gbps);
    if (sh.B >= 256) rows.push_back({"copy GB/s " + tag, gbps, 20.0, true, "GB/s"});
    rows.push_back({"host-sync step/base " + tag, sync_ms / base_ms, 1.02, false, "x"});
    rows.push_back({"stream step/base " + tag, stream_ms / base_ms, 1.02, false, "x"});
  }
  std::printf("\n%-34s %10s %10s %5s\n", "pinned_prefetcher<4>", "figure", "goal", "met");
  for (const auto& r : rows) {
    const bool met = r.higher_is_better ? r.value >= r.goal : r.value <= r.goal;
    std::printf("%-34s %9.3f%s %9.3f%s %5s\n", r.what.c_str(), r.value,
                r.unit[0] == 'x' ? "x" : " ", r.goal, r.unit[0] == 'x' ? "x" : " ",
                met ? "yes" : "no");
  }
  return 0;
}
