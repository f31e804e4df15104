# Runs gpt_fineweb the way a user does (cmake -P): bad input ends with one line on stderr naming the
# flag or file and exit code 2; a short training run exports an llm.c file that --sample loads.
# -DEXE=gpt_fineweb -DWORK=scratch dir -DVOCAB=GPT-2 vocabulary dir (the bundled one; sampling
# runs once with --vocab and once without, which must pick the bundled copy and agree).
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(failures "")

include(${CMAKE_CURRENT_LIST_DIR}/expect_exit.cmake)

expect_exit(2 "no-such-dir/\\*\\.bin" --data ${WORK}/no-such-dir/*.bin --steps 1)
file(WRITE ${WORK}/odd.bin "abc")  # 3 bytes: neither an llm.c shard nor whole uint16 tokens
expect_exit(2 "odd\\.bin" --data ${WORK}/odd.bin --steps 1)
expect_exit(2 "--batch" --batch 0 --steps 1)
expect_exit(2 "--total-batch-tokens" --total-batch-tokens 100 --steps 1)
expect_exit(2 "--model" --model d7)
expect_exit(2 "--sample needs a trained model" --sample 3)
expect_exit(2 "missing-model\\.bin" --init-from ${WORK}/missing-model.bin --steps 1)

# Train briefly on the embedded corpus, export, then sample from the exported file.
expect_exit(0 "" --steps 2 --eval-every 0 --no-progress --export ${WORK}/model.bin)
if(NOT EXISTS ${WORK}/model.bin)
  string(APPEND failures "--export did not write model.bin\n")
endif()
if(EXISTS ${VOCAB}/encoder.json)
  expect_exit(0 "" --sample 8 --init-from ${WORK}/model.bin --vocab ${VOCAB} --prompt "Hello"
              --seed 3)
  set(first "${last_output}")
  # No --vocab: the bundled vocabulary, which must give the same text.
  expect_exit(0 "" --sample 8 --init-from ${WORK}/model.bin --prompt "Hello" --seed 3)
  if(NOT last_output MATCHES "^Hello" OR NOT first STREQUAL last_output)
    string(APPEND failures "sampling: output '${last_output}' should start with the prompt and "
                           "repeat for the same seed ('${first}')\n")
  endif()
else()
  message("sampling case skipped: no GPT-2 vocabulary in ${VOCAB}")
endif()

if(failures)
  message(FATAL_ERROR "gpt_fineweb CLI:\n${failures}")
endif()
message("gpt_fineweb CLI: all cases behaved")
