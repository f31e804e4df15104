// Must not compile: the sharded Muon under a ZeRO-1 reducer. sharded_muon_cpu shards its state
// (each rank orthogonalises its share of the matrices and gathers the others') but reads every
// gradient, so it needs them summed everywhere: what pairs is the gradient layout
// (comm/gradient_layout.hpp), not "sharded with sharded". With TRAINKIT_MNC_VALID it runs over the
// all-reduce, as tests/optim/test_mpi_muon.cpp trains it, and the composition compiles.
#include <trainkit/optim/sharded_muon_cpu.hpp>
#include <trainkit/reduce/mpi_allreduce.hpp>
#include <trainkit/reduce/mpi_zero1.hpp>
#include <trainkit/trainkit.hpp>

namespace tk = trainkit;

#ifdef TRAINKIT_MNC_VALID
using reducer = tk::reduce::mpi_allreduce;
#else
using reducer = tk::reduce::mpi_zero1;
#endif

using broken =
    tk::trainer<tk::data::mmap_token_source, tk::prefetch::threaded<2>, tk::model::gpt2_cpu,
                tk::optim::sharded_muon_cpu, tk::checkpoint::sync_checkpointer, reducer>;

int main() {
  return sizeof(broken) > 0 ? 0 : 1;
}
