// trainkit/core/cuda/check.hpp — CUDA and cuBLASLt failures as trainkit exceptions.
//
// Library code never exits (core/error.hpp): a failed CUDA runtime call, kernel launch or cuBLASLt
// call throws `cuda_error`, whose message names the source position, the call that failed and the
// library's own error name and text, e.g.
//   "gpt2_cuda.hpp:212: cudaMalloc(&p, bytes) failed: cudaErrorMemoryAllocation (out of memory)".
// Host-compilable: it needs only the CUDA headers, so .cpp files built by g++ with the CUDA include
// directory (trainkit::cuda) can use it as well as .cu files.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>
#include <string_view>

#include "trainkit/core/error.hpp"

namespace trainkit {

/// A CUDA runtime, kernel launch or cuBLAS(Lt) call failed.
class cuda_error : public error {
 public:
  cuda_error(const std::string& message, int code) : error(message), code_(code) {}

  /// The cudaError_t or cublasStatus_t value, as an int.
  int code() const noexcept { return code_; }

 private:
  int code_;
};

namespace cuda::detail {

// The file name without its directories: messages stay one short line.
constexpr std::string_view base_name(std::string_view path) noexcept {
  const std::size_t slash = path.find_last_of("/\\");
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

/// "<file>:<line>: <call> failed: <error name> (<error text>)" — one place decides the format so
/// that tests can check it without a device.
inline std::string format_failure(std::string_view file, int line, std::string_view call,
                                  std::string_view error_name, std::string_view error_text) {
  std::string m;
  m += base_name(file);
  m += ':';
  m += std::to_string(line);
  m += ": ";
  m += call;
  m += " failed: ";
  m += error_name;
  m += " (";
  m += error_text;
  m += ')';
  return m;
}

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* call, const char* file, int line) {
  throw cuda_error(format_failure(file, line, call, cudaGetErrorName(e), cudaGetErrorString(e)),
                   int(e));
}

[[noreturn]] inline void throw_cublas(cublasStatus_t s, const char* call, const char* file,
                                      int line) {
  throw cuda_error(
      format_failure(file, line, call, cublasLtGetStatusName(s), cublasLtGetStatusString(s)),
      int(s));
}

inline void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) throw_cuda(e, call, file, line);
}

inline void check_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) throw_cublas(s, call, file, line);
}

}  // namespace cuda::detail
}  // namespace trainkit

/// Throws trainkit::cuda_error when a CUDA runtime call does not return cudaSuccess.
#define TRAINKIT_CUDA_CHECK(call) \
  ::trainkit::cuda::detail::check_cuda((call), #call, __FILE__, __LINE__)

/// Throws trainkit::cuda_error when a cuBLAS(Lt) call does not return CUBLAS_STATUS_SUCCESS.
#define TRAINKIT_CUBLAS_CHECK(call) \
  ::trainkit::cuda::detail::check_cublas((call), #call, __FILE__, __LINE__)

/// Right after a kernel launch: throws when the launch itself failed (bad configuration, too much
/// shared memory, no kernel image for the device). Errors inside the kernel surface later, at the
/// next synchronising call, which is checked too.
#define TRAINKIT_CUDA_CHECK_LAUNCH(kernel_name)                                                \
  ::trainkit::cuda::detail::check_cuda(cudaGetLastError(), "launch of " kernel_name, __FILE__, \
                                       __LINE__)
