// Must not compile: the NCCL-sharded Muon under the NCCL ZeRO-1 reducer. sharded_muon_cuda shards
// its state (each GPU orthogonalises its share of the matrices and gathers the others') but reads
// every gradient, so it needs them summed everywhere: its expected_gradients is
// gradient_layout::replicated and nccl_zero1 delivers reduce_scattered ones (comm/
// gradient_layout.hpp), which the trainer's composition check refuses naming both roles. With
// TRAINKIT_MNC_VALID it runs over reduce::nccl_allreduce, as gpt_fineweb --device cuda --reducer
// nccl --optimizer muon composes it, and the composition compiles. An nvcc unit (the optimizer's
// kernels); nothing runs.
#include <trainkit/checkpoint/host_staged_checkpointer.hpp>
#include <trainkit/checkpoint/sync_checkpointer.hpp>
#include <trainkit/data/mmap_token_source.hpp>
#include <trainkit/model/gpt2/cuda.hpp>
#include <trainkit/optim/sharded_muon_cuda.hpp>
#include <trainkit/prefetch/pinned_prefetcher.hpp>
#include <trainkit/reduce/nccl_allreduce.hpp>
#include <trainkit/reduce/nccl_zero1.hpp>
#include <trainkit/trainer/trainer.hpp>

namespace tk = trainkit;

#ifdef TRAINKIT_MNC_VALID
using reducer = tk::reduce::nccl_allreduce;
#else
using reducer = tk::reduce::nccl_zero1;
#endif

using broken =
    tk::trainer<tk::data::mmap_token_source, tk::prefetch::pinned<4>, tk::model::gpt2_cuda,
                tk::optim::sharded_muon_cuda,
                tk::checkpoint::host_staged_checkpointer<tk::checkpoint::sync_checkpointer>,
                reducer>;

int main() {
  return sizeof(broken) > 0 ? 0 : 1;
}
