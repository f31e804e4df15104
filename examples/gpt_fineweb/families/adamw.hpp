// families/adamw.hpp — the AdamW optimizer family of gpt_fineweb (`--optimizer adamw`, the
// default).
//
// Its settings come from the training command's own flags (--beta1, --beta2, --eps,
// --weight-decay; --grad-clip is the trainer's, trainer_config.grad_clip), checked by
// adamw_config::validate. On the CPU it is adamw_cpu, and for `--reducer mpi-zero1` (ZeRO-1, where
// MPI was found) zero1_adamw_cpu; on CUDA adamw_cuda, and for `--reducer nccl-zero1`
// zero1_adamw_cuda. A family without a sharded form leaves `zero1_optimizer_type` out and the
// driver refuses those reducers for it. Host part outside nvcc, CUDA part under nvcc
// (families/family.hpp says why).
#pragma once

#include <CLI/CLI.hpp>

#include <string_view>

#include <trainkit/optim/adamw_config.hpp>

#include "../train/options.hpp"
#include "family.hpp"

namespace gpt_fineweb {

struct adamw_family {
  static constexpr std::string_view name = "adamw";
  static constexpr std::string_view summary =
      "AdamW for every parameter, decoupled weight decay on embeddings, matrices and the head";
  using config_type = trainkit::optim::adamw_config;

  struct flags {};
  static void add_flags(CLI::App&, flags&) {}

  /// AdamW settings from the flags, validated (config_error names the bad field).
  static config_type config(const train_options& o, const flags&) {
    config_type ac{float(o.beta1), float(o.beta2), float(o.eps), float(o.weight_decay)};
    ac.lr_scales.embedding = float(o.lr_embedding_scale);
    ac.lr_scales.head = float(o.lr_head_scale);
    ac.lr_scales.norm = ac.lr_scales.bias = float(o.lr_scalar_scale);
    ac.validate();
    return ac;
  }
};
static_assert(optimizer_family<adamw_family>);

}  // namespace gpt_fineweb

#if !defined(__CUDACC__) && !defined(GPT_FINEWEB_FRONT_END)
#include <trainkit/optim/adamw_cpu.hpp>
#if defined(TRAINKIT_HAS_MPI)
#include <trainkit/optim/zero1_adamw_cpu.hpp>
#endif

namespace gpt_fineweb {

template <>
struct host_policies<adamw_family> {
  template <class Model>
  using optimizer_type = trainkit::optim::adamw_cpu;
#if defined(TRAINKIT_HAS_MPI)
  template <class Model>
  using zero1_optimizer_type = trainkit::optim::zero1_adamw_cpu;
  static trainkit::optim::zero1_adamw_config zero1_config(const adamw_family::config_type& a) {
    return trainkit::optim::zero1_adamw_config(a);
  }
#endif
};

}  // namespace gpt_fineweb
#endif  // !__CUDACC__

#if defined(__CUDACC__) && !defined(GPT_FINEWEB_FRONT_END)
#include <trainkit/optim/adamw_cuda.hpp>
#if defined(TRAINKIT_HAS_NCCL)
#include <trainkit/optim/zero1_adamw_cuda.hpp>
#endif

namespace gpt_fineweb {

template <>
struct cuda_policies<adamw_family> {
  using is_defined = void;
  template <class Model>
  using optimizer_type = trainkit::optim::adamw_cuda;
#if defined(TRAINKIT_HAS_NCCL)
  template <class Model>
  using zero1_optimizer_type = trainkit::optim::zero1_adamw_cuda;
  /// The sharded optimizer's config names the communicator the reducer made.
  template <class Communicator>
  static trainkit::optim::zero1_adamw_cuda_config zero1_config(const adamw_family::config_type& a,
                                                               const Communicator& comm) {
    return trainkit::optim::zero1_adamw_cuda_config(a, comm);
  }
#endif
};

}  // namespace gpt_fineweb
#endif  // __CUDACC__
