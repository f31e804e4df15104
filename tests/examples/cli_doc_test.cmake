# tests/examples/cli_doc_test.cmake — docs/cli.md documents every gpt_fineweb flag (cmake -P).
# Runs `gpt_fineweb --help` and `gpt_fineweb <sub> --help` for each subcommand, collects every long
# flag they print, and fails when docs/cli.md does not mention one as `--flag`; and the reverse:
# every flag in the first column of a table in docs/cli.md must still exist. So a flag added to
# the program without documentation, or removed from it but not from the docs, breaks the build.
# Inputs: EXE (gpt_fineweb), DOC (docs/cli.md).
cmake_minimum_required(VERSION 3.25)

function(help out_var)
  execute_process(COMMAND ${EXE} ${ARGN} --help RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${EXE} ${ARGN} --help exited with ${rc}:\n${out}\n${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

# long_flags(<out_var> text): the distinct --flags in text.
function(long_flags out_var text)
  string(REGEX MATCHALL "--[a-z][a-z0-9-]*[a-z0-9]" flags "${text}")
  list(REMOVE_DUPLICATES flags)
  set(${out_var} ${flags} PARENT_SCOPE)
endfunction()

help(top)
# CLI11 lists subcommands under "SUBCOMMANDS:" (or "Subcommands:"), one name per line.
string(REGEX MATCH "[Ss][Uu][Bb][Cc][Oo][Mm][Mm][Aa][Nn][Dd][Ss]:\n(.*)" sub_block "${top}")
string(REGEX MATCHALL "\n  [a-z][a-z0-9_-]*" subs "\n${CMAKE_MATCH_1}")
string(REGEX REPLACE "\n  " "" subs "${subs}")
if(NOT subs)
  message(FATAL_ERROR "no subcommands found in gpt_fineweb --help:\n${top}")
endif()

file(READ ${DOC} doc)
set(missing "")
long_flags(all_flags "${top}")
foreach(flag ${all_flags})
  if(NOT doc MATCHES "`${flag}[` ]")
    string(APPEND missing "  gpt_fineweb ${flag}\n")
  endif()
endforeach()
foreach(sub ${subs})
  if(NOT doc MATCHES "`${sub}`" AND NOT doc MATCHES "gpt_fineweb ${sub}")
    string(APPEND missing "  subcommand ${sub}\n")
  endif()
  help(sub_text ${sub})
  long_flags(sub_flags "${sub_text}")
  foreach(flag ${sub_flags})
    if(NOT doc MATCHES "`${flag}[` ]")
      string(APPEND missing "  gpt_fineweb ${sub} ${flag}\n")
    endif()
  endforeach()
  list(APPEND all_flags ${sub_flags})
endforeach()

# Reverse: table rows "| `--flag ...` |" name flags that must exist.
string(REGEX MATCHALL "\n\\| `--[a-z][a-z0-9-]*" rows "${doc}")
set(stale "")
foreach(row ${rows})
  string(REGEX REPLACE "^\n\\| `" "" flag "${row}")
  list(FIND all_flags ${flag} at)
  if(at EQUAL -1)
    string(APPEND stale "  ${flag}\n")
  endif()
endforeach()

if(missing OR stale)
  message(FATAL_ERROR "docs/cli.md is out of date.\nNot documented:\n${missing}"
                      "Documented but not in --help:\n${stale}")
endif()
list(LENGTH all_flags n)
list(LENGTH subs n_subs)
message("docs/cli.md documents all ${n} flags of gpt_fineweb and its ${n_subs} subcommands")
