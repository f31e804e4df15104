// Must not compile: a host-only prefetcher feeding a model that reads device memory.
// With TRAINKIT_MNC_VALID the same model declares host memory and the composition compiles.
#include <trainkit/trainkit.hpp>

#include "mock_policies.hpp"

namespace tk = trainkit;

#ifdef TRAINKIT_MNC_VALID
using space = tk::host_memory;
#else
using space = tk::device_memory;
#endif

using broken = tk::trainer<tk::data::synthetic_source, tk::prefetch::threaded<2>,
                           mnc::mock_model<space>, mnc::mock_optimizer<space>,
                           tk::checkpoint::no_checkpoint>;

int main() { return sizeof(broken) > 0 ? 0 : 1; }
