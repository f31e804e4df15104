# cmake/trainkit-find-cudnn.cmake — finds what trainkit::cudnn needs, in trainkit's own build
# (CMakeLists.txt) and in an installed trainkit's package config, which ships this file.
#
# The cudnn-frontend headers come from PyPI's nvidia-cudnn-frontend wheel (its include/ beside
# the Python packages of the python3 on PATH) or TRAINKIT_CUDNN_FRONTEND_ROOT; cudnn.h and libcudnn
# from the CUDA toolkit (cuDNN 9) or TRAINKIT_CUDNN_ROOT (e.g. a PyTorch environment's
# nvidia/cudnn). Needs CUDAToolkit found first. Sets TRAINKIT_CUDNN_FRONTEND_INCLUDE_DIR,
# TRAINKIT_CUDNN_INCLUDE_DIR and TRAINKIT_CUDNN_LIBRARY (cache variables, *-NOTFOUND when absent).
set(TRAINKIT_CUDNN_FRONTEND_ROOT "" CACHE PATH "Where cudnn-frontend's include/ is, if not PyPI's")
set(TRAINKIT_CUDNN_ROOT "" CACHE PATH "Where cuDNN is installed (include/, lib/), if not the toolkit")
set(_trainkit_frontend_hints ${TRAINKIT_CUDNN_FRONTEND_ROOT}/include)
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    OUTPUT_VARIABLE _trainkit_purelib OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  list(APPEND _trainkit_frontend_hints "${_trainkit_purelib}/include")
endif()
find_path(TRAINKIT_CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h HINTS ${_trainkit_frontend_hints})
find_path(TRAINKIT_CUDNN_INCLUDE_DIR cudnn.h
          HINTS ${TRAINKIT_CUDNN_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS})
find_library(TRAINKIT_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
             HINTS ${TRAINKIT_CUDNN_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR}
                   ${CUDAToolkit_LIBRARY_ROOT}/lib)
unset(_trainkit_frontend_hints)
unset(_trainkit_purelib)
