# gpt_fineweb's two devices run one driver (examples/gpt_fineweb/train/driver.hpp), which checks
# every flag, the model file and the data shards before it touches the device: so each bad input
# below must end with exit 2 and the same one line on stderr for --device cpu and --device cuda,
# on this machine without a GPU as on one with. A flag a device cannot honour is refused naming
# that flag. Then a correct --device cuda run: without a GPU, "no CUDA device found" (exit 2);
# with one, it trains (exit 0). Built only where gpt_fineweb has the CUDA composition.
# -DEXE=gpt_fineweb -DWORK=scratch dir -DNCCL=ON|OFF (--reducer nccl built in)
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(failures "")

include(${CMAKE_CURRENT_LIST_DIR}/expect_exit.cmake)

# expect_same(<regex> args...): exit 2 on both devices, the same stderr, matching regex.
function(expect_same regex)
  set(common --steps 1 --eval-every 0 --no-progress)
  expect_exit(2 "^gpt_fineweb: (I/O )?error: ${regex}$" --device cpu ${common} ${ARGN})
  set(cpu "${last_error}")
  expect_exit(2 "^gpt_fineweb: (I/O )?error: ${regex}$" --device cuda ${common} ${ARGN})
  if(NOT cpu STREQUAL last_error)
    string(APPEND failures "`${ARGN}`: the devices disagree:\n  cpu:  ${cpu}\n  cuda: ${last_error}\n")
  endif()
  set(failures "${failures}" PARENT_SCOPE)
endfunction()

# train_options::validate
expect_same("--batch must be positive: 0" --batch 0)
expect_same("--total-batch-tokens 100 is not a multiple of --batch x --seq = 512"
            --total-batch-tokens 100)
expect_same("--resume needs --ckpt-mode sync\\|async and --ckpt-dir" --resume)
# the driver's first phase: AdamW's and the schedule's own checks (flag_names.hpp names the flag)
expect_same("--grad-clip must be finite and >= 0 \\(0 = off\\): -1" --grad-clip -1)
expect_same("--final-lr-frac must be in \\[0,1\\]: 2" --final-lr-frac 2)
expect_same("--warmup must be >= 0: -2" --warmup -2)
expect_same("--ckpt-mode sync needs --ckpt-dir DIR" --ckpt-mode sync)
expect_same("--seq 2048 exceeds the model's max_seq_len 1024" --seq 2048 --batch 1)
# files: the model file's header and the shards are read before the device is touched
expect_same(".*missing-model\\.bin.*" --init-from ${WORK}/missing-model.bin)
file(WRITE ${WORK}/odd.bin "abc")
expect_same(".*odd\\.bin.*" --data ${WORK}/odd.bin)
expect_same(".*no-such-dir/\\*\\.bin.*" --data ${WORK}/no-such-dir/*.bin)

# What a device cannot do is refused naming the flag.
set(quick --steps 1 --eval-every 0 --no-progress)
expect_exit(2 "^gpt_fineweb: error: --attention flash needs --device cuda" --attention flash
            ${quick})
expect_exit(2 "^gpt_fineweb: error: --reducer nccl .*needs --device cuda" --reducer nccl ${quick})
expect_exit(2 "^gpt_fineweb: error: --reducer nccl-zero1 .*needs --device cuda" --reducer nccl-zero1
            ${quick})
expect_exit(2 "^gpt_fineweb: error: --reducer mpi-zero1 .*needs --device cpu" --device cuda
            --reducer mpi-zero1 ${quick})
expect_exit(2 "^gpt_fineweb: error: --reducer mpi .*needs --device cpu" --device cuda --reducer mpi
            ${quick})
expect_exit(2 "^gpt_fineweb: error: --sample-every: .*--device cpu" --device cuda --sample 4
            --sample-every 1 ${quick})
expect_exit(2 "^gpt_fineweb: error: --export-hf needs --device cpu" --device cuda
            --export-hf ${WORK}/hf ${quick})

# --reducer nccl checks the flags on every rank before any rank takes its GPU (here one rank,
# MPI started without mpirun).
if(NCCL)
  expect_exit(2 "^gpt_fineweb: error: --ckpt-mode sync needs --ckpt-dir DIR$" --device cuda
              --reducer nccl --ckpt-mode sync ${quick})
  expect_exit(2 "^gpt_fineweb: error: --grad-clip must be finite and >= 0 \\(0 = off\\): -1$"
              --device cuda --reducer nccl --grad-clip -1 ${quick})
  expect_exit(2 "^gpt_fineweb: error: --ckpt-mode sync needs --ckpt-dir DIR$" --device cuda
              --reducer nccl-zero1 --ckpt-mode sync ${quick})
  expect_exit(2 "^gpt_fineweb: error: --grad-clip must be finite and >= 0 \\(0 = off\\): -1$"
              --device cuda --reducer nccl-zero1 --grad-clip -1 ${quick})
endif()

# A correct run: no GPU here ends cleanly naming --device; a GPU trains.
foreach(reducer single nccl nccl-zero1)
  if(reducer MATCHES "^nccl" AND NOT NCCL)
    expect_exit(2 "^gpt_fineweb: error: --reducer ${reducer}: this build has no NCCL" --device cuda
                --reducer ${reducer} ${quick})
    continue()
  endif()
  execute_process(COMMAND ${EXE} --device cuda --reducer ${reducer} ${quick}
                  WORKING_DIRECTORY ${WORK} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  string(STRIP "${err}" err)
  if(rc EQUAL 2)
    if(NOT err STREQUAL "gpt_fineweb: error: --device cuda: no CUDA device found")
      string(APPEND failures "--device cuda --reducer ${reducer}: exit 2 with '${err}'\n")
    endif()
  elseif(NOT rc EQUAL 0)
    string(APPEND failures "--device cuda --reducer ${reducer}: exit ${rc}\n${err}\n")
  endif()
endforeach()

if(failures)
  message(FATAL_ERROR "gpt_fineweb devices:\n${failures}")
endif()
message("gpt_fineweb devices: every flag behaved the same")
