// A consumer of the installed trainkit::cuda component: host code that calls the CUDA runtime
// through trainkit's device utilities, so it compiles, links cudart from the component's
// interface and runs (reporting 0 devices) on a machine without a GPU.
#include <trainkit/core/cuda/device.hpp>

#include <cstdio>

int main() {
  std::printf("cuda consumer: %d CUDA devices\n", trainkit::cuda::device_count());
  return 0;
}
