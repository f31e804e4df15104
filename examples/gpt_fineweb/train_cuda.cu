// train_cuda.cu — gpt_fineweb's `--device cuda`: train_driver.hpp's driver with the CUDA device
// policy,
//
//   trainer<mmap_token_source, prefetch::pinned<4>, gpt2_cuda, adamw_cuda, Checkpointer[, Reducer]>
//
// with Checkpointer by --ckpt-mode: none (no_checkpoint), sync (sync_checkpointer behind
// host_staged_checkpointer, which copies device tensors to pinned memory before each write and
// back after a resume) or async (basic_asio_checkpointer<cuda_stager>: device→pinned copies on a
// side stream, written on a Boost.Asio thread; the stager orders its copies after the trainer's
// compute stream, and the next update waits for the snapshot on the device, not on the host).
// --init-from and --export read and write llm.c model files (llmc_file.hpp's span functions).
// `--reducer nccl` (built where CMake found NCCL and MPI) runs one rank per GPU under mpirun,
// NCCL's unique id broadcast over MPI; `--reducer nccl-zero1` the same with ZeRO-1
// (reduce::nccl_zero1 + optim::zero1_adamw_cuda, sharded checkpoints with --ckpt-mode sync).
// Compiled by nvcc: nothing here may include Eigen
// (gpt2_cpu.hpp). Library errors propagate to main.cpp, which turns them into one line and exit
// code 2.
#include <cstdio>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <trainkit/checkpoint/asio_checkpointer.hpp>
#include <trainkit/checkpoint/cuda_stager.hpp>
#include <trainkit/checkpoint/host_staged_checkpointer.hpp>
#include <trainkit/checkpoint/sync_checkpointer.hpp>
#include <trainkit/core/cuda/check.hpp>
#include <trainkit/core/cuda/device.hpp>
#include <trainkit/model/gpt2_cuda.hpp>
#include <trainkit/model/llmc_file.hpp>
#include <trainkit/optim/adamw_cuda.hpp>
#include <trainkit/prefetch/pinned_prefetcher.hpp>

#include "train_cuda.hpp"
#include "train_driver.hpp"

// ---- data parallelism on GPUs (--reducer nccl; built where CMake found NCCL and MPI) ----
#if defined(TRAINKIT_HAS_NCCL)
#include <trainkit/comm/mpi_session.hpp>
#include <trainkit/comm/nccl_mpi.hpp>
#include <trainkit/optim/zero1_adamw_cuda.hpp>
#include <trainkit/reduce/nccl_allreduce.hpp>
#include <trainkit/reduce/nccl_zero1.hpp>

#include "mpi_launch.hpp"
#endif
// ---- end data parallelism ----

namespace tk = trainkit;

static_assert(tk::optim::optimizer_for<tk::optim::adamw_cuda, tk::model::gpt2_cuda>);

namespace gpt_fineweb {
namespace {

using cuda_async_checkpointer =
    tk::checkpoint::basic_asio_checkpointer<tk::checkpoint::cuda_stager>;
static_assert(tk::checkpoint::defers_snapshot<cuda_async_checkpointer>,
              "the trainer must call before_update so the update waits for the snapshot");

/// --attention auto: cuDNN's fused attention where this program links it, else trainkit's flash
/// kernels; neither materialises the T x T scores.
std::string resolved_attention(const std::string& flag) {
  if (flag != "auto") return flag;
#if defined(TRAINKIT_HAS_CUDNN_FRONTEND)
  return "cudnn";
#else
  return "flash";
#endif
}

/// The model's options from the flags, checked without touching the device.
tk::model::gpt2_cuda_options cuda_model_options(const train_options& o) {
  tk::model::gpt2_cuda_options mo;
  const std::string attention = resolved_attention(o.attention);
  // Bit-reproducible kernels everywhere except flash attention, whose backward adds dQ with fp32
  // atomics (the model refuses flash with deterministic set).
  if (attention == "flash") {
    mo.attention = tk::model::gpt2_attention::flash;
    mo.deterministic = false;
  } else {
#if !defined(TRAINKIT_HAS_CUDNN_FRONTEND)
    if (attention == "cudnn")
      throw tk::config_error(
          "--attention cudnn: this gpt_fineweb was built without cuDNN attention (configure with "
          "-DTRAINKIT_GPT_FINEWEB_CUDNN=ON after pip install nvidia-cudnn-frontend)");
#endif
    mo.attention = attention == "cudnn" ? tk::model::gpt2_attention::cudnn
                                        : tk::model::gpt2_attention::naive;
    mo.deterministic = true;
  }
  mo.cuda_graph = o.cuda_graph;
  mo.batch_size = o.batch;  // size the activation arena once, up front
  mo.seq_len = o.seq;
  return mo;
}

/// --device cuda (train_driver.hpp's device_policy).
struct cuda_device {
  using model_type = tk::model::gpt2_cuda;
  using optimizer_type = tk::optim::adamw_cuda;
  using prefetch_recipe = tk::prefetch::pinned<4>;
  static constexpr std::string_view name = "cuda";

  tk::model::gpt2_cuda_options options;

  explicit cuda_device(const train_options& o) : options(cuda_model_options(o)) {}

  /// A preset, or the header of the --init-from file (its parameters are read by make_model).
  tk::model::gpt2_config model_config(const train_options& o) const {
    if (!o.init_from.empty()) return tk::model::read_llmc_header(o.init_from);
    return tk::model::gpt2_config::preset(o.model);
  }
  void check_device() const {
    if (!tk::cuda::device_present()) throw tk::config_error("--device cuda: no CUDA device found");
  }
  model_type make_model(const train_options& o, const tk::model::gpt2_config& cfg) const {
    if (o.init_from.empty()) return model_type(cfg, o.seed, options);
    std::vector<float> params(cfg.num_parameters());
    tk::model::read_llmc_parameters<float>(o.init_from, cfg, std::span<float>(params));
    return model_type(cfg, std::span<const float>(params), options);
  }
  void configure(tk::mfu_settings& mfu, const model_type& m) const {
    mfu.device_name = m.device_name();
    mfu.dtype = tk::compute_dtype::bf16;
  }
  std::string describe(const model_type& m) const {
    const char* attention[] = {"naive", "flash", "cudnn"};
    return " | " + m.device_name() + " | attention " + attention[int(options.attention)] + " | " +
           m.memory_report().to_string();
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
  void after_run(const model_type& m, std::ostream& out) const {
    if (m.matmul_fallbacks() > 0)
      out << "note: " << m.matmul_fallbacks()
          << " GEMM epilogues ran through fallback kernels (no fused cuBLASLt algorithm)\n";
  }
  void export_model(const train_options& o, const model_type& m, std::ostream& out) const {
    // --export-hf is refused for --device cuda by train_options::validate.
    if (o.export_path.empty()) return;
    std::vector<float> params(m.num_parameters());
    m.copy_parameters_to_host(params);
    tk::model::write_llmc_parameters<float>(o.export_path, m.config(),
                                            std::span<const float>(params));
    out << "exported llm.c model file " << o.export_path << "\n";
  }
};
static_assert(device_policy<cuda_device>);

// ---- data parallelism on GPUs: --reducer nccl, nccl-zero1 ----
#if defined(TRAINKIT_HAS_NCCL)
static_assert(tk::reduce::gradient_reducer_for<tk::reduce::nccl_allreduce, tk::model::gpt2_cuda>);
static_assert(tk::reduce::clips_sharded_gradients<tk::reduce::nccl_zero1, tk::model::gpt2_cuda>);
static_assert(tk::optim::optimizer_for<tk::optim::zero1_adamw_cuda, tk::model::gpt2_cuda>);
static_assert(reports_state_bytes<tk::optim::zero1_adamw_cuda>, "the ranks line reports it");

/// Makes the GPU of this rank's node-local rank current (one rank per GPU), before the model,
/// the prefetcher's pinned ring and the communicator are made on it.
void select_rank_gpu(const train_options& o, const mpi_ranks& ranks) {
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
int run_train_nccl(const train_options& o) {
  tk::comm::mpi_session mpi;
  return run_mpi_rank(mpi, [&](const mpi_ranks& ranks) {
    train_driver driver(o, cuda_device(o), ranks.rank, ranks.ranks);
    std::optional<tk::comm::nccl_communicator> comm;  // outlives the trainer's policies
    const auto join = [&] {
      select_rank_gpu(o, ranks);
      comm.emplace(tk::comm::nccl_communicator_from_mpi());
    };
    if (o.reducer == "nccl-zero1")
      return driver.run_sharded<tk::optim::zero1_adamw_cuda>(
          [&] {
            join();
            return tk::reduce::nccl_zero1(*comm);
          },
          [&](const tk::optim::adamw_config& a) {
            return tk::optim::zero1_adamw_cuda_config(a, *comm);
          },
          ranks);
    return driver.run<tk::optim::adamw_cuda>(
        [&] {
          join();
          return tk::reduce::nccl_allreduce(*comm);
        },
        ranks);
  });
}
#else
int run_train_nccl(const train_options& o) {
  // The flags first, as a build with NCCL would check them.
  train_driver driver(o, cuda_device(o));
  throw tk::config_error(
      "--reducer " + o.reducer +
      ": this build has no NCCL reducer (it needs NCCL and MPI: CMake did not find both, or "
      "TRAINKIT_NCCL / TRAINKIT_MPI / TRAINKIT_GPT_FINEWEB_NCCL was OFF)");
}
#endif
// ---- end data parallelism ----

}  // namespace

int run_train_cuda(const train_options& o) {
  if (o.reducer == "nccl" || o.reducer == "nccl-zero1") return run_train_nccl(o);
  return train_driver(o, cuda_device(o)).run();
}

}  // namespace gpt_fineweb
