# cmake/trainkit-find-dnnl.cmake — finds oneDNN (Debian: libdnnl-dev) for trainkit's CPU GEMMs, in
# trainkit's own build and in an installed trainkit's package config, which ships this file.
#
# Not find_package(dnnl): Debian's oneDNN is built with an OpenCL GPU runtime, and its package
# config then insists on the OpenCL development files, which a CPU build has no use for. The header
# and the library are all trainkit needs. TRAINKIT_DNNL_ROOT names another installation. Defines
# the imported target trainkit::dnnl when both are found and the library links the two GEMMs
# core/linalg/detail/onednn_gemm.hpp calls (dnnl_gemm_bf16bf16f32 is exported but not declared
# by dnnl.h).
set(TRAINKIT_DNNL_ROOT "" CACHE PATH "Where oneDNN is installed (include/, lib/), if not the system")
find_path(TRAINKIT_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.h HINTS ${TRAINKIT_DNNL_ROOT}/include)
find_library(TRAINKIT_DNNL_LIBRARY NAMES dnnl libdnnl.so.2 libdnnl.so.3
             HINTS ${TRAINKIT_DNNL_ROOT}/lib ${TRAINKIT_DNNL_ROOT}/lib64)
if(TRAINKIT_DNNL_INCLUDE_DIR AND TRAINKIT_DNNL_LIBRARY AND NOT TARGET trainkit::dnnl)
  include(CheckCXXSourceCompiles)
  set(CMAKE_REQUIRED_INCLUDES ${TRAINKIT_DNNL_INCLUDE_DIR})
  set(CMAKE_REQUIRED_LIBRARIES ${TRAINKIT_DNNL_LIBRARY})
  set(CMAKE_REQUIRED_QUIET ON)
  check_cxx_source_compiles([[
#include <oneapi/dnnl/dnnl.h>
#include <cstdint>
extern "C" dnnl_status_t dnnl_gemm_bf16bf16f32(char, char, dnnl_dim_t, dnnl_dim_t, dnnl_dim_t,
    float, const std::uint16_t*, dnnl_dim_t, const std::uint16_t*, dnnl_dim_t, float, float*,
    dnnl_dim_t);
int main() { float c = 0; return int(dnnl_sgemm('N', 'N', 1, 1, 1, 1.f, &c, 1, &c, 1, 0.f, &c, 1)) +
    (dnnl_gemm_bf16bf16f32 == nullptr); }
]] TRAINKIT_DNNL_LINKS)
  unset(CMAKE_REQUIRED_INCLUDES)
  unset(CMAKE_REQUIRED_LIBRARIES)
  unset(CMAKE_REQUIRED_QUIET)
  if(TRAINKIT_DNNL_LINKS)
    add_library(trainkit::dnnl INTERFACE IMPORTED)
    set_target_properties(trainkit::dnnl PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${TRAINKIT_DNNL_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES "${TRAINKIT_DNNL_LIBRARY}"
      INTERFACE_COMPILE_DEFINITIONS "TRAINKIT_HAS_ONEDNN=1")
  endif()
endif()
