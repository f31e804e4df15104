# tests/examples/custom_policy_test.cmake — runs examples/custom_policy end to end (cmake -P).
#   MODE=loss:   one 60-step run; the last training loss must be below 60% of the first
#                (ln 128 = 4.85 at the start: a model that learns nothing stays there).
#   MODE=resume: the same run interrupted after step 25 (--stop-at, which saves a checkpoint as a
#                signal would) and resumed must end with exactly the uninterrupted run's training
#                and validation losses: model, optimizer moments and data position all restored.
# Inputs: EXE (the custom_policy program), WORK (scratch directory), MODE.
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

# run(<out_var> args...): runs EXE, fails the test on a non-zero exit, returns stdout.
function(run out_var)
  execute_process(COMMAND ${EXE} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "custom_policy ${ARGN} exited with ${rc}:\n${out}\n${err}")
  endif()
  message("custom_policy ${ARGN}\n  ${out}")
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

# parse(<prefix> text): sets <prefix>_range, <prefix>_first, <prefix>_last, <prefix>_val.
function(parse prefix text)
  if(NOT text MATCHES "steps ([0-9]+\\.\\.[0-9]+)[^|]* \\| first loss ([^ ]+) \\| last loss ([^ ]+) \\| val loss ([^ \n]+)")
    message(FATAL_ERROR "no result line in:\n${text}")
  endif()
  set(${prefix}_range "${CMAKE_MATCH_1}" PARENT_SCOPE)
  set(${prefix}_first "${CMAKE_MATCH_2}" PARENT_SCOPE)
  set(${prefix}_last "${CMAKE_MATCH_3}" PARENT_SCOPE)
  set(${prefix}_val "${CMAKE_MATCH_4}" PARENT_SCOPE)
endfunction()

# to_micro(<out_var> number): a decimal like 4.86258888 as an integer count of millionths,
# because CMake's if() and math() know only integers.
function(to_micro out_var number)
  if(NOT number MATCHES "^([0-9]+)\\.?([0-9]*)")
    message(FATAL_ERROR "not a plain decimal: '${number}'")
  endif()
  set(whole "${CMAKE_MATCH_1}")
  string(SUBSTRING "${CMAKE_MATCH_2}000000" 0 6 frac)
  string(REGEX REPLACE "^0+" "" frac "${frac}")  # math() must not see a leading zero
  if(frac STREQUAL "")
    set(frac 0)
  endif()
  math(EXPR micro "${whole} * 1000000 + ${frac}")
  set(${out_var} ${micro} PARENT_SCOPE)
endfunction()

set(common --steps 60 --quiet)
run(out ${common} --ckpt-dir ${WORK}/uninterrupted)
parse(a "${out}")
if(NOT a_range STREQUAL "1..60")
  message(FATAL_ERROR "expected steps 1..60, got ${a_range}")
endif()

if(MODE STREQUAL "loss")
  to_micro(first "${a_first}")
  to_micro(last "${a_last}")
  math(EXPR limit "${first} * 6 / 10")
  if(NOT last LESS limit)
    message(FATAL_ERROR "loss did not fall enough: first ${a_first}, last ${a_last}")
  endif()
  message("custom_policy: loss ${a_first} -> ${a_last} OK")
elseif(MODE STREQUAL "resume")
  run(out ${common} --stop-at 25 --ckpt-dir ${WORK}/interrupted)
  parse(b1 "${out}")
  if(NOT b1_range STREQUAL "1..25")
    message(FATAL_ERROR "the interrupted run should stop after step 25, ran ${b1_range}")
  endif()
  if(NOT EXISTS ${WORK}/interrupted/step_00000025)
    file(GLOB dirs ${WORK}/interrupted/*)
    message(FATAL_ERROR "no checkpoint of step 25 (found: ${dirs})")
  endif()
  run(out ${common} --resume --ckpt-dir ${WORK}/interrupted)
  parse(b2 "${out}")
  if(NOT b2_range STREQUAL "26..60" OR NOT out MATCHES "\\(resumed\\)")
    message(FATAL_ERROR "the resumed run should run steps 26..60, ran ${b2_range}")
  endif()
  if(NOT b2_last STREQUAL a_last OR NOT b2_val STREQUAL a_val)
    message(FATAL_ERROR "resume changed the run: uninterrupted last/val ${a_last}/${a_val}, "
                        "resumed ${b2_last}/${b2_val}")
  endif()
  message("custom_policy: resumed run matches: loss ${b2_last}, val ${b2_val} OK")
else()
  message(FATAL_ERROR "MODE must be loss or resume, not '${MODE}'")
endif()
