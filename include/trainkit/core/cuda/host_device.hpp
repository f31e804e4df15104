// trainkit/core/cuda/host_device.hpp — TRAINKIT_HOST_DEVICE: marks a small function both host
// and device code call (tile arithmetic shared by a kernel and its CPU twin).
//
// Under nvcc it expands to `__host__ __device__`, so a kernel may call the function without
// nvcc's --expt-relaxed-constexpr (which the trainkit::cuda CMake target passes but a user
// compiling by hand does not); under any other compiler it expands to nothing, so headers that
// use it stay plain C++ for g++ and clang. tests/cuda/plain_nvcc checks the headers compile with
// nothing but `nvcc -std=c++20 -arch=sm_90a -I include`.
#pragma once

#if defined(__CUDACC__)
#define TRAINKIT_HOST_DEVICE __host__ __device__
#else
#define TRAINKIT_HOST_DEVICE
#endif
