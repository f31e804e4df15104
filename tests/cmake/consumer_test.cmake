# Runs one consumer route end to end (cmake -P): install trainkit to a prefix (find_package mode)
# or point the consumer at the source tree (add_subdirectory) or the git repository
# (fetchcontent), then configure the consumer, build it and run it. Any failing step stops with FATAL_ERROR.
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

foreach(part NCCL CUDNN)  # the cuda consumer's optional components
  if(NOT DEFINED ${part})
    set(${part} OFF)
  endif()
endforeach()
set(consumer_args -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release
    -DCONSUMER_TOKENIZER=${TOKENIZER} -DCONSUMER_HF=${HF} -DCONSUMER_MPI=${MPI}
    -DCONSUMER_NCCL=${NCCL} -DCONSUMER_CUDNN=${CUDNN})
if(DEFINED CUDNN_FRONTEND_ROOT)  # where the build found cudnn-frontend (the repository's .venv):
  # the consumer's python3 on PATH may be a bare one, so say where, as a user would
  list(APPEND consumer_args -DTRAINKIT_CUDNN_FRONTEND_ROOT=${CUDNN_FRONTEND_ROOT})
endif()
if(NOT DEFINED CUDA)
  set(CUDA OFF)  # ON: install trainkit with its CUDA component (the cuda consumer needs it)
endif()
if(MODE STREQUAL "find_package")
  run_step("configure trainkit" ${CMAKE_COMMAND} -S ${TRAINKIT_SOURCE} -B ${WORK}/trainkit-build
           -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX} -DTRAINKIT_BUILD_TESTS=OFF
           -DTRAINKIT_BUILD_BENCH=OFF -DTRAINKIT_BUILD_EXAMPLES=OFF -DTRAINKIT_CUDA=${CUDA}
           -DCMAKE_INSTALL_PREFIX=${WORK}/prefix)
  run_step("install trainkit" ${CMAKE_COMMAND} --install ${WORK}/trainkit-build)
  list(APPEND consumer_args -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCONSUMER_MODE=find_package)
elseif(MODE STREQUAL "fetchcontent")
  # The committed HEAD: FetchContent clones, so uncommitted edits are not part of this route.
  run_step("git rev-parse" git -C ${TRAINKIT_SOURCE} rev-parse HEAD)
  string(STRIP "${step_output}" head)
  list(APPEND consumer_args -DCONSUMER_MODE=fetchcontent -DTRAINKIT_DIR=${TRAINKIT_SOURCE}
       -DTRAINKIT_GIT_TAG=${head})
else()
  list(APPEND consumer_args -DCONSUMER_MODE=add_subdirectory -DTRAINKIT_DIR=${TRAINKIT_SOURCE})
endif()
run_step("configure consumer" ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE} -B ${WORK}/consumer-build
         -G ${GENERATOR} ${consumer_args})
run_step("build consumer" ${CMAKE_COMMAND} --build ${WORK}/consumer-build)
run_step("run consumer" ${WORK}/consumer-build/consumer)
message("${step_output}")
# An installed trainkit must find the vocabulary it installed, not the source tree's copy.
if(MODE STREQUAL "find_package" AND TOKENIZER AND
   NOT step_output MATCHES "vocabulary ${WORK}/prefix/share/trainkit/gpt2")
  message(FATAL_ERROR "the installed consumer did not use ${WORK}/prefix/share/trainkit/gpt2")
endif()
