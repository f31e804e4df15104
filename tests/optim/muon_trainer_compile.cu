// tests/optim/muon_trainer_compile.cu — a must-compile check (no test runs it): the CUDA trainer
// composes with muon_cuda, i.e. trainer<mmap_token_source, pinned<4>, gpt2_cuda, muon_cuda, C>
// passes the trainer's composition checks and its constructor, step, checkpoint and resume paths
// instantiate (explicit instantiation compiles every member), with
// the host-staged synchronous checkpointer (device state) and without one. Built as an object
// library with the tests.
#include "trainkit/checkpoint/host_staged_checkpointer.hpp"
#include "trainkit/checkpoint/no_checkpoint.hpp"
#include "trainkit/checkpoint/sync_checkpointer.hpp"
#include "trainkit/data/mmap_token_source.hpp"
#include "trainkit/model/gpt2/cuda.hpp"
#include "trainkit/optim/concepts.hpp"
#include "trainkit/optim/muon_cuda.hpp"
#include "trainkit/prefetch/pinned_prefetcher.hpp"
#include "trainkit/trainer/trainer.hpp"

namespace tk = trainkit;

static_assert(tk::optim::optimizer_for<tk::optim::muon_cuda, tk::model::gpt2_cuda>);

template class tk::trainer<tk::data::mmap_token_source, tk::prefetch::pinned<4>,
                           tk::model::gpt2_cuda, tk::optim::muon_cuda,
                           tk::checkpoint::no_checkpoint>;
template class tk::trainer<
    tk::data::mmap_token_source, tk::prefetch::pinned<4>, tk::model::gpt2_cuda,
    tk::optim::muon_cuda,
    tk::checkpoint::host_staged_checkpointer<tk::checkpoint::sync_checkpointer>>;
