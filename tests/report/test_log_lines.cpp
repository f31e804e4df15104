// Tests for logs as people paste them (detail/log_lines.hpp and the readers behind it): every
// prefix (timestamps, launcher rank tags, Python logging, glog, Markdown quotes), ANSI codes, '\r'
// overwrites and CRLF; per-rank repeats read once; each format generation of nanoGPT, llm.c,
// torchtitan and build-nanogpt, its lines typed from the tool's printf/f-string (cited in each
// reader's header); the device table's forgiving names; per-device MFU and the refusal.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <trainkit/core/device_info.hpp>
#include <trainkit/report/read_run_log.hpp>
#include <trainkit/report/run_analysis.hpp>

namespace tk = trainkit;
namespace rp = trainkit::report;

namespace {

rp::run_log parse(const std::string& text, std::optional<rp::log_format> f = std::nullopt) {
  std::istringstream in(text);
  return rp::parse_run_log(in, "paste.log", f);
}

std::string text_of(std::string_view raw) {
  return rp::detail::normalise_line(raw, 1).text;
}

const char* const iter = "iter 10: loss 3.2202, time 893.76ms, mfu 16.68%";

}  // namespace

TEST(LogLines, EveryPrefixLeavesTheToolsText) {
  for (const std::string prefix :
       {"", "2023-03-22 09:30:39 ", "[2026-05-23 10:11:12] ", "12:01:02.345 ",
        "[rank0]:", "[default0]:", "0: ", "[1,0]<stdout>:", "> ", "> 2023-03-22 09:30:39 ",
        "[titan] 2025-01-10 10:00:01,234 - root - INFO - ",
        "2024-08-19 11:10:26,196 - root - INFO - ",
        "[rank0]:[titan] 2025-10-15 10:37:01,390 - root - INFO - ",
        "[I][components/metrics:526:log] ", "INFO:root:", "I0305 07:36:08.276310 1957 run.py:792] ",
        "2026-05-23T10:11:12.5Z | ", "\x1b[32m", "[INFO] "})
    EXPECT_EQ(text_of(prefix + iter), iter) << "prefix '" << prefix << "'";
  EXPECT_EQ(text_of(std::string(iter) + "\r\n"), iter) << "CRLF";
  EXPECT_EQ(text_of(std::string("iter 9: loss 3.3, ti\r") + iter), iter) << "\\r overwrite";
  EXPECT_EQ(text_of(std::string("\x1b[33m") + iter + "\x1b[39m"), iter) << "ANSI";
  // A time of day is kept (ms), a date too; a rank tag is kept.
  const auto l =
      rp::detail::normalise_line("[rank3]:[titan] 2025-10-15 10:37:01,390 - root - INFO - x", 7);
  EXPECT_EQ(l.rank, 3);
  ASSERT_TRUE(l.ms.has_value());
  EXPECT_EQ(*l.ms % 86'400'000, (10 * 3600 + 37 * 60 + 1) * 1000LL + 390);
  // Not prefixes: text that only looks like one stays.
  EXPECT_EQ(text_of("step 1: train loss 4.2 (took 10.5 ms)"),
            "step 1: train loss 4.2 (took 10.5 ms)");
  EXPECT_EQ(text_of("| num_processes | 8 |"), "| num_processes | 8 |");
}

TEST(LogLines, OneRanksLinesAreReadAndRepeatsCountOnce) {
  // torchtitan with every rank logging (no LOG_RANK filter): rank 0's lines are read.
  const std::string stamp = "2025-10-15 10:37:0";
  std::string text;
  for (int step = 1; step <= 3; ++step)
    for (int r : {3, 0, 1, 2})
      text += "[rank" + std::to_string(r) + "]:[titan] " + stamp + std::to_string(2 * step) +
              ",000 - root - INFO - step: " + std::to_string(step) +
              "  loss: 12.0  memory: 1.00GiB(1.00%)  tps: " + std::to_string(1000 + r) +
              "  tflops: 5.00  mfu: 0.50%\n";
  const auto run = parse(text);
  EXPECT_EQ(run.format, rp::log_format::torchtitan);
  EXPECT_EQ(run.rank, 0);
  EXPECT_EQ(run.other_ranks, 9u);
  EXPECT_EQ(run.facts.rank_tags, 4);
  ASSERT_EQ(run.steps.size(), 2u);  // step 1 has no earlier time
  EXPECT_DOUBLE_EQ(run.steps[0].m.dt_ms, 2000.0);
  EXPECT_DOUBLE_EQ(run.steps[0].log_tok_per_s, 1000.0) << "rank 0's own line";
  // The same lines without rank tags (pytorch/torchtitan#2389 as pasted): read once each.
  std::string bare;
  for (int step = 1; step <= 3; ++step)
    for (int r = 0; r < 4; ++r)
      bare += "[titan] " + stamp + std::to_string(2 * step) +
              ",000 - root - INFO - step: " + std::to_string(step) +
              "  loss: 12.0  tps: " + std::to_string(1000 + r) + "\n";
  const auto b = parse(bare);
  EXPECT_EQ(b.repeats, 9u);  // three copies of each of the three steps
  ASSERT_EQ(b.steps.size(), 2u);
  EXPECT_DOUBLE_EQ(b.steps[1].m.dt_ms, 2000.0);
}

TEST(LogLines, NanoGptGenerations) {
  // Early 2023 (no mfu), with a timestamp prefix and a Markdown quote (karpathy/nanoGPT#215).
  const auto early = parse(
      "$ torchrun --standalone --nproc_per_node=8 train.py\n"
      "iter 1631: loss 4.0863, time 561.94ms\n"
      "iter 1632: loss 3.7441, time 563.15ms\r\n");
  EXPECT_EQ(early.format, rp::log_format::nanogpt);
  ASSERT_EQ(early.steps.size(), 2u);
  EXPECT_DOUBLE_EQ(early.steps[1].m.dt_ms, 563.15);
  EXPECT_TRUE(std::isnan(early.steps[0].log_mfu));
  EXPECT_EQ(early.skipped, 1u) << "the command line is skipped and counted";
  const auto quoted = parse(
      "> 2023-03-22 09:31:56 iter 2990: loss 3.8853, time 1096.65ms, mfu 15.34%\n"
      "> \n"
      "> 2023-03-22 09:32:32 step 3000: train loss 4.0390, val loss 4.0427\n"
      "> saving checkpoint to out\n"
      "> 2023-03-22 09:32:41 iter 3000: loss 4.2490, time 35392.33ms, mfu 13.85%\n");
  ASSERT_EQ(quoted.steps.size(), 2u);
  EXPECT_EQ(quoted.events.size(), 2u);
  EXPECT_NEAR(quoted.steps[1].stamp_ms - quoted.steps[0].stamp_ms, 45000.0, 1e-6);
  EXPECT_NEAR(quoted.steps[1].log_mfu, 0.1385, 1e-12);
}

TEST(LogLines, LlmcGenerations) {
  // CPU trainer train_gpt2.c: printf("step %d: train loss %f (took %f ms)\n", ...)
  const auto cpu = parse(
      "step 0: train loss 5.356086 (took 1441.560000 ms)\n"
      "val loss 5.325531\n"
      "step 1: train loss 4.300644 (took 1310.213000 ms)\n");
  EXPECT_EQ(cpu.format, rp::log_format::llmc);
  ASSERT_EQ(cpu.steps.size(), 2u);
  EXPECT_DOUBLE_EQ(cpu.steps[1].m.dt_ms, 1310.213);
  EXPECT_EQ(cpu.facts.device, "cpu");
  // train_gpt2.cu, April 2024: printf0("step %4d/%d: train loss %f (%f ms, %d tok/s)\n", ...)
  const auto april = parse(
      "| num_processes         | 2                                                  |\n"
      "step    1/10: train loss 4.283875 (80.123000 ms, 51122 tok/s)\n"
      "step    2/10: train loss 4.082573 (80.001000 ms, 51200 tok/s)\n");
  ASSERT_EQ(april.steps.size(), 2u);
  EXPECT_DOUBLE_EQ(april.steps[1].log_tok_per_s, 2 * 51200.0) << "made all processes'";
  // The start of a multi-GPU run (karpathy/llm.c discussion #677, GPT-2 1.5B on 8 x H100).
  const auto multi = parse(
      "num_parameters: 1557686400 => bytes: 3115372800\n"
      "batch_size B=16 * seq_len T=1024 * num_processes=8 and total_batch_size=1048576\n"
      "step    2/32000 | loss 10.539388 (+nanz)| norm 43.5996 (+nanz)| lr 1.71e-06 | 2747.19 ms "
      "| 47.4% bf16 MFU | 381690 tok/s\n");
  EXPECT_EQ(multi.facts.devices, 8);
  EXPECT_EQ(multi.facts.tokens_per_step, 1048576u);
  EXPECT_EQ(multi.facts.seq, 1024);
  EXPECT_EQ(multi.facts.parameters, 1557686400u);
  EXPECT_EQ(multi.skipped, 0u);
  // The end-of-run block: HellaSwag, checkpoint, the average.
  const auto end = parse(
      "step   61/74 | loss 3.208939 (+nanz)| norm 1.4800 (+nanz)| lr 3.00e-04 | 44.57 ms | "
      "-100.0% bf16 MFU | 91886 tok/s\n"
      "val loss 3.300000\n"
      "HellaSwag: 2510/10042 = 0.249950\n"
      "Writing checkpoint at step 61\n"
      "total average iteration time: 44.571000 ms\n");
  ASSERT_EQ(end.steps.size(), 1u);
  EXPECT_TRUE(std::isnan(end.steps[0].log_mfu)) << "-100.0%: a device llm.c's table lacks";
  EXPECT_EQ(end.events.size(), 3u);
  EXPECT_DOUBLE_EQ(end.facts.average_ms, 44.571);
  EXPECT_EQ(end.skipped, 0u);
}

TEST(LogLines, TorchtitanGenerations) {
  // 2024: no "[titan]", "wps:", no grad_norm or tflops; the batch in "Training starts".
  const auto wps = parse(
      "[rank0]:2024-08-19 11:10:26,196 - root - INFO - Training starts at step 1, with local "
      "batch size 5, global batch size 20, sequence length 8192, total steps 100 (warmup 200)\n"
      "[rank0]:2024-08-19 11:10:33,811 - root - INFO - step:  1  loss: 12.2365  memory: "
      "81.67GiB(85.93%)  wps: 5,380  mfu: 1.09%\n"
      "[rank0]:2024-08-19 11:10:37,109 - root - INFO - step: 10  loss: 12.1951  memory: "
      "81.67GiB(85.93%)  wps: 111,770  mfu: 22.68%\n");
  EXPECT_EQ(wps.format, rp::log_format::torchtitan);
  ASSERT_EQ(wps.steps.size(), 2u);
  EXPECT_EQ(wps.facts.tokens_per_step, 20u * 8192);
  EXPECT_EQ(wps.facts.seq, 8192);
  EXPECT_DOUBLE_EQ(wps.steps[1].m.dt_ms, 3298.0 / 9);
  EXPECT_DOUBLE_EQ(wps.steps[1].log_tok_per_s, 111770.0);
  // Checkpoint wordings, GC and profiler lines.
  const auto events = parse(
      "[titan] 2025-01-10 10:00:00,000 - root - INFO - Training starts at step 1\n"
      "[titan] 2025-01-10 10:00:10,000 - root - INFO - step: 10  loss: 3.0  tps: 1,000\n"
      "[titan] 2025-01-10 10:00:10,100 - root - INFO - Saving checkpoint at step 10.\n"
      "[titan] 2025-01-10 10:00:15,000 - root - INFO - Finished saving the checkpoint (or "
      "staging if async is enabled)in 5.62 seconds.\n"
      "[titan] 2025-01-10 10:00:15,100 - root - INFO - [GC] Peforming periodical GC "
      "collection. 0.06 seconds.\n"
      "[titan] 2025-01-10 10:00:15,200 - root - INFO - Dumping profiler traces at step 20\n"
      "[titan] 2025-01-10 10:00:15,600 - root - INFO - Finished dumping profiler traces in "
      "0.38 seconds\n"
      "[titan] 2025-01-10 10:00:30,000 - root - INFO - step: 20  loss: 2.9  tps: 1,000\n");
  ASSERT_EQ(events.steps.size(), 2u);
  ASSERT_EQ(events.events.size(), 3u);
  EXPECT_EQ(events.events[0].kind, rp::log_event::kind_t::checkpoint);
  EXPECT_EQ(events.events[0].step, 10u);
  EXPECT_DOUBLE_EQ(events.events[0].ms, 5620.0);
  EXPECT_EQ(events.events[1].kind, rp::log_event::kind_t::pause);
  EXPECT_DOUBLE_EQ(events.events[1].ms, 60.0);
  EXPECT_DOUBLE_EQ(events.events[2].ms, 380.0);
  for (const auto& e : events.events) EXPECT_EQ(e.timed_in, 1u);
  EXPECT_EQ(events.skipped, 0u);
}

TEST(LogLines, BuildNanoGpt) {
  // print(f"step {step:5d} | loss: {loss:.6f} | lr {lr:.4e} | norm: {norm:.4f} | dt:
  // {dt*1000:.2f}ms | tok/sec: {tokens_per_sec:.2f}")
  const auto run = parse(
      "total desired batch size: 524288\n"
      "=> calculated gradient accumulation steps: 4\n"
      "validation loss: 10.9490\n"
      "HellaSwag accuracy: 2534/10042=0.2523\n"
      "step     0 | loss: 10.955029 | lr 8.3916e-07 | norm: 15.4453 | dt: 68510.93ms | "
      "tok/sec: 7652.62\n"
      "step     1 | loss: 10.894396 | lr 1.6783e-06 | norm: 14.7211 | dt: 343.50ms | tok/sec: "
      "1526313.18\n");
  EXPECT_EQ(run.format, rp::log_format::build_nanogpt);
  ASSERT_EQ(run.steps.size(), 2u);
  EXPECT_EQ(run.facts.tokens_per_step, 524288u);
  ASSERT_EQ(run.events.size(), 2u);
  EXPECT_EQ(run.events[0].timed_in, 0u) << "t0 precedes the evaluation: step 0's time has it";
  EXPECT_DOUBLE_EQ(run.steps[0].m.val_loss, 10.949);
  EXPECT_DOUBLE_EQ(run.steps[1].m.grad_norm, 14.7211);
}

TEST(LogLines, NoStepLineQuotesTheFirstThreeLines) {
  try {
    parse("\n\x1b[1mWelcome\x1b[0m\nloading data\nstarting\nmore\n");
    FAIL() << "no error";
  } catch (const tk::format_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("it begins \"Welcome\", \"loading data\", \"starting\""), std::string::npos)
        << m;
    EXPECT_EQ(m.find("more"), std::string::npos) << m;
  }
}

TEST(DeviceTable, ForgivingNames) {
  const auto bf16 = [](std::string_view n) {
    return tk::peak_tflops(n, tk::compute_dtype::bf16).value_or(-1);
  };
  EXPECT_EQ(bf16("h100"), 989.0);
  EXPECT_EQ(bf16("H100-SXM5-80GB"), 989.0);
  EXPECT_EQ(bf16("NVIDIA H100 80GB HBM3"), 989.0);
  EXPECT_EQ(bf16("NVIDIA H100 PCIe"), 756.0);
  EXPECT_EQ(bf16("h100pcie"), 756.0);
  EXPECT_EQ(bf16("NVIDIA H100 NVL"), 835.0);
  EXPECT_EQ(bf16("NVIDIA H800"), 989.0);
  EXPECT_EQ(bf16("NVIDIA H20"), 148.0);
  EXPECT_EQ(bf16("NVIDIA H200"), 989.0);
  EXPECT_EQ(bf16("NVIDIA B200"), 2250.0);
  EXPECT_EQ(bf16("NVIDIA GB200"), 2500.0);
  EXPECT_EQ(bf16("NVIDIA A100-SXM4-80GB"), 312.0);
  EXPECT_EQ(bf16("NVIDIA A100 80GB PCIe"), 312.0);
  EXPECT_EQ(bf16("NVIDIA A800-SXM4-80GB"), 312.0);
  EXPECT_EQ(bf16("NVIDIA L4"), 121.0);
  EXPECT_EQ(bf16("NVIDIA L40S"), 362.0) << "L4 is a word, not a prefix";
  EXPECT_EQ(bf16("NVIDIA A10G"), 70.0);
  EXPECT_EQ(bf16("NVIDIA GeForce RTX 3090"), 71.0);
  EXPECT_EQ(bf16("rtx4090"), 165.2);
  EXPECT_EQ(bf16("NVIDIA GeForce RTX 5090"), 419.0);
  EXPECT_EQ(bf16("Tesla V100-SXM2-32GB"), 125.0);
  EXPECT_EQ(bf16("AMD Instinct MI250X"), 383.0);
  EXPECT_EQ(bf16("AMD Instinct MI300X"), 1307.4);
  EXPECT_EQ(bf16("NVIDIA A1000"), -1) << "a longer model number is another device";
  EXPECT_EQ(bf16("TPU v5"), -1);
}

namespace {

// GPT-2 124M (d12) at T 1024: trainkit's count, by hand from the shape.
double d12_fpt() {
  const double V = 50304, C = 768, L = 12, T = 1024;
  const double n = V * C + L * (12 * C * C + 13 * C) + 2 * C;  // without wpe
  return 6 * n + 12 * L * C * T;
}

}  // namespace

TEST(DeviceCount, PerDeviceMfuAndTheRefusal) {
  // karpathy/nanoGPT#110: 8 x A100, 12 x 1024 x 5 tokens per process per iteration, no mfu.
  const std::string text =
      "iter 1631: loss 4.0863, time 561.94ms\n"
      "iter 1632: loss 3.7441, time 563.15ms\n"
      "iter 1633: loss 3.9848, time 562.11ms\n";
  const auto run = parse(text);
  rp::log_report_config cfg{
      .model = "d12", .seq = 1024, .tokens_per_step = 8 * 61440, .device = "NVIDIA A100-SXM4-80GB"};
  cfg.devices = 8;
  const auto a = rp::analyze_run(run, cfg);
  EXPECT_FALSE(a.refused);
  // The steady median: the first line is warm-up to the summary, so (563.15 + 562.11) / 2.
  EXPECT_NEAR(a.mfu_median, d12_fpt() * 61440 / 0.56263 / 312e12, 1e-9);
  EXPECT_NEAR(a.mfu_median, 0.30, 0.01);
  // The same log read as one device: 239% — refused, naming the device count and 8 as enough.
  cfg.devices = 0;
  const auto r = rp::analyze_run(run, cfg);
  EXPECT_TRUE(r.refused);
  EXPECT_TRUE(r.devices_assumed);
  const std::string text_out = rp::format_run_analysis(r);
  EXPECT_NE(text_out.find("verdict: none — no measurement and no verdict"), std::string::npos)
      << text_out;
  EXPECT_NE(text_out.find("the device count 1 (assumed: the log does not say; give "
                          "log_report_config.devices) would have to be at least 3"),
            std::string::npos)
      << text_out;
  EXPECT_EQ(text_out.find("MFU 2"), std::string::npos) << "no MFU figure above 100%";
  EXPECT_EQ(text_out.find("compute-bound"), std::string::npos) << text_out;
}

TEST(DeviceCount, LlamaPresetsAndActiveParameters) {
  const auto run = parse(
      "iter 1: loss 4.0, time 100.00ms\n"
      "iter 2: loss 3.9, time 100.00ms\n");
  const auto a = rp::analyze_run(
      run,
      {.model = "d12", .arch = "llama", .seq = 1024, .tokens_per_step = 8192, .device = "H100"});
  const auto g = tk::model::llama_config::preset("d12");
  EXPECT_NEAR(a.flops_per_token, g.flops_per_token(1024), 1e-6 * g.flops_per_token(1024));
  EXPECT_NE(rp::format_run_analysis(a).find("model: Llama d12: 6·N + 12·L·C·T"), std::string::npos);
  const auto moe = rp::analyze_run(run, {.active_params = 1'000'000'000,
                                         .layers = 16,
                                         .width = 2048,
                                         .seq = 4096,
                                         .tokens_per_step = 8192,
                                         .device = "H100"});
  EXPECT_TRUE(moe.active);
  EXPECT_DOUBLE_EQ(moe.flops_per_token, 6e9 + 12.0 * 16 * 2048 * 4096);
  EXPECT_THROW(rp::analyze_run(run, {.model = "d12",
                                     .arch = "mamba",
                                     .seq = 1024,
                                     .tokens_per_step = 8192,
                                     .device = "H100"}),
               tk::config_error);
}

TEST(Windows, TimeGapsAndTheShareOfAWholeRun) {
  // nanoGPT with timestamps: a gap that matches the steady rate is not a stall, one that does
  // not is; saves every 250 iterations give their share of a whole run.
  std::string text;
  long long t = 0;
  auto line = [&](int iter, double ms) {
    t += (long long)ms;
    const long long s = t / 1000;
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "2023-03-22 %02lld:%02lld:%02lld iter %d: loss 3.0, time %.2fms\n", 9 + s / 3600,
                  s / 60 % 60, s % 60, iter, ms);
    text += buf;
  };
  for (int i = 0; i <= 500; i += 10) {
    if (i > 0 && i % 250 == 0) {
      text += "step " + std::to_string(i) +
              ": train loss 3.0, val loss 3.1\nsaving checkpoint to out\n";
      t += 9 * 1000;  // nine iterations before it, unprinted
      line(i, 31000.0);
    } else {
      t += i > 0 ? 9 * 1000 : 0;
      line(i, 1000.0);
    }
    if (i == 300) t += 60'000;  // a minute outside any step's time
  }
  const auto run = parse(text);
  const auto a = rp::analyze_run(run, {.params = 1'000'000,
                                       .layers = 2,
                                       .width = 64,
                                       .seq = 64,
                                       .tokens_per_step = 4096,
                                       .peak_tflops = 1.0});
  EXPECT_EQ(a.save_interval, 250u);
  EXPECT_NEAR(a.save_run_share, 30000.0 / (250 * 1000.0 + 30000.0), 1e-9);
  ASSERT_EQ(a.stalls.size(), 1u);
  EXPECT_EQ(a.stalls[0].step, 310u);
  EXPECT_NEAR(a.stalls[0].excess_ms, 60'000.0, 1000.0);
  EXPECT_EQ(a.gaps_steady, run.steps.size() - 2);
  EXPECT_NE(rp::format_run_analysis(a).find("a save every 250 iters costs ~10.7% of the run"),
            std::string::npos)
      << rp::format_run_analysis(a);
}
