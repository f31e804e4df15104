// Must not compile: an optimizer whose parameter type (float) differs from the model's (double).
// With TRAINKIT_MNC_VALID both use float and the composition compiles.
#include <trainkit/trainkit.hpp>

namespace tk = trainkit;

#ifdef TRAINKIT_MNC_VALID
using model_scalar = float;
#else
using model_scalar = double;
#endif

using broken = tk::trainer<tk::data::synthetic_source, tk::prefetch::threaded<2>,
                           tk::model::basic_gpt2_cpu<model_scalar>, tk::optim::adamw_cpu,
                           tk::checkpoint::no_checkpoint>;

int main() { return sizeof(broken) > 0 ? 0 : 1; }
