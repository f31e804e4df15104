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
  // A paste that starts one character late loses the tag's "[" (pytorch/torchtitan#153, March
  // 2024: wps and no mfu); the first line is still rank 0's, with its time.
  const auto lost = parse(
      "rank0]:2024-03-20 14:58:00,009 - root - INFO - step:  1  loss: 10.8337  memory: "
      "27.88GiB(29.34%)  wps: 313\n"
      "[rank0]:2024-03-20 14:58:00,011 - root - INFO - Synchronizing and adjusting timeout for "
      "all ProcessGroups to 0:00:05\n"
      "[rank0]:2024-03-20 14:58:21,642 - root - INFO - step: 11  loss:  7.2777  memory: "
      "34.40GiB(36.20%)  wps: 1,894\n"
      "[rank0]:2024-03-20 14:58:36,125 - root - INFO - step: 21  loss:  5.5742  memory: "
      "34.40GiB(36.20%)  wps: 2,829\n");
  EXPECT_EQ(lost.format, rp::log_format::torchtitan);
  EXPECT_EQ(lost.rank, 0);
  EXPECT_EQ(lost.other_ranks, 0u);
  ASSERT_EQ(lost.steps.size(), 2u) << "steps 11 and 21, timed from the line before each";
  EXPECT_EQ(lost.steps[0].m.step, 11u);
  EXPECT_NEAR(lost.steps[0].m.dt_ms, (21642.0 - 9.0) / 10, 1e-6) << "log_freq 10: ten steps";
  EXPECT_TRUE(
      rp::analyze_run(
          lost, {.params = 124'000'000, .layers = 12, .width = 768, .seq = 2048, .device = "H100"})
          .from_start)
      << "step 11 times steps 2-11 from the untimed step 1: the run's start, no excerpt";
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
  EXPECT_EQ(early.facts.devices, 8) << "but it states the process count";
  EXPECT_EQ(early.facts.devices_from, "the launch command in the log, line 1");
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
  // d49e830..bc58cd1 (April-May 2024): "train loss %f (acc %f) (%f ms, %d tok/s)" and the
  // "==>" of num_parameters; lines of a run pasted from an RTX 4090
  // (https://zhuanlan.zhihu.com/p/694416583, section 2.2.2).
  const auto acc = parse(
      "num_parameters: 124475904 ==> bytes: 248951808\n"
      "step    2/74: train loss 4.505543 (acc 4.505543) (32.261120 ms, 126963.945312 tok/s)\n"
      "step    3/74: train loss 4.421638 (acc 4.421638) (32.068607 ms, 127354.804688 tok/s)\n");
  EXPECT_EQ(acc.format, rp::log_format::llmc);
  ASSERT_EQ(acc.steps.size(), 2u);
  EXPECT_DOUBLE_EQ(acc.steps[1].m.loss, 4.421638);
  EXPECT_DOUBLE_EQ(acc.steps[1].m.dt_ms, 32.068607);
  EXPECT_DOUBLE_EQ(acc.steps[1].log_tok_per_s, 127354.804688);
  EXPECT_EQ(acc.facts.parameters, 124475904u);
  EXPECT_EQ(acc.skipped, 0u);
  // The other 2024 forms, typed from their printf strings: fdd6608 (no tok/s), bc58cd1 (norm),
  // 661975c (norm, lr), 90a745c ("| train loss ... | %.1f%% A100 fp16 MFU |").
  const auto may = parse(
      "step    1/74: train loss 4.367631 (80.639749 ms)\n"
      "step    2/74: train loss 4.031242 norm 5.1234 (79.50 ms, 51500 tok/s)\n"
      "step    3/74: train loss 3.912345 norm 4.2000 lr 3.00e-04 (79.40 ms, 51580 tok/s)\n"
      "step    4/74 | train loss 3.8000 | norm 4.1000 | lr 3.00e-04 | 79.30 ms | 44.6% A100 fp16 "
      "MFU | 51600 tok/s\n");
  ASSERT_EQ(may.steps.size(), 4u);
  EXPECT_EQ(may.skipped, 0u);
  EXPECT_DOUBLE_EQ(may.steps[0].m.dt_ms, 80.639749);
  EXPECT_TRUE(std::isnan(may.steps[0].log_tok_per_s));
  EXPECT_DOUBLE_EQ(may.steps[1].m.grad_norm, 5.1234);
  EXPECT_DOUBLE_EQ(may.steps[2].m.lr, 3e-4);
  EXPECT_DOUBLE_EQ(may.steps[2].log_tok_per_s, 51580.0);
  EXPECT_NEAR(may.steps[3].log_mfu, 0.446, 1e-12);
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
  ASSERT_EQ(end.events.size(), 2u) << "val loss + HellaSwag are one evaluation pass, + a save";
  EXPECT_EQ(end.events[0].what, "validation loss + HellaSwag");
  EXPECT_DOUBLE_EQ(end.events[0].val_loss, 3.3);
  EXPECT_EQ(end.events[1].kind, rp::log_event::kind_t::checkpoint);
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

TEST(LogLines, TorchtitansMeshLineOf2025AndAnUntimedFirstStep) {
  // pytorch/torchtitan#1349 (2025-06-26, the llama3 debug model on 8 GPUs), as pasted: the
  // "Building 1-D device mesh with ['dp_shard'], [8]" line and the GC line on one row, no
  // "Training starts" line, so step 1 is read but cannot be timed.
  const auto run = parse(
      "[rank0]:[titan] 2025-06-26 18:12:46,592 - root - INFO - Building 1-D device mesh with "
      "['dp_shard'], [8]                [rank0]:[titan] 2025-06-26 18:12:46,593 - root - INFO - "
      "[GC] Initial GC collection. 0.00 seconds.\n"
      "[rank0]:[titan] 2025-06-26 18:23:14,389 - root - INFO - step:  1  loss:  8.1996  memory:  "
      "2.65GiB(2.79%)  tps: 1,772  tflops: 0.13  mfu: 0.01%\n"
      "[rank0]:[titan] 2025-06-26 18:23:14,486 - root - INFO - step:  2  loss:  8.1709  memory:  "
      "2.66GiB(2.80%)  tps: 168,877  tflops: 12.14  mfu: 1.23%\n"
      "[rank0]:[titan] 2025-06-26 18:23:14,580 - root - INFO - step:  3  loss:  8.1121  memory:  "
      "2.66GiB(2.80%)  tps: 175,100  tflops: 12.59  mfu: 1.27%\n");
  EXPECT_EQ(run.facts.devices, 8);
  EXPECT_EQ(run.facts.devices_from, "torchtitan's device mesh line");
  ASSERT_EQ(run.steps.size(), 2u);
  ASSERT_TRUE(run.untimed_first_step.has_value());
  EXPECT_EQ(*run.untimed_first_step, 1u);
  EXPECT_DOUBLE_EQ(run.steps[1].m.dt_ms, 94.0);
  const auto a = rp::analyze_run(
      run, {.params = 6'000'000, .layers = 8, .width = 256, .seq = 2048, .device = "H100"});
  EXPECT_TRUE(a.from_start) << "the log starts at step 1, though step 1 is untimed";
  EXPECT_EQ(a.devices, 8);
  // The 2-D form multiplies its dims.
  const auto two = parse(
      "[rank0]:[titan] 2025-03-01 10:00:00,000 - root - INFO - Building 2-D device mesh with "
      "['dp_shard', 'tp'], [4, 2]\n"
      "[rank0]:[titan] 2025-03-01 10:00:01,000 - root - INFO - step:  1  loss:  8.0  tps: 100\n"
      "[rank0]:[titan] 2025-03-01 10:00:02,000 - root - INFO - step:  2  loss:  7.9  tps: 100\n");
  EXPECT_EQ(two.facts.devices, 8);
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
  ASSERT_EQ(run.events.size(), 1u) << "validation + HellaSwag of one step: one evaluation pass";
  EXPECT_EQ(run.events[0].what, "validation loss + HellaSwag");
  EXPECT_EQ(run.events[0].timed_in, 0u) << "t0 precedes the evaluation: step 0's time has it";
  EXPECT_DOUBLE_EQ(run.steps[0].m.val_loss, 10.949);
  EXPECT_DOUBLE_EQ(run.steps[1].m.grad_norm, 14.7211);
  // The video's chapters, commits 5265b20..7230096: print(f"step {i}, loss: {loss.item()}, dt:
  // {dt:.2f}ms, tok/sec: {tokens_per_sec:.2f}") - lines as people pasted them (B 16, T 1024).
  const auto early = parse(
      "using device: cuda\n"
      "loaded 338024 tokens\n"
      "1 epoch = 20 batches\n"
      "step 0, loss: 10.935468673706055, dt: 601.37ms, tok/sec: 27244.39\n"
      "step 1, loss: 9.398317337036133, dt: 353.86ms, tok/sec: 46301.37\n"
      "step 2, loss: 8.94157886505127, dt: 354.45ms, tok/sec: 46224.01\n");
  EXPECT_EQ(early.format, rp::log_format::build_nanogpt);
  ASSERT_EQ(early.steps.size(), 3u);
  EXPECT_DOUBLE_EQ(early.steps[1].m.loss, 9.398317337036133);
  EXPECT_DOUBLE_EQ(early.steps[2].m.dt_ms, 354.45);
  EXPECT_DOUBLE_EQ(early.steps[2].log_tok_per_s, 46224.01);
  EXPECT_EQ(early.skipped, 0u);
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

TEST(DeviceCount, ALaunchCommandPastedWithTheLogStatesTheCount) {
  using rp::detail::launch_command_devices;
  EXPECT_EQ(launch_command_devices("$ torchrun --standalone --nproc_per_node=8 train.py"), 8);
  EXPECT_EQ(launch_command_devices("torchrun --standalone --nproc_per_node=2 train_gpt2.py"), 2);
  // torchtitan's run_train.sh under `bash -x` (pytorch/torchtitan#931): "+ torchrun ...".
  EXPECT_EQ(launch_command_devices("+ torchrun --nproc_per_node=8 --rdzv_backend c10d "
                                   "--local-ranks-filter 0 --role rank --tee 3 -m train"),
            8);
  EXPECT_EQ(launch_command_devices("torchrun --nnodes=2 --nproc-per-node 4 train.py"), 8);
  EXPECT_EQ(launch_command_devices("python -m torch.distributed.launch --nproc_per_node 4 t.py"),
            4);
  EXPECT_EQ(launch_command_devices("mpirun -np 8 ./train_gpt2cu -e d12"), 8);
  // Not a count: an elastic range, a flag without a number, prose, another program.
  EXPECT_FALSE(launch_command_devices("torchrun --nproc_per_node=gpu train.py"));
  EXPECT_FALSE(launch_command_devices("set --nproc_per_node=8 when you run it"));
  EXPECT_FALSE(launch_command_devices("python train.py --batch_size=8"));
  // The build-nanogpt run on 2 x H100 (github.com/csabapalfi/build-nanogpt,
  // out/train-2x-h100-quick.log): the command is the paste's first line, the tool prints no
  // count, and the report reads 2 devices from it.
  const auto run = parse(
      "torchrun --standalone --nproc_per_node=2 train_gpt2.py\n"
      "W1116 23:02:04.101000 749 torch/distributed/run.py:793] \n"
      "total desired batch size: 524288\n"
      "=> calculated gradient accumulation steps: 4\n"
      "step     1 | loss: 10.902691 | lr 1.6783e-06 | norm: 14.8627 | dt: 1224.98ms | tok/sec: "
      "427997.90\n"
      "step     2 | loss: 10.803940 | lr 2.5175e-06 | norm: 14.4636 | dt: 1227.39ms | tok/sec: "
      "427155.63\n");
  EXPECT_EQ(run.facts.devices, 2);
  const auto a = rp::analyze_run(run, {.model = "d12", .seq = 1024, .device = "H100"});
  EXPECT_FALSE(a.devices_assumed);
  EXPECT_EQ(a.devices, 2);
  EXPECT_NEAR(a.mfu_median, d12_fpt() * 262144 / (a.summary.median_step_ms / 1e3) / 989e12, 1e-9);
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

TEST(Windows, TheFirstLineOfAnExcerptIsNoWarmUp) {
  // build-nanogpt lines as a user pasted pieces of a 2 x H800 run, "......" and all
  // (https://github.com/logbob0401/build-nanogpt/blob/abb0323b/practice.md): step 10750 is the
  // excerpt's first line (an evaluation step whose validation lines were not pasted), not the
  // run's warm-up; 11059 and 12585 are stalls.
  const auto run = parse(
      "step 10750 | loss: 3.170763 | lr 2.9059e-04 | norm: 0.3097 | dt: 24613.12ms | tok/sec: "
      "21301.16\n"
      "......\n"
      "step 11024 | loss: 3.129706 | lr 2.7811e-04 | norm: 0.2697 | dt: 1014.05ms | tok/sec: "
      "517024.54\n"
      "step 11025 | loss: 3.133868 | lr 2.7807e-04 | norm: 0.3027 | dt: 1015.43ms | tok/sec: "
      "516321.91\n"
      "......\n"
      "step 11058 | loss: 3.122603 | lr 2.7657e-04 | norm: 0.2706 | dt: 1013.66ms | tok/sec: "
      "517223.98\n"
      "step 11059 | loss: 3.166646 | lr 2.7653e-04 | norm: 0.2663 | dt: 91965.31ms | tok/sec: "
      "5700.93\n"
      "step 11060 | loss: 3.207780 | lr 2.7648e-04 | norm: 0.2743 | dt: 1014.06ms | tok/sec: "
      "517019.07\n");
  const rp::log_report_config cfg{.model = "d12", .seq = 1024, .devices = 2, .device = "H800"};
  const auto a = rp::analyze_run(run, cfg);
  EXPECT_EQ(a.warmup_lines, 0u);
  ASSERT_EQ(a.spikes.size(), 2u);
  EXPECT_EQ(a.spikes[0].step, 10750u);
  EXPECT_NE(a.spikes[0].what.find("starts mid-run"), std::string::npos) << a.spikes[0].what;
  EXPECT_EQ(a.spikes[1].step, 11059u);
  EXPECT_NEAR(a.mfu_median, 855383040.0 * 262144 / 1.01406 / 989e12, 1e-3);
  // The same lines from step 0 on: a slow first line is the warm-up.
  std::string from0 =
      "step     0 | loss: 10.955603 | lr 8.3916e-07 | norm: 59.6808 | dt: 20759.67ms | tok/sec: "
      "25255.12\n";
  for (int i = 1; i <= 4; ++i)
    from0 += "step     " + std::to_string(i) +
             " | loss: 10.9 | lr 1.6783e-06 | norm: 59.7401 | dt: 4777.36ms | tok/sec: "
             "109744.28\n";
  EXPECT_EQ(rp::analyze_run(parse(from0), cfg).warmup_lines, 1u);
}

TEST(DeviceCount, LlmcsCpuTrainerNeedsThePeakOfItsCpu) {
  // llm.c's README output on an Apple M3 Max (https://github.com/karpathy/llm.c/blob/e8e1628/
  // README.md): the log says CPU and names none; the table's "cpu" row is not that machine.
  const auto run = parse(
      "val loss 5.252026\n"
      "step 0: train loss 5.356189 (took 1452.121000 ms)\n"
      "step 1: train loss 4.301069 (took 1288.673000 ms)\n"
      "step 2: train loss 4.623322 (took 1369.394000 ms)\n");
  rp::log_report_config cfg{.model = "d12", .seq = 64, .tokens_per_step = 256};
  try {
    rp::analyze_run(run, cfg);
    FAIL() << "a CPU log analysed against a peak it does not state";
  } catch (const tk::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("log_report_config.peak_tflops (it ran on a CPU"),
              std::string::npos)
        << e.what();
  }
  cfg.peak_tflops = 2.0;  // given: the poster's machine
  const auto a = rp::analyze_run(run, cfg);
  EXPECT_GT(a.summary.median_step_ms, 1288.0);
  EXPECT_LT(a.summary.median_step_ms, 1370.0);
  EXPECT_NEAR(
      a.mfu_median,
      (6.0 * 123689472 + 12.0 * 12 * 768 * 64) * 256 / (a.summary.median_step_ms / 1e3) / 2e12,
      1e-9);
}

TEST(Windows, OneEvaluationInAnExcerptIsNoVerdict) {
  // Six lines pasted from the same 2 x H800 run (practice.md above): one evaluation pass
  // (validation + HellaSwag) inside step 500's 25.6 s. It is 87% of these four steps and ~10% of
  // a run that evaluates every 250 steps; the excerpt cannot tell which.
  const auto run = parse(
      "step   498 | loss: 5.180400 | lr 4.1874e-04 | norm: 1.0096 | dt: 927.33ms | tok/sec: "
      "565373.84\n"
      "step   499 | loss: 5.164181 | lr 4.1958e-04 | norm: 1.1487 | dt: 928.54ms | tok/sec: "
      "564638.99\n"
      "validation loss: 5.3183\n"
      "HellaSwag accuracy: 2391/10042=0.2381\n"
      "step   500 | loss: 5.209949 | lr 4.2042e-04 | norm: 1.0975 | dt: 25602.18ms | tok/sec: "
      "20478.26\n"
      "step   501 | loss: 5.164941 | lr 4.2126e-04 | norm: 0.8869 | dt: 929.10ms | tok/sec: "
      "564293.86\n");
  ASSERT_EQ(run.events.size(), 1u);
  const auto a =
      rp::analyze_run(run, {.model = "d12", .seq = 1024, .devices = 2, .device = "H800"});
  ASSERT_EQ(a.evals.size(), 1u);
  EXPECT_NEAR(a.eval_ms_total, 25602.18 - a.summary.median_step_ms, 1.0);
  EXPECT_NE(a.verdict, tk::bottleneck::eval);
  EXPECT_NE(a.evidence.find("one is not an interval"), std::string::npos) << a.evidence;
  // From step 0 on (not an excerpt) the same share is the run's and the verdict says so.
  std::string from0 =
      "step     0 | loss: 10.9 | lr 1e-06 | norm: 1.0 | dt: 928.00ms | tok/sec: 1\n";
  for (const char* l :
       {"step     1 | loss: 10.9 | lr 1e-06 | norm: 1.0 | dt: 927.00ms | tok/sec: 1\n",
        "validation loss: 5.3183\n",
        "step     2 | loss: 10.9 | lr 1e-06 | norm: 1.0 | dt: 25602.18ms | tok/sec: 1\n",
        "step     3 | loss: 10.9 | lr 1e-06 | norm: 1.0 | dt: 929.00ms | tok/sec: 1\n"})
    from0 += l;
  const auto b = rp::analyze_run(
      parse(from0),
      {.model = "d12", .seq = 1024, .tokens_per_step = 524288, .devices = 2, .device = "H800"});
  EXPECT_EQ(b.verdict, tk::bottleneck::eval);
}
