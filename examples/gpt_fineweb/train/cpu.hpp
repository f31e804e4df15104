// train/cpu.hpp — `--device cpu`: the CPU device policy of the training driver and the CPU
// data-parallel launch (`mpirun -np N gpt_fineweb --reducer mpi|mpi-zero1`). Their CUDA twins
// (the CUDA device policy, `--reducer nccl|nccl-zero1`) are in train/cuda_entry.cuh.
//
// The composition, for the --arch family M and the --optimizer family O:
//   trainer<mmap_token_source, prefetch::threaded<4>, host_policies<M>::model_type,
//           host_policies<O>::optimizer_type, Checkpointer[, Reducer]>
// with Checkpointer by --ckpt-mode (none, sync_checkpointer, asio_checkpointer) and, under
// mpirun, mpi_allreduce (or mpi_zero1 with the family's sharded optimizer).
#pragma once

#include <cstdio>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

#include <trainkit/checkpoint/asio_checkpointer.hpp>
#include <trainkit/checkpoint/sync_checkpointer.hpp>
#include <trainkit/core/cpu_features.hpp>
#include <trainkit/core/device_info.hpp>
#include <trainkit/core/linalg/gemm_cpu.hpp>
#include <trainkit/prefetch/threaded_prefetcher.hpp>
#include <trainkit/trainer/trainer.hpp>

#include "../families/registry.hpp"
#include "driver.hpp"
#include "options.hpp"

// ---- data parallelism (--reducer mpi; built where CMake found MPI) ----
#if defined(TRAINKIT_HAS_MPI)
#include <trainkit/comm/mpi_session.hpp>
#include <trainkit/reduce/mpi_allreduce.hpp>
#include <trainkit/reduce/mpi_zero1.hpp>

#include "mpi_launch.hpp"
#endif
// ---- end data parallelism ----

namespace gpt_fineweb {

/// --device cpu (driver.hpp's device_policy): the model family's host policies, the threaded
/// prefetcher, checkpointers that read host memory.
template <model_family ModelFamily>
struct cpu_device {
  template <class Family>
  using policies = host_policies<Family>;
  using model_type = typename host_policies<ModelFamily>::model_type;
  using config_type = typename ModelFamily::config_type;
  using prefetch_recipe = trainkit::prefetch::threaded<4>;
  static constexpr std::string_view name = "cpu";

  host_policies<ModelFamily> family;

  /// Applies --precision to the process's GEMMs; throws config_error (naming the CPU) where the
  /// build or the CPU cannot run bf16.
  cpu_device(const train_options& o, const typename ModelFamily::flags& flags) : family(flags) {
    trainkit::linalg::gemm_settings s;
    if (o.precision == "bf16") s.precision = trainkit::linalg::gemm_precision::bf16;
    try {
      trainkit::linalg::set_gemm_settings(s);
    } catch (const trainkit::config_error& e) {
      throw trainkit::config_error("--precision " + o.precision + ": " + e.what());
    }
  }

  config_type model_config(const train_options& o) { return family.model_config(o); }
  void check_device() const noexcept {}
  model_type make_model(const train_options& o, const config_type& cfg) {
    return family.make_model(o, cfg);
  }
  /// MFU against this CPU's peak (core/device_info.hpp's cpu_peak) for the GEMMs' precision.
  void configure(trainkit::mfu_settings& mfu, const model_type&) const {
    mfu.device_name = "cpu";
    if (trainkit::linalg::current_gemm_settings().precision ==
        trainkit::linalg::gemm_precision::bf16)
      mfu.dtype = trainkit::compute_dtype::bf16;
  }
  std::string describe(const model_type&) const {
    const bool bf16 = trainkit::linalg::current_gemm_settings().precision ==
                      trainkit::linalg::gemm_precision::bf16;
    const trainkit::cpu_peak peak = trainkit::this_cpu_peak();  // what MFU divides by
    char text[64];
    std::snprintf(text, sizeof text, "; peak %.3g TFLOP/s ",
                  peak.tflops(bf16 ? trainkit::compute_dtype::bf16 : trainkit::compute_dtype::f32));
    return (bf16 ? ", bf16 GEMMs (oneDNN) on " + trainkit::this_cpu().model : std::string()) +
           text + "(" + peak.basis + ")";
  }
  std::string attention() const { return "cpu"; }  // the models' own attention, on the host
  trainkit::checkpoint::sync_checkpointer sync_checkpointer(const train_options& o) const {
    return trainkit::checkpoint::sync_checkpointer({o.ckpt_dir, o.ckpt_keep});
  }
  trainkit::checkpoint::asio_checkpointer async_checkpointer(const train_options& o) const {
    return trainkit::checkpoint::asio_checkpointer(
        {.dir = o.ckpt_dir, .keep_last = o.ckpt_keep, .fail_on_error = o.ckpt_fatal});
  }
  template <class Trainer>
  void bind(Trainer&) const noexcept {}
  void after_run(const model_type&, std::ostream&) const noexcept {}
  void export_model(const train_options& o, const model_type& model, std::ostream& out) const {
    family.export_model(o, model, out);
  }
};

// ---- data parallelism: --reducer mpi, mpi-zero1 ----
#if defined(TRAINKIT_HAS_MPI)
/// One rank of `mpirun -np N gpt_fineweb --reducer mpi|mpi-zero1 ...` (mpi_launch.hpp). Every
/// rank trains on its slice of each global batch; rank 0 writes the console, metrics,
/// TensorBoard, checkpoints and exports.
template <model_family ModelFamily, optimizer_family OptimizerFamily>
int run_train_mpi(const train_options& o, const typename ModelFamily::flags& model_flags,
                  const typename OptimizerFamily::flags& optimizer_flags) {
  using device = cpu_device<ModelFamily>;
  using optimizer = host_policies<OptimizerFamily>;
  using model = typename device::model_type;
  trainkit::comm::mpi_session mpi;
  return run_mpi_rank(mpi, [&](const mpi_ranks& ranks) {
    train_driver<device, OptimizerFamily> driver(o, device(o, model_flags), optimizer_flags,
                                                 ranks.rank, ranks.ranks);
    if (o.reducer == "mpi-zero1") {  // ZeRO-1: the optimizer state sharded over the ranks
      if constexpr (has_zero1_form<optimizer, model>) {
        return driver
            .template run_sharded<typename optimizer::template zero1_optimizer_type<model>>(
                [] { return trainkit::reduce::mpi_zero1{}; },
                [](const typename OptimizerFamily::config_type& c) {
                  return optimizer::zero1_config(c);
                },
                ranks);
      } else {
        throw trainkit::config_error("--reducer mpi-zero1: --optimizer " + o.optimizer +
                                     " has no sharded (ZeRO-1) form; use --reducer mpi");
      }
    }
    if constexpr (has_all_reduce_form<optimizer, model>) {  // e.g. Muon's sharded matrices
      return driver
          .template run_sharded<typename optimizer::template all_reduce_optimizer_type<model>>(
              [] { return trainkit::reduce::mpi_allreduce{}; },
              [](const typename OptimizerFamily::config_type& c) {
                return optimizer::all_reduce_config(c);
              },
              ranks);
    } else {
      return driver.template run<typename optimizer::template optimizer_type<model>>(
          [] { return trainkit::reduce::mpi_allreduce{}; }, ranks);
    }
  });
}
#else
template <model_family ModelFamily, optimizer_family OptimizerFamily>
int run_train_mpi(const train_options&, const typename ModelFamily::flags&,
                  const typename OptimizerFamily::flags&) {
  throw trainkit::config_error(
      "--reducer mpi: this build has no MPI (CMake found none, or "
      "TRAINKIT_MPI was OFF)");
}
#endif
// ---- end data parallelism ----

/// --device cpu for the --arch and --optimizer families: one process, or one rank under mpirun.
template <model_family ModelFamily, optimizer_family OptimizerFamily>
int run_train_cpu(const train_options& o, const typename ModelFamily::flags& model_flags,
                  const typename OptimizerFamily::flags& optimizer_flags) {
  if (o.reducer != "single")
    return run_train_mpi<ModelFamily, OptimizerFamily>(o, model_flags, optimizer_flags);
  using device = cpu_device<ModelFamily>;
  return train_driver<device, OptimizerFamily>(o, device(o, model_flags), optimizer_flags).run();
}

}  // namespace gpt_fineweb
