# cmake/trainkit-find-nccl.cmake — finds NCCL for trainkit::nccl, in trainkit's own build
# (cmake/nccl.cmake) and in an installed trainkit's package config, which ships this file.
#
# NCCL ships with the CUDA toolkit here (include/nccl.h, lib64/libnccl.so) and in PyTorch
# environments as the nvidia-nccl-cu13 wheel (nvidia/nccl/{include,lib}); TRAINKIT_NCCL_ROOT names
# another location. Needs CUDAToolkit found first. Sets TRAINKIT_NCCL_INCLUDE_DIR and
# TRAINKIT_NCCL_LIBRARY (cache variables, *-NOTFOUND when absent).
set(TRAINKIT_NCCL_ROOT "" CACHE PATH "Where NCCL is installed (include/, lib/), if not the toolkit")
find_path(TRAINKIT_NCCL_INCLUDE_DIR nccl.h
          HINTS ${TRAINKIT_NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS})
find_library(TRAINKIT_NCCL_LIBRARY NAMES nccl libnccl.so.2
             HINTS ${TRAINKIT_NCCL_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR})
