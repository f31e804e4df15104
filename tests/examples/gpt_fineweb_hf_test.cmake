# Runs gpt_fineweb's model-file subcommands the way a user does (cmake -P): a briefly trained
# model exported with --export goes through export-hf and import-hf back to a byte-identical llm.c
# file (fp32); the folder holds what from_pretrained reads; `eval --hellaswag` scores both files
# identically; bad input ends with one line on stderr naming the file or field and exit code 2.
# -DEXE=gpt_fineweb -DWORK=scratch dir -DFIXTURE=tests/eval/hellaswag_fixture.jsonl
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(failures "")

include(${CMAKE_CURRENT_LIST_DIR}/expect_exit.cmake)

expect_exit(0 "" --steps 2 --eval-every 0 --no-progress --export ${WORK}/model.bin
            --export-hf ${WORK}/hf-train)
expect_exit(0 "" export-hf ${WORK}/model.bin ${WORK}/hf)
# Training's --export-hf writes what export-hf of its --export file writes, byte for byte, and
# --init-from-hf starts from exactly those weights (0 steps, then --export: the same llm.c file).
foreach(f model.safetensors config.json vocab.json merges.txt)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK}/hf/${f} ${WORK}/hf-train/${f}
                  RESULT_VARIABLE same)
  if(NOT same EQUAL 0)
    string(APPEND failures "--export-hf and export-hf wrote different ${f}\n")
  endif()
endforeach()
expect_exit(0 "" --steps 0 --eval-every 0 --no-progress --init-from-hf ${WORK}/hf-train
            --export ${WORK}/from-hf.bin)
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK}/model.bin ${WORK}/from-hf.bin
                RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  string(APPEND failures "--init-from-hf of --export-hf's folder is not the trained model\n")
endif()
expect_exit(2 "--init-from and --init-from-hf" --steps 1 --init-from ${WORK}/model.bin
            --init-from-hf ${WORK}/hf-train)
expect_exit(2 "no-such-folder" --steps 1 --init-from-hf ${WORK}/no-such-folder)
expect_exit(2 "--export-hf needs --device cpu" --steps 1 --device cuda --export-hf ${WORK}/x)
foreach(f model.safetensors config.json vocab.json merges.txt tokenizer_config.json)
  if(NOT EXISTS ${WORK}/hf/${f})
    string(APPEND failures "export-hf did not write ${f}\n")
  endif()
endforeach()
expect_exit(0 "" import-hf ${WORK}/hf ${WORK}/back.bin)
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK}/model.bin ${WORK}/back.bin
                RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  string(APPEND failures "model.bin -> export-hf -> import-hf is not byte-identical\n")
endif()
# The imported file is a model training starts from.
expect_exit(0 "" --steps 1 --eval-every 0 --no-progress --init-from ${WORK}/back.bin)

# HellaSwag on the fixture: the same line for the trained file and its HF round trip.
expect_exit(0 "" eval --hellaswag ${FIXTURE} --init-from ${WORK}/model.bin)
set(first "${last_output}")
if(NOT first MATCHES "^hellaswag: 3 examples, acc [01]\\.[0-9]+ \\([0-3]\\), acc_norm [01]\\.[0-9]+ \\([0-3]\\)\n$")
  string(APPEND failures "eval: unexpected output '${first}'\n")
endif()
expect_exit(0 "" eval --hellaswag ${FIXTURE} --init-from ${WORK}/back.bin)
if(NOT first STREQUAL last_output)
  string(APPEND failures "eval: '${last_output}' after the HF round trip, '${first}' before\n")
endif()
expect_exit(0 "" eval --hellaswag ${FIXTURE} --init-from ${WORK}/model.bin --limit 1)
if(NOT last_output MATCHES "^hellaswag: 1 examples")
  string(APPEND failures "eval --limit 1: '${last_output}'\n")
endif()
# HellaSwag during training: scored at step 2 and after the last step (3), the last line equals
# `eval` of the exported model, and beside --metrics each score is a JSON line.
expect_exit(0 "" --steps 3 --eval-every 0 --no-progress --hellaswag ${FIXTURE} --hellaswag-every 2
            --export ${WORK}/hs.bin --metrics ${WORK}/hs.jsonl)
set(train_out "${last_output}")
string(REGEX MATCHALL "hellaswag at step [0-9]+: [^\n]*" during "${last_output}")
list(LENGTH during n_during)
if(NOT n_during EQUAL 2)
  string(APPEND failures "--hellaswag-every 2 over 3 steps printed ${n_during} scores\n")
else()
  list(GET during 0 at2)
  list(GET during 1 at3)
  string(REGEX REPLACE "^hellaswag at step 3: " "hellaswag: " at3_as_eval "${at3}")
  expect_exit(0 "" eval --hellaswag ${FIXTURE} --init-from ${WORK}/hs.bin)
  if(NOT at2 MATCHES "^hellaswag at step 2: 3 examples" OR NOT "${at3_as_eval}\n" STREQUAL last_output)
    string(APPEND failures "during training '${at2}', '${at3}'; eval of the export '${last_output}'\n")
  endif()
endif()
file(STRINGS ${WORK}/hs.hellaswag.jsonl hs_lines)
list(LENGTH hs_lines n_hs)
if(NOT n_hs EQUAL 2 OR NOT hs_lines MATCHES "\"step\":3")
  string(APPEND failures "hs.hellaswag.jsonl: '${hs_lines}'\n")
endif()
# The end-of-run report and `report` of the metrics file both summarise the log, the latter read
# back from hs.hellaswag.jsonl; a malformed log line is refused naming the file and line.
string(REGEX MATCH "hellaswag: 2 evaluations; last \\(step 3\\) acc [0-9.]+ acc_norm [0-9.]+ over 3 examples; best acc_norm [0-9.]+ at step [23]"
       hs_summary "${train_out}")
if(NOT hs_summary)
  string(APPEND failures "the end-of-run report has no HellaSwag summary:\n${train_out}\n")
else()
  expect_exit(0 "" report ${WORK}/hs.jsonl)
  string(FIND "${last_output}" "${hs_summary}" at)
  if(at EQUAL -1)
    string(APPEND failures "`report hs.jsonl` lacks '${hs_summary}':\n${last_output}\n")
  endif()
endif()
file(APPEND ${WORK}/hs.hellaswag.jsonl "{\"step\": 4}\n")
expect_exit(2 "hs\\.hellaswag\\.jsonl':3" report ${WORK}/hs.jsonl)
expect_exit(2 "--hellaswag FILE and --hellaswag-every" --hellaswag-every 2 --steps 1)
expect_exit(2 "hellaswag\\.jsonl" --steps 1 --hellaswag ${WORK}/missing.hellaswag.jsonl
            --hellaswag-every 1)

file(WRITE ${WORK}/bad.jsonl "{\"ctx\": \"a\", \"label\": 7, \"endings\": [\"a\",\"b\",\"c\",\"d\"]}\n")
expect_exit(2 "bad\\.jsonl':1.*label" eval --hellaswag ${WORK}/bad.jsonl --init-from ${WORK}/model.bin)
expect_exit(2 "--init-from" eval --hellaswag ${FIXTURE})

expect_exit(2 "missing\\.bin" export-hf ${WORK}/missing.bin ${WORK}/hf2)
expect_exit(2 "--dtype" export-hf ${WORK}/model.bin ${WORK}/hf2 --dtype f16)
expect_exit(2 "nothing/config\\.json" import-hf ${WORK}/nothing ${WORK}/x.bin)
file(READ ${WORK}/hf/config.json config)
string(REPLACE "\"gelu_new\"" "\"relu\"" config "${config}")
file(MAKE_DIRECTORY ${WORK}/relu)
file(WRITE ${WORK}/relu/config.json "${config}")
file(COPY ${WORK}/hf/model.safetensors DESTINATION ${WORK}/relu)
expect_exit(2 "activation_function" import-hf ${WORK}/relu ${WORK}/x.bin)
file(MAKE_DIRECTORY ${WORK}/trunc)
file(COPY ${WORK}/hf/config.json DESTINATION ${WORK}/trunc)
file(WRITE ${WORK}/trunc/model.safetensors "12345678")
expect_exit(2 "trunc/model\\.safetensors" import-hf ${WORK}/trunc ${WORK}/x.bin)

# Every command for every family (commands/hf_commands.hpp, commands/model_source.hpp): a Llama
# trained into a checkpoint goes through export-hf (the folder training's --export-hf wrote, byte
# for byte), import-hf back into a model-only checkpoint, and export-hf of that (byte for byte
# again); eval of the checkpoint scores what eval of the folder scores; --sample reads the
# imported checkpoint. The checks name the flag: a Llama from an llm.c file, a bf16 checkpoint,
# another shape than the checkpoint's.
expect_exit(0 "" --arch llama --steps 2 --eval-every 0 --no-progress --ckpt-mode sync
            --ckpt-dir ${WORK}/llama-ck --export-hf ${WORK}/llama-train)
expect_exit(0 "" export-hf ${WORK}/llama-ck ${WORK}/llama-hf)  # --arch from the checkpoint
expect_exit(0 "" import-hf --arch llama ${WORK}/llama-hf ${WORK}/llama-imported)
expect_exit(0 "" export-hf ${WORK}/llama-imported ${WORK}/llama-hf2 --arch llama --model d2)
foreach(f model.safetensors config.json)
  foreach(pair "llama-train;llama-hf" "llama-hf;llama-hf2")
    list(GET pair 0 a)
    list(GET pair 1 b)
    execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK}/${a}/${f} ${WORK}/${b}/${f}
                    RESULT_VARIABLE same)
    if(NOT same EQUAL 0)
      string(APPEND failures "llama: ${a}/${f} and ${b}/${f} differ\n")
    endif()
  endforeach()
endforeach()
expect_exit(0 "" eval --hellaswag ${FIXTURE} --arch llama --ckpt-dir ${WORK}/llama-ck)
set(llama_ckpt_eval "${last_output}")
expect_exit(0 "" eval --hellaswag ${FIXTURE} --arch llama --init-from-hf ${WORK}/llama-hf)
if(NOT llama_ckpt_eval MATCHES "^hellaswag: 3 examples" OR
   NOT llama_ckpt_eval STREQUAL last_output)
  string(APPEND failures "llama eval: checkpoint '${llama_ckpt_eval}', folder '${last_output}'\n")
endif()
expect_exit(0 "" --sample 4 --arch llama --ckpt-dir ${WORK}/llama-imported --seed 3)
if(NOT last_output MATCHES "sampling from the checkpoint of step 0")
  string(APPEND failures "--sample from import-hf's checkpoint: '${last_output}'\n")
endif()
expect_exit(2 "llm\\.c model file, which holds GPT-2 only" export-hf ${WORK}/model.bin
            ${WORK}/x-hf --arch llama)
expect_exit(2 "--dtype bf16" import-hf --arch llama --dtype bf16 ${WORK}/llama-hf ${WORK}/x-ck)
expect_exit(2 "--model" export-hf ${WORK}/llama-ck ${WORK}/x-hf --model d6)
expect_exit(2 "--kv-heads applies to --arch llama" export-hf ${WORK}/model.bin ${WORK}/x-hf
            --kv-heads 1)

if(failures)
  message(FATAL_ERROR "gpt_fineweb HF:\n${failures}")
endif()
message("gpt_fineweb HF: all cases behaved")
