// A consumer of the installed trainkit::cuda component: host code that calls the CUDA runtime
// through trainkit's device utilities, so it compiles, links cudart from the component's
// interface and runs (reporting 0 devices) on a machine without a GPU. With trainkit::nccl and
// trainkit::cudnn it also calls NCCL and cuDNN (their version queries need no device), so their
// include directories and libraries are the ones the package config found.
#include <trainkit/core/cuda/device.hpp>

#include <cstddef>
#include <cstdio>

#if defined(CONSUMER_NCCL)
#include <nccl.h>
#endif
#if defined(CONSUMER_CUDNN)
#include <cudnn.h>
// The header the engine (trainkit/model/cuda/cudnn_attention.hpp) needs; including it costs a
// CPU-minute, so only its presence on the component's include path is checked.
#if !__has_include(<cudnn_frontend.h>)
#error "trainkit::cudnn lacks cudnn-frontend's headers"
#endif
#endif

int main() {
  std::printf("cuda consumer: %d CUDA devices", trainkit::cuda::device_count());
#if defined(CONSUMER_NCCL)
  int nccl = 0;
  if (ncclGetVersion(&nccl) != ncclSuccess) {
    std::printf("\nncclGetVersion failed\n");
    return 1;
  }
  std::printf(", NCCL %d", nccl);
#endif
#if defined(CONSUMER_CUDNN)
  std::printf(", cuDNN %zu with cudnn-frontend", static_cast<std::size_t>(cudnnGetVersion()));
#endif
  std::printf("\n");
  return 0;
}
