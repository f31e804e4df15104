# cmake/nccl.cmake — the trainkit::nccl target: trainkit::cuda plus NCCL.
#
# Data-parallel training on GPUs (include/trainkit/reduce/nccl_*.hpp) averages gradient buckets
# with NCCL all-reduces. cmake/trainkit-find-nccl.cmake finds NCCL (the toolkit's, or
# -DTRAINKIT_NCCL_ROOT=<dir>, e.g. a PyTorch environment's nvidia/nccl); the installed package
# config finds it again with the same file. A component of its own, so binaries that do not
# reduce across GPUs never load libnccl. Included from the CUDA section of CMakeLists.txt.
set(TRAINKIT_NCCL "AUTO" CACHE STRING "NCCL gradient reducer: AUTO (when found) or OFF")
if(TRAINKIT_NCCL STREQUAL "OFF")
  message(STATUS "trainkit nccl: OFF (TRAINKIT_NCCL=OFF)")
  return()
endif()
include(${CMAKE_CURRENT_LIST_DIR}/trainkit-find-nccl.cmake)
if(TRAINKIT_NCCL_INCLUDE_DIR AND TRAINKIT_NCCL_LIBRARY)
  add_library(trainkit_nccl INTERFACE)
  add_library(trainkit::nccl ALIAS trainkit_nccl)
  set_target_properties(trainkit_nccl PROPERTIES EXPORT_NAME nccl)
  target_include_directories(trainkit_nccl SYSTEM INTERFACE ${TRAINKIT_NCCL_INCLUDE_DIR})
  target_link_libraries(trainkit_nccl INTERFACE trainkit_cuda ${TRAINKIT_NCCL_LIBRARY})
  message(STATUS "trainkit nccl: ${TRAINKIT_NCCL_LIBRARY}")
else()
  message(STATUS "trainkit nccl: NCCL not found (set TRAINKIT_NCCL_ROOT); NCCL reducer skipped")
endif()
