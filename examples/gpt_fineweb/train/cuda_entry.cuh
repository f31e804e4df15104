// train/cuda_entry.cuh — gpt_fineweb's `--device cuda`: the training driver (driver.hpp) with the
// CUDA device policy, for one model family and the --optimizer family (families/registry.hpp):
//
//   trainer<mmap_token_source, prefetch::pinned<4>, cuda_policies<M>::model_type,
//           cuda_policies<O>::optimizer_type, Checkpointer[, Reducer]>
//
// with Checkpointer by --ckpt-mode: none (no_checkpoint), sync (sync_checkpointer behind
// host_staged_checkpointer, which copies device tensors to pinned memory before each write and
// back after a resume) or async (basic_asio_checkpointer<cuda_stager>: device→pinned copies on a
// side stream, written on a Boost.Asio thread; the stager orders its copies after the trainer's
// compute stream, and the next update waits for the snapshot on the device, not on the host).
// `--reducer nccl` (built where CMake found NCCL and MPI) runs one rank per GPU under mpirun,
// NCCL's unique id broadcast over MPI (with the optimizer family's all-reduce form where it has
// one: Muon's sharded_muon_cuda, sharded checkpoints with --ckpt-mode sync); `--reducer nccl-zero1`
// the same with ZeRO-1 (reduce::nccl_zero1 + the optimizer family's sharded form, sharded
// checkpoints with --ckpt-mode sync). The CPU twins of all this are in train/cpu.hpp. Compiled by
// nvcc: nothing here may include Eigen (the families' host halves are compiled outside nvcc only).
// Library errors propagate to the program's one error path (command.hpp): one line and exit code 2.
// This header defines train/entry.hpp's train_on_cuda; each family's CUDA file
// (families/<name>_cuda.cu) includes it and expands GPT_FINEWEB_CUDA_COMPOSITION(Family) once.
// The program builds all of them as one unit (examples/gpt_fineweb/CMakeLists.txt: what the
// families share, most of the unit, is then compiled once).
#pragma once
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <trainkit/checkpoint/asio_checkpointer.hpp>
#include <trainkit/checkpoint/cuda_stager.hpp>
#include <trainkit/checkpoint/host_staged_checkpointer.hpp>
#include <trainkit/checkpoint/sync_checkpointer.hpp>
#include <trainkit/core/cuda/check.hpp>
#include <trainkit/core/cuda/device.hpp>
#include <trainkit/prefetch/pinned_prefetcher.hpp>

#include "../families/registry.hpp"
#include "driver.hpp"
#include "entry.hpp"

// ---- data parallelism on GPUs (--reducer nccl; built where CMake found NCCL and MPI) ----
#if defined(TRAINKIT_HAS_NCCL)
#include <trainkit/comm/mpi_session.hpp>
#include <trainkit/comm/nccl_mpi.hpp>
#include <trainkit/reduce/nccl_allreduce.hpp>
#include <trainkit/reduce/nccl_zero1.hpp>

#include "mpi_launch.hpp"
#endif
// ---- end data parallelism ----

namespace gpt_fineweb {
namespace cuda_composition {

namespace tk = trainkit;

using cuda_async_checkpointer =
    tk::checkpoint::basic_asio_checkpointer<tk::checkpoint::cuda_stager>;
static_assert(tk::checkpoint::defers_snapshot<cuda_async_checkpointer>,
              "the trainer must call before_update so the update waits for the snapshot");

/// --device cuda (driver.hpp's device_policy): the model family's CUDA policies, the pinned
/// prefetcher, checkpointers that stage device memory.
template <model_family ModelFamily>
struct cuda_device {
  template <class Family>
  using policies = cuda_policies<Family>;
  using model_type = typename cuda_policies<ModelFamily>::model_type;
  using config_type = typename ModelFamily::config_type;
  using prefetch_recipe = tk::prefetch::pinned<4>;
  static constexpr std::string_view name = "cuda";

  cuda_policies<ModelFamily> family;

  cuda_device(const train_options& o, const typename ModelFamily::flags& flags)
      : family(o, flags) {}

  config_type model_config(const train_options& o) const { return family.model_config(o); }
  void check_device() const {
    if (!tk::cuda::device_present()) throw tk::config_error("--device cuda: no CUDA device found");
  }
  model_type make_model(const train_options& o, const config_type& cfg) const {
    return family.make_model(o, cfg);
  }
  void configure(tk::mfu_settings& mfu, const model_type& m) const {
    mfu.device_name = m.device_name();
    mfu.dtype = tk::compute_dtype::bf16;
  }
  std::string describe(const model_type& m) const { return family.describe(m); }
  /// The engine --attention resolved to (auto: cudnn where linked, else flash).
  std::string attention() const {
    const char* names[] = {"naive", "flash", "cudnn"};  // gpt2_attention's order
    return names[int(family.options.attention)];
  }
  tk::checkpoint::host_staged_checkpointer<tk::checkpoint::sync_checkpointer> sync_checkpointer(
      const train_options& o) const {
    return tk::checkpoint::host_staged_checkpointer<tk::checkpoint::sync_checkpointer>(
        tk::checkpoint::sync_checkpointer({o.ckpt_dir, o.ckpt_keep}));
  }
  cuda_async_checkpointer async_checkpointer(const train_options& o) const {
    return cuda_async_checkpointer(
        {.dir = o.ckpt_dir, .keep_last = o.ckpt_keep, .fail_on_error = o.ckpt_fatal});
  }
  template <class Trainer>
  void bind(Trainer& t) const {
    // The snapshot's copies wait for this stream's work before them, and the next update (after
    // before_update) waits for the copies, on the device.
    if constexpr (std::is_same_v<typename Trainer::checkpointer_type, cuda_async_checkpointer>)
      t.checkpointer().stager().guard_stream(t.context().stream());
  }
  void after_run(const model_type& m, std::ostream& out) const { family.after_run(m, out); }
  void export_model(const train_options& o, const model_type& m, std::ostream& out) const {
    family.export_model(o, m, out);
  }
};

// ---- data parallelism on GPUs: --reducer nccl, nccl-zero1 ----
#if defined(TRAINKIT_HAS_NCCL)
/// Makes the GPU of this rank's node-local rank current (one rank per GPU), before the model,
/// the prefetcher's pinned ring and the communicator are made on it.
inline void select_rank_gpu(const train_options& o, const mpi_ranks& ranks) {
  const int local = node_local_rank(), gpus = tk::cuda::device_count();
  if (local >= gpus)
    throw tk::config_error("--reducer " + o.reducer + ": rank " + std::to_string(ranks.rank) +
                           " is rank " + std::to_string(local) + " on its node, which has " +
                           std::to_string(gpus) +
                           " CUDA devices (one rank per GPU: start at most that many per node)");
  TRAINKIT_CUDA_CHECK(cudaSetDevice(local));
}

/// One rank of `mpirun -np N gpt_fineweb --device cuda --reducer nccl|nccl-zero1 ...`
/// (mpi_launch.hpp): every rank checks the flags and opens its slice of the data first (phase 1,
/// no device), then takes its GPU and joins the NCCL clique. nccl-zero1 shards the optimizer
/// state over the ranks (the communicator is the reducer's and the optimizer's). Never run on a
/// GPU yet.
template <model_family ModelFamily, optimizer_family OptimizerFamily>
int run_train_nccl(const train_options& o, const typename ModelFamily::flags& model_flags,
                   const typename OptimizerFamily::flags& optimizer_flags) {
  using device = cuda_device<ModelFamily>;
  using optimizer = cuda_policies<OptimizerFamily>;
  using model = typename device::model_type;
  tk::comm::mpi_session mpi;
  return run_mpi_rank(mpi, [&](const mpi_ranks& ranks) {
    train_driver<device, OptimizerFamily> driver(o, device(o, model_flags), optimizer_flags,
                                                 ranks.rank, ranks.ranks);
    std::optional<tk::comm::nccl_communicator> comm;  // outlives the trainer's policies
    const auto join = [&] {
      select_rank_gpu(o, ranks);
      comm.emplace(tk::comm::nccl_communicator_from_mpi());
    };
    if (o.reducer == "nccl-zero1") {
      if constexpr (has_zero1_form<optimizer, model>) {
        return driver
            .template run_sharded<typename optimizer::template zero1_optimizer_type<model>>(
                [&] {
                  join();
                  return tk::reduce::nccl_zero1(*comm);
                },
                [&](const typename OptimizerFamily::config_type& c) {
                  return optimizer::zero1_config(c, *comm);
                },
                ranks);
      } else {
        throw tk::config_error("--reducer nccl-zero1: --optimizer " + o.optimizer +
                               " has no sharded (ZeRO-1) form; use --reducer nccl");
      }
    }
    if constexpr (has_all_reduce_form<optimizer, model>) {  // Muon: the GPUs share the matrices
      return driver
          .template run_sharded<typename optimizer::template all_reduce_optimizer_type<model>>(
              [&] {
                join();
                return tk::reduce::nccl_allreduce(*comm);
              },
              [&](const typename OptimizerFamily::config_type& c) {
                return optimizer::all_reduce_config(c, *comm);
              },
              ranks);
    } else {
      return driver.template run<typename optimizer::template optimizer_type<model>>(
          [&] {
            join();
            return tk::reduce::nccl_allreduce(*comm);
          },
          ranks);
    }
  });
}
#else
template <model_family ModelFamily, optimizer_family OptimizerFamily>
int run_train_nccl(const train_options& o, const typename ModelFamily::flags& model_flags,
                   const typename OptimizerFamily::flags& optimizer_flags) {
  // The flags first, as a build with NCCL would check them.
  using device = cuda_device<ModelFamily>;
  train_driver<device, OptimizerFamily> driver(o, device(o, model_flags), optimizer_flags);
  throw tk::config_error(
      "--reducer " + o.reducer +
      ": this build has no NCCL reducer (it needs NCCL and MPI: CMake did not find both, or "
      "TRAINKIT_NCCL / TRAINKIT_MPI / TRAINKIT_GPT_FINEWEB_NCCL was OFF)");
}
#endif
// ---- end data parallelism ----

}  // namespace cuda_composition

template <class ModelFamily>
int train_on_cuda(const train_options& o, const typename ModelFamily::flags& model_flags,
                  const optimizer_family_flags& optimizer_flags) {
  namespace tk = trainkit;
  using namespace cuda_composition;
  return visit_family(
      optimizer_families{}, o.optimizer, "--optimizer", [&]<class OptimizerFamily>() {
        if constexpr (!has_cuda_policies<ModelFamily>) {
          throw tk::config_error("--device cuda: --arch " + o.arch + " has no CUDA model yet");
          return 2;
        } else if constexpr (!has_cuda_policies<OptimizerFamily>) {
          throw tk::config_error("--device cuda: --optimizer " + o.optimizer +
                                 " has no CUDA optimizer yet");
          return 2;
        } else {
          const auto& of = optimizer_flags.template of<OptimizerFamily>();
          if (o.reducer == "nccl" || o.reducer == "nccl-zero1")
            return run_train_nccl<ModelFamily, OptimizerFamily>(o, model_flags, of);
          using device = cuda_device<ModelFamily>;
          return train_driver<device, OptimizerFamily>(o, device(o, model_flags), of).run();
        }
      });
}

}  // namespace gpt_fineweb

/// train_on_cuda for `Family` (a model family registered in families/registry.hpp), instantiated
/// here: one line in the family's CUDA translation unit.
#define GPT_FINEWEB_CUDA_COMPOSITION(Family)                                     \
  namespace gpt_fineweb {                                                        \
  template int train_on_cuda<Family>(const train_options&, const Family::flags&, \
                                     const optimizer_family_flags&);             \
  }
