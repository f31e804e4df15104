# Shared by the gpt_fineweb script tests (cmake -P): run ${EXE} in ${WORK} and append to
# `failures` when the exit code, the stderr regex or the one-line rule for exit 2 does not hold;
# the command's stdout is left in `last_output`, its stripped stderr in `last_error`.
# expect_exit(<code> <regex for stderr> args...)
function(expect_exit code regex)
  execute_process(COMMAND ${EXE} ${ARGN} WORKING_DIRECTORY ${WORK}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(STRIP "${err}" err)
  if(NOT rc EQUAL code)
    string(APPEND failures "`${ARGN}`: exit ${rc}, expected ${code}\n${err}\n")
  elseif(NOT err MATCHES "${regex}")
    string(APPEND failures "`${ARGN}`: stderr '${err}' does not match '${regex}'\n")
  elseif(code EQUAL 2 AND err MATCHES "\n")
    string(APPEND failures "`${ARGN}`: more than one line on stderr:\n${err}\n")
  endif()
  set(failures "${failures}" PARENT_SCOPE)
  set(last_output "${out}" PARENT_SCOPE)
  set(last_error "${err}" PARENT_SCOPE)
endfunction()
