// Tests for trainkit/checkpoint/cuda_stager.hpp and basic_asio_checkpointer<cuda_stager>: the
// device-to-pinned snapshot sees the work that produced the state even while that work is still
// queued (the compute stream is held up by a sleeping host function), and the "update" queued on
// the guarded stream after order_after_stage() cannot overwrite the state before the copy has
// read it; host tensors of the state are copied inside stage(); without a guarded stream,
// order_after_stage() returns with the copy landed; a checkpoint saved, "updated" and waited for
// loads back into device memory with the saved bytes. Staging memory is poisoned first; the state
// is random. host_staged_checkpointer's sharded saves (ZeRO-1 on a GPU): a sharded state of host
// tensors round-trips without a device (this runs everywhere), one of device tensors with one;
// its copies follow work still queued on a non-blocking stream, guarded or not.
// Compiled by g++ (the stager is host-compilable); the device tests skip without a device.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "gpu_test_env.hpp"
#include "trainkit/checkpoint/asio_checkpointer.hpp"
#include "trainkit/checkpoint/cuda_stager.hpp"
#include "trainkit/checkpoint/host_staged_checkpointer.hpp"
#include "trainkit/checkpoint/no_checkpoint.hpp"
#include "trainkit/checkpoint/sync_checkpointer.hpp"
#include "trainkit/core/cuda/buffer.hpp"
#include "trainkit/core/cuda/check.hpp"
#include "trainkit/core/cuda/stream.hpp"

namespace {

namespace tk = trainkit;
namespace ck = trainkit::checkpoint;
namespace fs = std::filesystem;

using device_checkpointer = ck::basic_asio_checkpointer<ck::cuda_stager>;
static_assert(ck::stager<ck::cuda_stager> && ck::cuda_stager::queues_copies);
static_assert(ck::checkpointer<device_checkpointer> && ck::defers_snapshot<device_checkpointer>);

constexpr std::size_t n = std::size_t{1} << 22;  // 16 MiB of f32: a copy that takes a while

std::vector<float> random_floats(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

struct sleep_arg {
  int ms;
};
void CUDART_CB sleep_on_stream(void* arg) {
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<sleep_arg*>(arg)->ms));
}

tk::state_tensor device_tensor(tk::cuda::device_buffer<float>& d) {
  tk::state_tensor t = tk::make_state_tensor("model.w", d.device_span(), {std::int64_t(n)});
  t.on_device = true;
  return t;
}

TEST(CudaStager, CopiesAfterTheProducerAndTheUpdateWaitsForTheCopy) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  tk::cuda::stream compute;
  tk::cuda::device_buffer<float> d(n);
  const std::vector<float> before = random_floats(1), produced = random_floats(2);
  TRAINKIT_CUDA_CHECK(
      cudaMemcpy(d.data(), before.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  std::uint64_t step = 41;  // a host tensor of the state (the optimizer's step)

  ck::cuda_stager stager;
  stager.guard_stream(compute.get());
  const tk::state_tensor tensors[] = {
      device_tensor(d), tk::make_state_tensor("optim.step", std::span(&step, 1), {1})};
  const std::size_t device_bytes = n * sizeof(float);
  std::byte* staging = stager.reserve(device_bytes + 64);
  std::memset(staging, 0xff, device_bytes + 64);  // poison
  const ck::stage_copy copies[] = {{&tensors[0], staging}, {&tensors[1], staging + device_bytes}};

  // The producer (the last optimizer update) is still queued behind a 200 ms host function.
  sleep_arg pause{200};
  TRAINKIT_CUDA_CHECK(cudaLaunchHostFunc(compute.get(), sleep_on_stream, &pause));
  // Pinned, so the copy is queued behind the sleep instead of being done by the host at once.
  tk::cuda::pinned_buffer<float> source(n);
  std::memcpy(source.data(), produced.data(), device_bytes);
  TRAINKIT_CUDA_CHECK(cudaMemcpyAsync(d.data(), source.data(), device_bytes, cudaMemcpyHostToDevice,
                                      compute.get()));
  step = 42;
  stager.stage(copies);
  step = 43;  // host tensors were copied inside stage
  // The next update: ordered after the copy, then it overwrites the state.
  stager.order_after_stage();
  TRAINKIT_CUDA_CHECK(cudaMemsetAsync(d.data(), 0, device_bytes, compute.get()));
  stager.wait_staged();

  std::vector<float> snapshot(n);
  std::memcpy(snapshot.data(), staging, device_bytes);
  EXPECT_EQ(snapshot, produced) << "the copy did not see the producer, or the update overtook it";
  std::uint64_t staged_step = 0;
  std::memcpy(&staged_step, staging + device_bytes, sizeof staged_step);
  EXPECT_EQ(staged_step, 42u);
  compute.synchronize();
  std::vector<float> after(n, 1.0f);
  TRAINKIT_CUDA_CHECK(cudaMemcpy(after.data(), d.data(), device_bytes, cudaMemcpyDeviceToHost));
  EXPECT_EQ(after, std::vector<float>(n, 0.0f));  // the update did run
}

TEST(CudaStager, WithoutAGuardedStreamOrderAfterStageWaitsForTheCopy) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  tk::cuda::device_buffer<float> d(n);
  const std::vector<float> state = random_floats(3);
  TRAINKIT_CUDA_CHECK(
      cudaMemcpy(d.data(), state.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  ck::cuda_stager stager;
  const tk::state_tensor t = device_tensor(d);
  std::byte* staging = stager.reserve(n * sizeof(float));
  std::memset(staging, 0xff, n * sizeof(float));
  const ck::stage_copy copies[] = {{&t, staging}};
  stager.stage(copies);
  stager.order_after_stage();  // host wait: the caller may overwrite `d` at once
  TRAINKIT_CUDA_CHECK(cudaMemset(d.data(), 0, n * sizeof(float)));
  std::vector<float> snapshot(n);
  std::memcpy(snapshot.data(), staging, n * sizeof(float));
  EXPECT_EQ(snapshot, state);
}

TEST(CudaStager, AsyncCheckpointOfDeviceStateLoadsBackTheSavedBytes) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  const fs::path dir =
      fs::temp_directory_path() / ("trainkit-cuda-stager-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  tk::cuda::stream compute;
  tk::cuda::device_buffer<float> d(n);
  const std::vector<float> state = random_floats(4);
  TRAINKIT_CUDA_CHECK(
      cudaMemcpy(d.data(), state.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  {
    device_checkpointer c({dir});
    c.stager().guard_stream(compute.get());
    ck::checkpoint_state s{7, {device_tensor(d)}, {{"data_position", "x"}}};
    c.save(s);
    c.before_update();
    TRAINKIT_CUDA_CHECK(cudaMemsetAsync(d.data(), 0, n * sizeof(float), compute.get()));
    c.wait();
    ASSERT_EQ(c.take_error(), std::nullopt);
    compute.synchronize();

    tk::cuda::device_buffer<float> into(n);
    TRAINKIT_CUDA_CHECK(cudaMemset(into.data(), 0xff, n * sizeof(float)));  // poison
    ck::checkpoint_state loaded{0, {device_tensor(into)}, {}};
    ASSERT_TRUE(c.load_latest(loaded));
    EXPECT_EQ(loaded.step, 7u);
    std::vector<float> back(n);
    TRAINKIT_CUDA_CHECK(
        cudaMemcpy(back.data(), into.data(), n * sizeof(float), cudaMemcpyDeviceToHost));
    EXPECT_EQ(back, state);
  }
  fs::remove_all(dir);
}

// ---- host_staged_checkpointer: sharded states ----

using staged_sync = ck::host_staged_checkpointer<ck::sync_checkpointer>;
static_assert(ck::sharded_checkpointer<staged_sync, ck::single_process>);
static_assert(
    ck::sharded_checkpointer<ck::host_staged_checkpointer<ck::no_checkpoint>, ck::single_process>);
// The asynchronous writer has no sharded save, and the adapter does not invent one.
static_assert(!ck::sharded_checkpointer<ck::host_staged_checkpointer<ck::asio_checkpointer>,
                                        ck::single_process>);

struct temp_dir {
  fs::path path =
      fs::temp_directory_path() / ("trainkit-staged-sharded-" + std::to_string(::getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  temp_dir() { fs::remove_all(path); }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// One rank of one: the common part (a model tensor, the step) and the rank's shard (a moment),
// all host tensors: passed through to sync_checkpointer's sharded protocol and back.
TEST(HostStagedCheckpointer, ShardedStateOfHostTensorsRoundTripsWithoutADevice) {
  temp_dir dir;
  std::vector<float> w = random_floats(5), m = random_floats(6);
  w.resize(64);
  m.resize(48);
  std::uint64_t step = 9;
  auto state_of = [](std::span<float> wv, std::span<float> mv, std::uint64_t& st) {
    ck::sharded_checkpoint_state s;
    s.common.step = st;
    s.common.tensors = {tk::make_state_tensor("model.w", wv, {std::int64_t(wv.size())}),
                        tk::make_state_tensor("optim.step", std::span<std::uint64_t>(&st, 1), {1})};
    s.common.meta = {{"data_position", "x"}};
    s.shard = {tk::make_state_tensor("optim.m", mv, {std::int64_t(mv.size())})};
    s.range = {0, 1, 0, mv.size(), mv.size()};
    return s;
  };
  ck::single_process comm;
  staged_sync c(ck::sync_checkpointer({dir.path, 0}));
  c.save_sharded(state_of(w, m, step), comm);
  EXPECT_TRUE(fs::exists(dir.path / "step_00000009" / "shard_00000"));

  std::vector<float> w2(w.size(), -1.0f), m2(m.size(), -1.0f);
  std::uint64_t step2 = 0;
  ck::sharded_checkpoint_state into = state_of(w2, m2, step2);
  into.common.meta.clear();
  ASSERT_TRUE(c.load_latest_sharded(into, comm));
  EXPECT_EQ(into.common.step, 9u);
  EXPECT_EQ(step2, 9u);
  EXPECT_EQ(w2, w);
  EXPECT_EQ(m2, m);
  EXPECT_EQ(into.common.meta.at("data_position"), "x");
}

// The same with the model tensor and the moment in device memory: staged through the pinned area
// (common first, then the shard) and copied back after the load; the device is poisoned before.
TEST(HostStagedCheckpointer, ShardedStateOfDeviceTensorsRoundTrips) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  temp_dir dir;
  const std::vector<float> w = random_floats(7), m = random_floats(8);
  tk::cuda::device_buffer<float> dw(n), dm(n);
  TRAINKIT_CUDA_CHECK(cudaMemcpy(dw.data(), w.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  TRAINKIT_CUDA_CHECK(cudaMemcpy(dm.data(), m.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  std::uint64_t step = 3;
  auto state_of = [](tk::cuda::device_buffer<float>& wv, tk::cuda::device_buffer<float>& mv,
                     std::uint64_t& st) {
    ck::sharded_checkpoint_state s;
    s.common.step = st;
    s.common.tensors = {device_tensor(wv),
                        tk::make_state_tensor("optim.step", std::span<std::uint64_t>(&st, 1), {1})};
    s.common.meta = {{"data_position", "x"}};
    tk::state_tensor shard = tk::make_state_tensor("optim.m", mv.device_span(), {std::int64_t(n)});
    shard.on_device = true;
    s.shard = {shard};
    s.range = {0, 1, 0, n, n};
    return s;
  };
  ck::single_process comm;
  staged_sync c(ck::sync_checkpointer({dir.path, 0}));
  c.save_sharded(state_of(dw, dm, step), comm);
  TRAINKIT_CUDA_CHECK(cudaMemset(dw.data(), 0xff, n * sizeof(float)));  // poison
  TRAINKIT_CUDA_CHECK(cudaMemset(dm.data(), 0xff, n * sizeof(float)));
  std::uint64_t step2 = 0;
  ck::sharded_checkpoint_state into = state_of(dw, dm, step2);
  ASSERT_TRUE(c.load_latest_sharded(into, comm));
  EXPECT_EQ(step2, 3u);
  std::vector<float> w2(n), m2(n);
  TRAINKIT_CUDA_CHECK(cudaMemcpy(w2.data(), dw.data(), n * sizeof(float), cudaMemcpyDeviceToHost));
  TRAINKIT_CUDA_CHECK(cudaMemcpy(m2.data(), dm.data(), n * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(w2, w);
  EXPECT_EQ(m2, m);
}

// host_staged_checkpointer's copies follow the work that wrote the state, also when it is still
// queued on a non-blocking stream (the trainer's compute stream is one): a sleeping host function
// holds the stream, then the "update" writes the tensor. A plain cudaMemcpy on the legacy stream
// would copy the old bytes. Guarded (copies on that stream) and unguarded (device synchronised).
TEST(HostStagedCheckpointer, SaveCopiesAfterWorkQueuedOnANonBlockingStream) {
  TRAINKIT_SKIP_WITHOUT_DEVICE();
  const std::vector<float> before = random_floats(9), produced = random_floats(10);
  for (const bool guarded : {true, false}) {
    SCOPED_TRACE(guarded ? "guarded" : "unguarded");
    temp_dir dir;
    tk::cuda::stream compute(true);  // non-blocking, as the execution context's
    tk::cuda::device_buffer<float> d(n), update(n);
    TRAINKIT_CUDA_CHECK(
        cudaMemcpy(d.data(), before.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    TRAINKIT_CUDA_CHECK(
        cudaMemcpy(update.data(), produced.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    sleep_arg nap{300};
    TRAINKIT_CUDA_CHECK(cudaLaunchHostFunc(compute.get(), sleep_on_stream, &nap));
    // Device to device: fully asynchronous (a pageable host source could block the host here).
    TRAINKIT_CUDA_CHECK(cudaMemcpyAsync(d.data(), update.data(), n * sizeof(float),
                                        cudaMemcpyDeviceToDevice, compute.get()));
    staged_sync c(ck::sync_checkpointer({dir.path, 0}));
    if (guarded) c.guard_stream(compute.get());
    ck::checkpoint_state state;
    state.step = 1;
    state.tensors = {device_tensor(d)};
    state.meta = {{"data_position", "x"}};
    c.save(state);  // the compute stream is still asleep when this is called
    TRAINKIT_CUDA_CHECK(cudaMemset(d.data(), 0xff, n * sizeof(float)));  // poison
    ASSERT_TRUE(c.load_latest(state));
    std::vector<float> back(n);
    TRAINKIT_CUDA_CHECK(
        cudaMemcpy(back.data(), d.data(), n * sizeof(float), cudaMemcpyDeviceToHost));
    EXPECT_TRUE(back == produced) << "the checkpoint holds bytes from before the update";
  }
}

}  // namespace
