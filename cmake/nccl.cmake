# cmake/nccl.cmake — the trainkit::nccl target: trainkit::cuda plus NCCL.
#
# Data-parallel training on GPUs (include/trainkit/reduce/nccl_*.hpp) averages gradient buckets
# with NCCL all-reduces. NCCL ships with the CUDA toolkit here (include/nccl.h, lib64/libnccl.so)
# and in PyTorch environments as the nvidia-nccl-cu13 wheel (nvidia/nccl/{include,lib}); pass
# -DTRAINKIT_NCCL_ROOT=<dir> for another location. A component of its own, so binaries that do
# not reduce across GPUs never load libnccl. Included from the CUDA section of CMakeLists.txt.
set(TRAINKIT_NCCL "AUTO" CACHE STRING "NCCL gradient reducer: AUTO (when found) or OFF")
set(TRAINKIT_NCCL_ROOT "" CACHE PATH "Where NCCL is installed (include/, lib/), if not the toolkit")
if(TRAINKIT_NCCL STREQUAL "OFF")
  message(STATUS "trainkit nccl: OFF (TRAINKIT_NCCL=OFF)")
  return()
endif()
find_path(TRAINKIT_NCCL_INCLUDE_DIR nccl.h
          HINTS ${TRAINKIT_NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS})
find_library(TRAINKIT_NCCL_LIBRARY NAMES nccl libnccl.so.2
             HINTS ${TRAINKIT_NCCL_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR})
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
