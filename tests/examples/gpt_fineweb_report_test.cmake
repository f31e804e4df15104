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
expect_out("llm.c train_gpt2.cu log" "NVIDIA H100 80GB HBM3" "in no step time of the log"
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

# Missing facts and bad input: one line naming the flag or the file, exit 2.
expect_exit(2 "--device \\(or --peak-tflops\\)" report ${nanogpt})
expect_exit(2 "--model \\(or --params, --layers and --width\\)" report ${titan})
expect_exit(2 "--device: 'TPU v5' is not in the peak table" report ${nanogpt} --device "TPU v5")
expect_exit(2 "--model: unknown GPT-2 preset 'd99'" report ${nanogpt} --model d99 --device H200)
expect_exit(2 "no step lines of a nanoGPT train.py log" report ${llmc} --from nanogpt)
file(WRITE ${WORK}/notes.txt "hello\nworld\n")
expect_exit(2 "notes\\.txt: not a training log" report ${WORK}/notes.txt)
expect_exit(2 "cannot open log file .*missing\\.log" report ${WORK}/missing.log)
expect_exit(2 "--from" report ${nanogpt} --from wandb)
expect_exit(2 "--device" report ${nanogpt} --device H200 --peak-tflops 989)

if(failures)
  message(FATAL_ERROR "gpt_fineweb report:\n${failures}")
endif()
message("gpt_fineweb report: all cases behaved")
