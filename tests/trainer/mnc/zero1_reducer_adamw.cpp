// Must not compile: a ZeRO-1 reducer (reduce::mpi_zero1 leaves each rank the sum of its own shard
// only) under AdamW, which reads the whole buffer and updates every parameter: with two ranks each
// would update everything from gradients summed only in its shard, and the ranks would silently
// diverge. The trainer compares Reducer::delivered_gradients with Optimizer::expected_gradients
// (comm/gradient_layout.hpp). With TRAINKIT_MNC_VALID the optimizer is ZeRO-1's own,
// zero1_adamw_cpu, and the composition compiles.
#include <trainkit/optim/zero1_adamw_cpu.hpp>
#include <trainkit/reduce/mpi_zero1.hpp>
#include <trainkit/trainkit.hpp>

namespace tk = trainkit;

#ifdef TRAINKIT_MNC_VALID
using optimizer = tk::optim::zero1_adamw_cpu;
#else
using optimizer = tk::optim::adamw_cpu;
#endif

using broken =
    tk::trainer<tk::data::mmap_token_source, tk::prefetch::threaded<2>, tk::model::gpt2_cpu,
                optimizer, tk::checkpoint::sync_checkpointer, tk::reduce::mpi_zero1>;

int main() {
  return sizeof(broken) > 0 ? 0 : 1;
}
