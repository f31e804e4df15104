// Tests of device-side phase accounting (trainer/device_phases.hpp) without a GPU: a fake device
// context whose "events" carry injected stream times stands in for cuda::execution_context. A
// device step's host-side metrics look compute-bound whatever the device waited for (the host
// books its one synchronisation to compute); after accounting, the report says
// communication-bound when the stream sat in the reduction's wait and checkpoint-bound when it sat
// in the snapshot's, and the phases still tile the step. Also: what the host already booked is not
// booked twice, no more than compute holds is moved, and the host context is left alone. And after
// a device fault (a sticky error: every later CUDA call fails) device_timed's destructor neither
// throws nor terminates: the block's own error propagates, or the next call reports the fault.
#include "trainkit/trainer/device_phases.hpp"  // first: compiles on its own

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "trainkit/trainer/report.hpp"

namespace tk = trainkit;
using tk::device_phase;

namespace {

/// A device context whose phases last what the test says; begin/end are recorded as marks.
struct fake_device_context {
  tk::device_phase_times injected{};                 // what the events of the next read will say
  std::vector<std::pair<device_phase, bool>> marks;  // (phase, begin?)
  void synchronize() {}
  void begin_phase(device_phase p) { marks.emplace_back(p, true); }
  void end_phase(device_phase p) { marks.emplace_back(p, false); }
  tk::device_phase_times device_phase_ms() { return std::exchange(injected, {}); }
};
static_assert(tk::times_device_phases<fake_device_context>);

/// The host's view of a d12-like device step: enqueueing is quick, the synchronisation at the end
/// (booked to compute) waits for everything the device does. 150 ms in all.
tk::step_metrics host_view_of_a_device_step() {
  tk::step_metrics m;
  m.tokens = 16 * 1024;
  m.data_wait_ms = 0.2;
  m.h2d_ms = 0.01;
  m.compute_ms = 148.0;  // launches + the one synchronize()
  m.comm_ms = 0.05;      // finish() only enqueued event waits
  m.optimizer_ms = 0.4;  // the update only enqueued
  m.ckpt_stall_ms = 0.04;
  m.log_ms = 1.3;
  m.dt_ms = 150.0;
  return m;
}

std::vector<tk::step_metrics> run_steps(fake_device_context& ctx, tk::device_phase_times each,
                                        int steps) {
  std::vector<tk::step_metrics> out;
  for (int i = 0; i < steps; ++i) {
    tk::step_metrics m = host_view_of_a_device_step();
    tk::phase_clock clock(m);
    tk::begin_device_phase(ctx, device_phase::comm);
    tk::end_device_phase(ctx, device_phase::comm);
    ctx.synchronize();
    ctx.injected = each;
    tk::account_device_phases(ctx, clock, m);
    m.other_ms = m.dt_ms - m.phases_ms();
    out.push_back(m);
  }
  return out;
}

TEST(DevicePhases, HostViewAloneSaysComputeBound) {
  std::vector<tk::step_metrics> steps(5, host_view_of_a_device_step());
  EXPECT_EQ(tk::summarize(steps).verdict, tk::bottleneck::compute);
}

TEST(DevicePhases, StreamWaitingForTheReductionReadsCommunicationBound) {
  fake_device_context ctx;
  tk::device_phase_times t{};
  t[std::size_t(device_phase::comm)] = 45.0;  // the stream waited 45 ms on the NCCL stream
  t[std::size_t(device_phase::optimizer)] = 12.0;
  const auto steps = run_steps(ctx, t, 5);
  const tk::step_metrics& m = steps.back();
  EXPECT_DOUBLE_EQ(m.comm_ms, 45.0) << "0.05 host ms + 44.95 moved from compute";
  EXPECT_DOUBLE_EQ(m.optimizer_ms, 12.0);
  EXPECT_NEAR(m.compute_ms, 148.0 - 44.95 - 11.6, 1e-9);
  EXPECT_NEAR(m.phases_ms(), 150.0, 1e-9) << "moved, not added: the phases still tile dt_ms";
  const tk::run_summary r = tk::summarize(steps);
  EXPECT_EQ(r.verdict, tk::bottleneck::communication) << r.evidence;
  EXPECT_EQ(ctx.marks.size(), 10u) << "begin and end marked on the context every step";
}

TEST(DevicePhases, StreamWaitingForTheSnapshotReadsCheckpointBound) {
  fake_device_context ctx;
  tk::device_phase_times t{};
  t[std::size_t(device_phase::ckpt_stall)] = 30.0;
  const tk::run_summary r = tk::summarize(run_steps(ctx, t, 5));
  EXPECT_EQ(r.verdict, tk::bottleneck::checkpoint) << r.evidence;
  EXPECT_NEAR(r.phases[std::size_t(tk::phase::ckpt_stall)].ms, 4 * 30.0, 1e-9);
}

TEST(DevicePhases, HostBookedTimeIsNotCountedTwiceAndComputeBoundsTheMove) {
  fake_device_context ctx;
  tk::step_metrics m = host_view_of_a_device_step();
  m.comm_ms = 20.0;  // a host-side wait (say an MPI reduction) already booked
  m.compute_ms = 50.0;
  tk::phase_clock clock(m);
  tk::device_phase_times t{};
  t[std::size_t(device_phase::comm)] = 20.0;        // the idle stream measured that same wait
  t[std::size_t(device_phase::ckpt_stall)] = 80.0;  // more than compute holds
  ctx.injected = t;
  const tk::device_phase_times read = tk::account_device_phases(ctx, clock, m);
  EXPECT_EQ(read, t);
  EXPECT_DOUBLE_EQ(m.comm_ms, 20.0);
  EXPECT_DOUBLE_EQ(m.ckpt_stall_ms, 0.04 + 50.0);
  EXPECT_DOUBLE_EQ(m.compute_ms, 0.0);
  EXPECT_EQ(ctx.device_phase_ms(), tk::device_phase_times{}) << "one read per step";
}

// A batch fetch the host waited for is booked to data_wait (and h2d): an idle stream measuring
// that same wait adds nothing; a stream that waited longer for the copy gets the rest.
TEST(DevicePhases, H2dSubtractsWhatTheHostBookedToTheFetch) {
  fake_device_context ctx;
  tk::step_metrics m = host_view_of_a_device_step();  // data_wait 0.2, h2d 0.01
  tk::phase_clock clock(m);
  tk::device_phase_times t{};
  t[std::size_t(device_phase::h2d)] = 5.21;
  ctx.injected = t;
  tk::account_device_phases(ctx, clock, m);
  EXPECT_NEAR(m.h2d_ms, 5.01, 1e-9);
  EXPECT_NEAR(m.data_wait_ms, 0.2, 1e-12);
  EXPECT_NEAR(m.compute_ms, 148.0 - 5.0, 1e-9);
}

TEST(DevicePhases, HostContextIsLeftAlone) {
  tk::host_context ctx;
  tk::step_metrics m = host_view_of_a_device_step();
  const tk::step_metrics before = m;
  tk::phase_clock clock(m);
  tk::begin_device_phase(ctx, device_phase::comm);
  tk::end_device_phase(ctx, device_phase::comm);
  EXPECT_EQ(tk::account_device_phases(ctx, clock, m), tk::device_phase_times{});
  EXPECT_EQ(m.compute_ms, before.compute_ms);
  EXPECT_EQ(m.comm_ms, before.comm_ms);
}

/// A device after a kernel fault: every call fails with the same sticky error, as CUDA's do.
struct faulted_device_context {
  bool faulted = false;
  int ends = 0;
  void fail_if_faulted() const {
    if (faulted) throw std::runtime_error("an illegal memory access was encountered");
  }
  void synchronize() const { fail_if_faulted(); }
  void begin_phase(device_phase) const { fail_if_faulted(); }
  void end_phase(device_phase) {
    ++ends;
    fail_if_faulted();
  }
  tk::device_phase_times device_phase_ms() const { return {}; }
};
static_assert(tk::times_device_phases<faulted_device_context>);

TEST(DevicePhases, TimedScopeKeepsTheBlocksErrorAfterADeviceFault) {
  faulted_device_context ctx;
  tk::step_metrics m = host_view_of_a_device_step();
  tk::phase_clock clock(m);
  try {
    tk::device_timed timed(clock, ctx, device_phase::comm);
    ctx.faulted = true;  // the reduction's kernel faults; finish() reports it
    throw std::runtime_error("reducer finish: an illegal memory access was encountered");
  } catch (const std::runtime_error& e) {  // not std::terminate from the destructor
    EXPECT_EQ(std::string(e.what()), "reducer finish: an illegal memory access was encountered");
  }
  EXPECT_EQ(ctx.ends, 1) << "the destructor tried to close the phase";
}

TEST(DevicePhases, TimedScopeLeavesAFaultToTheNextCall) {
  faulted_device_context ctx;
  tk::step_metrics m = host_view_of_a_device_step();
  const double comm_before = m.comm_ms;
  tk::phase_clock clock(m);
  {
    tk::device_timed timed(clock, ctx, device_phase::comm);
    ctx.faulted = true;  // the fault shows first when the phase's end event is recorded
  }                      // no throw from here (a destructor's throw is std::terminate)
  EXPECT_EQ(ctx.ends, 1);
  EXPECT_GE(m.comm_ms, comm_before) << "the host phase was still timed";
  try {
    ctx.synchronize();  // the step's next CUDA call reports the device's own error
    FAIL() << "the fault was lost";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "an illegal memory access was encountered");
  }
}

}  // namespace
