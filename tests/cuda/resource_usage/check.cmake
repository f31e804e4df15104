# tests/cuda/resource_usage/check.cmake — holds the flash-attention kernels' registers, spills,
# shared memory and blocks per SM to the table in docs/cuda.md (between the markers
# `<!-- flash-resources:begin -->` and `<!-- flash-resources:end -->`), so a change that costs
# occupancy or starts spilling cannot pass unnoticed, and the table cannot go stale.
#
# cmake -DNVCC=<nvcc> -DARCH=sm_90a -DINCLUDE_DIR=<include> -DSOURCE=<flash_kernels.cu>
#       -DDOC=<docs/cuda.md> -DOUT=<object> -P check.cmake
#
# It compiles flash_kernels.cu with `--resource-usage` and the Release flags of the CUDA targets
# (-O3 -DNDEBUG, --expt-relaxed-constexpr --extended-lambda), with the table's shared-memory bytes as
# -D definitions (the source static_asserts the kernels' layouts against them), reads ptxas'
# registers and spill stores per kernel, and computes blocks per SM the way Hopper allocates:
# registers per warp rounded up to 256 of a 65536 file, shared memory plus 1 KiB reserved per
# block of 228 KiB, at most 2048 threads and 32 blocks. With the nvcc release the table names,
# every figure must match exactly; with another release (another register allocation) a kernel
# may not spill more nor run fewer blocks per SM than recorded, and the differences are printed.
# Besides, the hs-128 backward must run at least two blocks per SM (issue 36's goal).
cmake_minimum_required(VERSION 3.25)
foreach(v NVCC ARCH INCLUDE_DIR SOURCE DOC OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check.cmake: -D${v}=... is required")
  endif()
endforeach()

# ---- the table ----
file(READ "${DOC}" doc)
string(FIND "${doc}" "<!-- flash-resources:begin -->" begin)
string(FIND "${doc}" "<!-- flash-resources:end -->" end)
if(begin EQUAL -1 OR end EQUAL -1)
  message(FATAL_ERROR "${DOC}: no <!-- flash-resources:begin/end --> table")
endif()
math(EXPR length "${end} - ${begin}")
string(SUBSTRING "${doc}" ${begin} ${length} table)
string(REGEX MATCH "nvcc release ([0-9]+\\.[0-9]+)" _ "${table}")
set(doc_release "${CMAKE_MATCH_1}")
if(doc_release STREQUAL "")
  message(FATAL_ERROR "${DOC}: the flash-resources table names no `nvcc release X.Y`")
endif()
string(REGEX MATCHALL "\\| `[a-z]+<[a-z0-9]+>` \\|[^\n]*" rows "${table}")
set(kernels "")
foreach(r IN LISTS rows)
  # | `name<arg>` | threads | registers | spill stores | shared bytes | blocks | by regs | by smem |
  set(num " *([0-9]+) *\\|")
  if(NOT r MATCHES "^\\| `([a-z]+<[a-z0-9]+>)` \\|${num}${num}${num}${num}${num}${num}${num}")
    message(FATAL_ERROR "${DOC}: cannot read the flash-resources row: ${r}")
  endif()
  set(name "${CMAKE_MATCH_1}")
  string(MAKE_C_IDENTIFIER "${name}" id)
  list(APPEND kernels ${id})
  set(label_${id} "${name}")
  set(threads_${id} ${CMAKE_MATCH_2})
  set(doc_regs_${id} ${CMAKE_MATCH_3})
  set(doc_spill_${id} ${CMAKE_MATCH_4})
  set(smem_${id} ${CMAKE_MATCH_5})
  set(doc_blocks_${id} ${CMAKE_MATCH_6})
  set(doc_by_regs_${id} ${CMAKE_MATCH_7})
  set(doc_by_smem_${id} ${CMAKE_MATCH_8})
endforeach()
foreach(id forward_64_ forward_128_ backward_64_ backward_128_ windowforward_64_
           windowforward_128_ windowbackward_64_ windowbackward_128_ delta_64_ delta_128_ dq_float_)
  if(NOT id IN_LIST kernels)
    message(FATAL_ERROR "${DOC}: the flash-resources table has no row for ${id}")
  endif()
endforeach()

# ---- the compile ----
execute_process(COMMAND "${NVCC}" --version OUTPUT_VARIABLE version)
string(REGEX MATCH "release ([0-9]+\\.[0-9]+)" _ "${version}")
set(release "${CMAKE_MATCH_1}")
execute_process(
  COMMAND "${NVCC}" -O3 -DNDEBUG -std=c++20 -arch=${ARCH} --expt-relaxed-constexpr --extended-lambda
          -I "${INCLUDE_DIR}"
          --resource-usage -DTRAINKIT_SMEM_FORWARD_64=${smem_forward_64_}
          -DTRAINKIT_SMEM_FORWARD_128=${smem_forward_128_}
          -DTRAINKIT_SMEM_BACKWARD_64=${smem_backward_64_}
          -DTRAINKIT_SMEM_BACKWARD_128=${smem_backward_128_} -c "${SOURCE}" -o "${OUT}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nvcc failed (${rc}):\n${out}\n${err}")
endif()
string(REPLACE "\n" ";" lines "${out}\n${err}")
set(current "")
foreach(line IN LISTS lines)
  if(line MATCHES "Compiling entry function '([^']+)'")
    set(mangled "${CMAKE_MATCH_1}")
    if(mangled MATCHES "flash_attention_(forward|backward)_kernelILi([0-9]+)ELb1E")
      set(current "window${CMAKE_MATCH_1}_${CMAKE_MATCH_2}_")  # the sliding-window instantiation
    elseif(mangled MATCHES "flash_attention_(forward|backward|delta)_kernelILi([0-9]+)E")
      set(current "${CMAKE_MATCH_1}_${CMAKE_MATCH_2}_")
    elseif(mangled MATCHES "flash_attention_dq_kernelIfE")
      set(current "dq_float_")
    else()
      message(FATAL_ERROR "an entry function the table does not know: ${mangled}")
    endif()
  elseif(line MATCHES "([0-9]+) bytes spill stores" AND NOT current STREQUAL "")
    set(spill_${current} ${CMAKE_MATCH_1})
  elseif(line MATCHES "Used ([0-9]+) registers" AND NOT current STREQUAL "")
    set(regs_${current} ${CMAKE_MATCH_1})
  endif()
endforeach()

# ---- the comparison ----
set(failures "")
set(report "")
foreach(id IN LISTS kernels)
  if(NOT DEFINED regs_${id} OR NOT DEFINED spill_${id})
    message(FATAL_ERROR "ptxas reported nothing for ${label_${id}}:\n${out}\n${err}")
  endif()
  math(EXPR warps "${threads_${id}} / 32")
  math(EXPR per_warp "(${regs_${id}} * 32 + 255) / 256 * 256")
  math(EXPR by_regs "65536 / (${per_warp} * ${warps})")
  if(smem_${id} EQUAL 0)
    set(by_smem 32)
  else()
    math(EXPR by_smem "233472 / (${smem_${id}} + 1024)")
  endif()
  math(EXPR by_threads "2048 / ${threads_${id}}")
  set(blocks 32)
  foreach(limit ${by_regs} ${by_smem} ${by_threads})
    if(limit LESS blocks)
      set(blocks ${limit})
    endif()
  endforeach()
  string(APPEND report
         "| `${label_${id}}` | ${threads_${id}} | ${regs_${id}} | ${spill_${id}} | ${smem_${id}} | "
         "${blocks} | ${by_regs} | ${by_smem} |\n")
  if(release STREQUAL doc_release)
    foreach(f regs spill blocks)
      if(f STREQUAL "regs")
        set(got ${regs_${id}})
      elseif(f STREQUAL "spill")
        set(got ${spill_${id}})
      else()
        set(got ${blocks})
      endif()
      if(NOT got EQUAL doc_${f}_${id})
        string(APPEND failures "${label_${id}}: ${f} ${got}, the table says ${doc_${f}_${id}}\n")
      endif()
    endforeach()
    if(NOT by_regs EQUAL doc_by_regs_${id} OR NOT by_smem EQUAL doc_by_smem_${id})
      string(APPEND failures "${label_${id}}: blocks per SM by registers ${by_regs}, by shared "
             "memory ${by_smem}; the table says ${doc_by_regs_${id}}, ${doc_by_smem_${id}}\n")
    endif()
  else()
    if(spill_${id} GREATER doc_spill_${id})
      string(APPEND failures "${label_${id}}: ${spill_${id}} bytes spilled, the table says "
             "${doc_spill_${id}} (nvcc ${release}, the table's ${doc_release})\n")
    endif()
    if(blocks LESS doc_blocks_${id})
      string(APPEND failures "${label_${id}}: ${blocks} blocks per SM, the table says "
             "${doc_blocks_${id}} (nvcc ${release}, the table's ${doc_release})\n")
    endif()
  endif()
  if((id STREQUAL "backward_128_" OR id STREQUAL "windowbackward_128_") AND blocks LESS 2)
    string(APPEND failures "backward<128>: ${blocks} block(s) per SM; the goal is at least 2\n")
  endif()
endforeach()
message("flash kernels, nvcc ${release} ${ARCH} (the table: nvcc ${doc_release}):\n${report}")
if(NOT failures STREQUAL "")
  message(FATAL_ERROR "flash kernels drifted from ${DOC}:\n${failures}"
          "Update the table (the rows above are ready to paste) or undo the change.")
endif()
message("flash kernels: as recorded in ${DOC}")
