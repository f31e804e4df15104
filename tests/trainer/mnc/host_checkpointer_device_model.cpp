// Must not compile: a checkpointer that reads host memory only, composed with a model whose
// state is in device memory (it would throw at the first save, possibly hours into the run).
// With TRAINKIT_MNC_VALID the same model declares host memory and the composition compiles.
#include <trainkit/trainkit.hpp>

#include "mock_policies.hpp"

namespace tk = trainkit;

#ifdef TRAINKIT_MNC_VALID
using space = tk::host_memory;
#else
using space = tk::device_memory;
#endif

static_assert(
    !tk::checkpoint::checkpointer_for<tk::checkpoint::sync_checkpointer, tk::device_memory>);
static_assert(tk::checkpoint::checkpointer_for<tk::checkpoint::no_checkpoint, tk::device_memory>);

using broken =
    tk::trainer<tk::data::synthetic_source, tk::prefetch::threaded<2>, mnc::mock_model<space>,
                mnc::mock_optimizer<space>, tk::checkpoint::sync_checkpointer>;

int main() {
  return sizeof(broken) > 0 ? 0 : 1;
}
