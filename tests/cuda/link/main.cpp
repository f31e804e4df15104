// tests/cuda/link/main.cpp — test_cuda_link's host unit: g++ compiles it with the umbrella header
// (Eigen, the CPU trainer) beside two nvcc units that include the CUDA headers. Linking is the
// test; run, it reports the two units' losses (equal on a device: the same step from the same
// seed) or that no device is present.
#include <trainkit/trainkit.hpp>

#include <cstdio>

#include "link_unit.hpp"

int main() {
  const float a = link_test::train_step_a();
  const float b = link_test::train_step_b();
  if (a < 0 && b < 0) {
    std::printf("cuda link: two CUDA units and the umbrella linked (no device: not run)\n");
    return 0;
  }
  const float la = link_test::llama_step_a();
  const float lb = link_test::llama_step_b();
  if (a != b || la != lb) {
    std::printf("cuda link: units disagree: loss %.6f vs %.6f, llama %.6f vs %.6f\n", double(a),
                double(b), double(la), double(lb));
    return 1;
  }
  std::printf("cuda link: two CUDA units and the umbrella linked (loss %.6f in both, llama %.6f)\n",
              double(a), double(la));
  return 0;
}
