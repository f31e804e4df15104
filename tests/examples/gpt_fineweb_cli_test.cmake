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
# A file without the llm.c magic is not guessed to be headerless tokens: exit 2, the file and the
# flag named, and nothing written (no metrics, no checkpoint directory).
string(REPEAT "ab" 600 junk)  # 1200 bytes: even-sized, first int32 0x62616261
file(WRITE ${WORK}/foreign.bin "${junk}")
expect_exit(2 "foreign\\.bin.*1650549345.*--data-format headerless_uint16" --data ${WORK}/foreign.bin
            --steps 1 --metrics ${WORK}/foreign.jsonl --ckpt-mode sync --ckpt-dir ${WORK}/foreign_ckpt)
foreach(written foreign.jsonl foreign_ckpt)
  if(EXISTS ${WORK}/${written})
    string(APPEND failures "a rejected shard still wrote ${written}\n")
  endif()
endforeach()
# The same bytes are 600 tokens (id 25185) when the user says they are headerless.
expect_exit(0 "" --data ${WORK}/foreign.bin --data-format headerless_uint16 --val ${WORK}/foreign.bin
            --batch 2 --seq 16 --steps 1 --eval-every 0 --eval-batches 1 --no-progress)
expect_exit(2 "--batch" --batch 0 --steps 1)
# Every bad value names the flag the user typed, never the library's config field (the library
# says "trainer_config.grad_clip"; examples/gpt_fineweb/flag_names.hpp maps it to --grad-clip).
function(expect_flag_error regex)
  expect_exit(2 "^gpt_fineweb: error: ${regex}$" ${ARGN} --eval-every 0 --no-progress)
  if(last_error MATCHES "_config|lr_schedule")
    string(APPEND failures "`${ARGN}`: the message names a config field: ${last_error}\n")
  endif()
  set(failures "${failures}" PARENT_SCOPE)
endfunction()
expect_flag_error("--threads must be >= 0 \\(0 = all cores\\): -3" --threads -3 --steps 1)
expect_flag_error("--steps must be >= 0: -1" --steps -1)
expect_flag_error("--total-batch-tokens 100 is not a multiple of --batch x --seq = 512"
                  --total-batch-tokens 100 --steps 1)
expect_flag_error("--lr must be positive: -0\\.001000" --lr -1e-3 --steps 1)
expect_flag_error("--lr must be positive: nan" --lr nan --steps 1)
expect_flag_error("--warmup must be >= 0: -2" --warmup -2 --steps 1)
# These reach the library's own checks (adamw_config::validate, lr_schedule::validate).
expect_flag_error("--grad-clip must be finite and >= 0 \\(0 = off\\): -1" --grad-clip -1 --steps 1)
expect_flag_error("--weight-decay must be finite and >= 0: -0\\.5" --weight-decay -0.5 --steps 1)
expect_flag_error("--beta2 must be in \\[0,1\\): 1" --beta2 1 --steps 1)
expect_flag_error("--eps must be finite and > 0: 0" --eps 0 --steps 1)
expect_flag_error("--final-lr-frac must be in \\[0,1\\]: 2" --final-lr-frac 2 --steps 1)
# sampling_config::validate, tokenizer::resolve_vocab_dir (flag_names.hpp maps their fields).
expect_flag_error("--temperature must be >= 0: -1\\.000000" --temperature -1 --steps 1)
expect_flag_error("--top-k must be >= 0: -2" --top-k -2 --steps 1)
# A flag's check never depends on another flag: --eval-batches 0 is refused on the embedded
# corpus (which has a validation split), with --data alone (no validation) and with --data and
# --val alike (it was once accepted in the second case only).
expect_flag_error("--eval-batches must be positive: 0" --eval-batches 0 --steps 1)
expect_flag_error("--eval-batches must be positive: 0" --eval-batches 0 --steps 1
                  --data ${WORK}/foreign.bin --data-format headerless_uint16)
expect_flag_error("--eval-batches must be positive: 0" --eval-batches 0 --steps 1
                  --data ${WORK}/foreign.bin --val ${WORK}/foreign.bin
                  --data-format headerless_uint16)
# --muon-lr is checked on its own (the optimizer gets --muon-lr / --lr, set once).
expect_flag_error("--muon-lr must be finite and > 0: 0\\.000000" --optimizer muon --muon-lr 0
                  --steps 1)
file(WRITE ${WORK}/doc.txt "hello")
expect_exit(2 "^gpt_fineweb: error: --vocab [^ ]*/no-vocab: not a directory"
            prepare --out ${WORK}/prep --vocab ${WORK}/no-vocab ${WORK}/doc.txt)
expect_exit(2 "--model" --model d7)
# Families (examples/gpt_fineweb/families/registry.hpp): an unknown --arch / --optimizer is a
# flag error naming the flag; the defaults spelled out train as before (run further below).
expect_exit(2 "--arch" --arch gpt9 --steps 1)
expect_exit(2 "--optimizer" --optimizer sgd9 --steps 1)
expect_exit(2 "--attention" --attention fast --steps 1)
expect_exit(2 "--attention flash needs --device cuda" --attention flash --steps 1)
expect_exit(2 "--attention naive needs --device cuda" --attention naive --steps 1)
# ZeRO-1's sharded checkpoints are synchronous (checked before MPI starts).
expect_flag_error("--ckpt-mode async: ZeRO-1's sharded checkpoints .*use --ckpt-mode sync or none"
                  --reducer mpi-zero1 --ckpt-mode async --ckpt-dir ${WORK}/zckpt --steps 1)
# The GPU twin: the same refusal, checked before CUDA, MPI or NCCL are looked at (so in any build),
# and its device named. Nothing may be written before the refusal.
expect_flag_error("--ckpt-mode async: ZeRO-1's sharded checkpoints \\(--reducer nccl-zero1\\) .*use --ckpt-mode sync or none"
                  --device cuda --reducer nccl-zero1 --ckpt-mode async --ckpt-dir ${WORK}/nzckpt
                  --steps 1)
if(EXISTS ${WORK}/nzckpt)
  string(APPEND failures "--reducer nccl-zero1 --ckpt-mode async created its --ckpt-dir\n")
endif()
expect_flag_error("--reducer nccl-zero1 shards GPU optimizer state: it needs --device cuda \\(on the CPU: --reducer mpi-zero1\\)"
                  --reducer nccl-zero1 --steps 1)
expect_exit(2 "--sample needs a trained model" --sample 3)
expect_exit(2 "missing-model\\.bin" --init-from ${WORK}/missing-model.bin --steps 1)

# An unwritable --ckpt-dir fails before step 1 (no metrics line), not at the first save.
file(WRITE ${WORK}/plain_file "x")
expect_exit(2 "plain_file/sub" --steps 2 --ckpt-mode sync --ckpt-dir ${WORK}/plain_file/sub
            --metrics ${WORK}/unwritable.jsonl --eval-every 0 --no-progress)
if(EXISTS ${WORK}/unwritable.jsonl)
  string(APPEND failures "an unwritable --ckpt-dir was found only after training started\n")
endif()

# verify: every checkpoint checked; one corrupt of two still exits 0, none valid exits 2.
expect_exit(0 "" --steps 2 --ckpt-every 1 --ckpt-mode sync --ckpt-dir ${WORK}/ck --eval-every 0
            --no-progress)
expect_exit(0 "" verify ${WORK}/ck)
if(NOT last_output MATCHES "step_00000001  valid.*step_00000002  valid.*2 of 2 checkpoints valid")
  string(APPEND failures "verify of a good directory printed:\n${last_output}\n")
endif()
file(READ ${WORK}/ck/step_00000002/manifest.json manifest)
string(REPLACE "\"step\": 2" "\"step\": 3" manifest "${manifest}")
file(WRITE ${WORK}/ck/step_00000002/manifest.json "${manifest}")
expect_exit(0 "" verify ${WORK}/ck)
if(NOT last_output MATCHES "step_00000002  INVALID.*checksum mismatch.*1 of 2 checkpoints valid; resume would use step_00000001")
  string(APPEND failures "verify with a damaged manifest printed:\n${last_output}\n")
endif()
file(WRITE ${WORK}/ck/step_00000001/tensors.bin "short")
expect_exit(2 "ck holds no valid checkpoint" verify ${WORK}/ck)
expect_exit(2 "not a checkpoint directory" verify ${WORK}/no-such-ckpt)

# Train briefly on the embedded corpus, export, then sample from the exported file.
expect_exit(0 "" --steps 2 --eval-every 0 --no-progress --export ${WORK}/model.bin)
# The same run with the default families named: the same model file, byte for byte.
expect_exit(0 "" --steps 2 --eval-every 0 --no-progress --arch gpt2 --optimizer adamw
            --export ${WORK}/model_named.bin)
file(SHA256 ${WORK}/model.bin sha_default)
file(SHA256 ${WORK}/model_named.bin sha_named)
if(NOT sha_default STREQUAL sha_named)
  string(APPEND failures "--arch gpt2 --optimizer adamw trained a different model than the defaults\n")
endif()
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
