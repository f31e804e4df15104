// Must not compile: the ZeRO-1 optimizer (zero1_adamw_cpu updates its shard from the sums a ZeRO-1
// reducer leaves there) under reducers that deliver whole summed gradients: the all-reduce (twice
// the traffic for half the use) and reduce::single (in a job of several ranks, each would update
// its shard from its own unreduced gradients). With TRAINKIT_MNC_VALID both compositions use
// reduce::mpi_zero1 and compile.
#include <trainkit/optim/zero1_adamw_cpu.hpp>
#include <trainkit/reduce/mpi_allreduce.hpp>
#include <trainkit/reduce/mpi_zero1.hpp>
#include <trainkit/trainkit.hpp>

namespace tk = trainkit;

#ifdef TRAINKIT_MNC_VALID
using all_reduce = tk::reduce::mpi_zero1;
using one_process = tk::reduce::mpi_zero1;
#else
using all_reduce = tk::reduce::mpi_allreduce;
using one_process = tk::reduce::single;
#endif

template <class Reducer>
using zero1_trainer =
    tk::trainer<tk::data::mmap_token_source, tk::prefetch::threaded<2>, tk::model::gpt2_cpu,
                tk::optim::zero1_adamw_cpu, tk::checkpoint::no_checkpoint, Reducer>;

int main() {
  return sizeof(zero1_trainer<all_reduce>) + sizeof(zero1_trainer<one_process>) > 0 ? 0 : 1;
}
