# tests/examples/gpt_fineweb_report_test.cmake — `gpt_fineweb report LOG` on the sample logs of
# tests/fixtures/logs (nanoGPT, llm.c, torchtitan) and on a trainkit metrics file, and its bad
# inputs: each is one line on stderr naming the flag or the file, exit code 2 (cmake -P).
# Inputs: EXE (gpt_fineweb), WORK (scratch directory), LOGS (tests/fixtures/logs).
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/expect_exit.cmake)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(failures "")

# expect_out(<regex> ...): the last command's stdout matches each regex.
function(expect_out)
  foreach(regex ${ARGN})
    if(NOT last_output MATCHES "${regex}")
      string(APPEND failures "stdout lacks '${regex}':\n${last_output}\n")
    endif()
  endforeach()
  set(failures "${failures}" PARENT_SCOPE)
endfunction()

set(nanogpt ${LOGS}/nanogpt_gpt2xl_h200.log)
set(llmc ${LOGS}/llmc_gpt2xl_h100.log)
set(titan ${LOGS}/torchtitan_llama_h200.log)

# The seed: nanoGPT's "mfu 164%" on an H200 is 51.9% of 989 TFLOP/s; the 164% is the A100's peak.
expect_exit(0 "" report ${nanogpt} --model d48 --device H200 --svg ${WORK}/nanogpt.svg)
expect_out("nanoGPT train.py log" "MFU 51\\.9%" "floor: 10\\.90 s per step"
           "the A100's dense bf16 peak" "iter 250 took 105\\.0 s, 84\\.0 s above the median"
           "torch.compile" "verdict: compute-bound .*faster kernels, not more data workers"
           "chart: ")
if(NOT EXISTS ${WORK}/nanogpt.svg)
  string(APPEND failures "--svg wrote no chart\n")
endif()
# --from names the format; what the log states (N, L, C, T, tokens) needs no flag.
expect_exit(0 "" report ${nanogpt} --from nanogpt --peak-tflops 989)
expect_out("MFU 51\\.9%")
# llm.c's log carries its own table: no flag needed.
expect_exit(0 "" report ${llmc})
expect_out("llm.c log" "NVIDIA H100 80GB HBM3" "in no step time of the log"
           "verdict: compute-bound")
expect_exit(0 "" report ${titan} --params 1800000000 --layers 24 --width 2048 --seq 4096)
expect_out("torchtitan log" "~84\\.1 s each \\(as the log states\\)" "verdict: compute-bound")

# A trainkit metrics file keeps its report (phases from the file).
file(WRITE ${WORK}/metrics.jsonl
  "{\"step\":1,\"loss\":5.0,\"tokens\":100,\"dt_ms\":20.0,\"compute_ms\":20.0,\"tflops\":1.0,\"mfu\":0.5}\n"
  "{\"step\":2,\"loss\":4.9,\"tokens\":100,\"dt_ms\":10.0,\"compute_ms\":6.0,\"ckpt_stall_ms\":4.0,\"tflops\":1.0,\"mfu\":0.5}\n"
  "{\"step\":3,\"loss\":4.8,\"tokens\":100,\"dt_ms\":10.0,\"compute_ms\":6.0,\"ckpt_stall_ms\":4.0,\"tflops\":1.0,\"mfu\":0.5}\n")
expect_exit(0 "" report ${WORK}/metrics.jsonl)
expect_out("^steps 3 \\| median 10\\.0 ms" "time share: compute 60\\.0% ckpt_stall 40\\.0%"
           "verdict: checkpoint-bound")
if(last_output MATCHES "log: ")
  string(APPEND failures "a trainkit metrics file got a foreign log's report:\n${last_output}\n")
endif()

# A log as pasted (karpathy/nanoGPT#110: 8 x A100, no mfu in early 2023), behind prefixes.
file(WRITE ${WORK}/pasted.log
  "$ torchrun --standalone --nproc_per_node=8 train.py\n"
  "[rank0]:2023-02-02 10:00:01 iter 1631: loss 4.0863, time 561.94ms\r\n"
  "[rank0]:2023-02-02 10:00:02 iter 1632: loss 3.7441, time 563.15ms\r\n"
  "[rank0]:2023-02-02 10:00:02 iter 1633: loss 3.9848, time 562.11ms\r\n"
  "[rank0]:2023-02-02 10:00:03 iter 1634: loss 3.8716, time 562.80ms\r\n")
# Per device with --gpus: 855,383,040 FLOPs x 61,440 tokens / 0.5625 s / 312 TFLOP/s = 29.9%.
expect_exit(0 "" report ${WORK}/pasted.log --model d12 --seq 1024 --tokens-per-step 491520
            --gpus 8 --device "NVIDIA A100-SXM4-80GB")
expect_out("nanoGPT train.py log" "devices: 8 \\(given\\)" "MFU 29\\.9%" "window: an excerpt from iter 1631")
# Without --gpus the pasted launch command says 8.
expect_exit(0 "" report ${WORK}/pasted.log --model d12 --seq 1024 --tokens-per-step 491520
            --device A100)
expect_out("devices: 8 \\(the launch command in the log, line 1\\)" "MFU 29\\.9%")
# Without it (the paste cut after the command) the log is one device at 239%: no figure, no
# verdict, the device count named.
file(WRITE ${WORK}/pasted_cut.log
  "[rank0]:2023-02-02 10:00:01 iter 1631: loss 4.0863, time 561.94ms\r\n"
  "[rank0]:2023-02-02 10:00:02 iter 1632: loss 3.7441, time 563.15ms\r\n"
  "[rank0]:2023-02-02 10:00:02 iter 1633: loss 3.9848, time 562.11ms\r\n"
  "[rank0]:2023-02-02 10:00:03 iter 1634: loss 3.8716, time 562.80ms\r\n")
expect_exit(0 "" report ${WORK}/pasted_cut.log --model d12 --seq 1024 --tokens-per-step 491520
            --device A100)
expect_out("verdict: none — no measurement and no verdict"
           "the device count 1 \\(assumed: the log does not say; give --gpus\\) would have to be at least 3"
           "floor: not stated")
if(last_output MATCHES "MFU [1-9][0-9][0-9]\\.")
  string(APPEND failures "an MFU above 100% was printed:\n${last_output}\n")
endif()
expect_exit(0 "" report ${WORK}/pasted.log --arch llama --model d12 --seq 1024
            --tokens-per-step 491520 --gpus 8 --device h100)
expect_out("model: Llama d12: 6·N")
# trainkit's own file: the run header's ranks make MFU per device; an old file above 100% is
# refused until --gpus says how many ranks.
file(WRITE ${WORK}/ranks.jsonl
  "{\"run\":{\"model\":\"d12\",\"attention\":\"cudnn\",\"world_size\":2,\"peak_tflops\":989,\"dtype\":\"bf16\"}}\n"
  "{\"step\":1,\"loss\":5.0,\"tokens\":100,\"dt_ms\":10.0,\"compute_ms\":10.0,\"tflops\":1186.8,\"mfu\":1.2}\n"
  "{\"step\":2,\"loss\":4.9,\"tokens\":100,\"dt_ms\":10.0,\"compute_ms\":10.0,\"tflops\":1186.8,\"mfu\":1.2}\n")
expect_exit(0 "" report ${WORK}/ranks.jsonl)
expect_out("run: model d12, attention cudnn, 2 ranks" "devices: 2 \\(the run header\\)" "MFU 60\\.0%")
# Files written since the trainer's lines are per device ("mfu_per":"device: ..."): not divided again.
file(WRITE ${WORK}/per_device.jsonl
  "{\"run\":{\"model\":\"d12\",\"mfu_per\":\"device: all ranks' FLOP/s / world_size / one device's peak\",\"world_size\":2,\"peak_tflops\":989,\"dtype\":\"bf16\"}}\n"
  "{\"step\":1,\"loss\":5.0,\"tokens\":100,\"dt_ms\":10.0,\"compute_ms\":10.0,\"tflops\":1186.8,\"mfu\":0.6}\n"
  "{\"step\":2,\"loss\":4.9,\"tokens\":100,\"dt_ms\":10.0,\"compute_ms\":10.0,\"tflops\":1186.8,\"mfu\":0.6}\n")
expect_exit(0 "" report ${WORK}/per_device.jsonl)
expect_out("devices: 2 \\(the run header\\)" "MFU 60\\.0%")
file(WRITE ${WORK}/old_ranks.jsonl
  "{\"step\":1,\"loss\":5.0,\"tokens\":100,\"dt_ms\":10.0,\"compute_ms\":10.0,\"tflops\":1186.8,\"mfu\":1.2}\n"
  "{\"step\":2,\"loss\":4.9,\"tokens\":100,\"dt_ms\":10.0,\"compute_ms\":10.0,\"tflops\":1186.8,\"mfu\":1.2}\n")
expect_exit(0 "" report ${WORK}/old_ranks.jsonl)
expect_out("no measurement and no verdict" "rank count 1 .* would have to be at least 2")
expect_exit(0 "" report ${WORK}/old_ranks.jsonl --gpus 2)
expect_out("MFU 60\\.0%")
# --help says what each flag is for.
expect_exit(0 "" report --help)
expect_out("--gpus.*per device" "--active-params.*mixture of experts" "--arch.*llama")

# Missing facts and bad input: one line naming the flag or the file, exit 2.
expect_exit(2 "--device \\(or --peak-tflops\\)" report ${nanogpt})
expect_exit(2 "--model \\(or --params, --layers and --width\\)" report ${titan})
expect_exit(2 "--device: 'TPU v5' is not in the peak table" report ${nanogpt} --device "TPU v5")
expect_exit(2 "--model: unknown GPT-2 preset 'd99'" report ${nanogpt} --model d99 --device H200)
expect_exit(2 "no step lines of a nanoGPT train.py log" report ${llmc} --from nanogpt)
file(WRITE ${WORK}/notes.txt "hello\nworld\n")
expect_exit(2 "notes\\.txt: not a training log.*it begins \"hello\", \"world\"" report ${WORK}/notes.txt)
expect_exit(2 "cannot open log file .*missing\\.log" report ${WORK}/missing.log)
expect_exit(2 "--from" report ${nanogpt} --from wandb)
expect_exit(2 "--device" report ${nanogpt} --device H200 --peak-tflops 989)

if(failures)
  message(FATAL_ERROR "gpt_fineweb report:\n${failures}")
endif()
message("gpt_fineweb report: all cases behaved")
