// families/muon.hpp — the Muon optimizer family of gpt_fineweb (`--optimizer muon`).
//
// Muon (optim/muon_cpu.hpp) updates the tensors whose role is `matrix` (every hidden weight
// matrix of both model families; a fused q|k|v or gate|up slice part by part) with orthogonalised
// Nesterov momentum, and everything else — embeddings, an untied head, norms, biases — with AdamW.
// Its own flags are --muon-lr (Muon's peak rate, at the schedule's peak; the schedule's shape
// follows --schedule/--warmup), --muon-momentum and --muon-ns-steps (defaults 0.02, 0.95, 5: the
// published Muon's). The optimizer receives one rate per step, the schedule's, and moves the
// matrices at a fixed multiple of it: muon_config::lr_ratio = --muon-lr / --lr, set here once. Its
// variants (muon_config; off by default, the published Muon): --muon-ns ns5|polar (Polar Express
// per-iteration coefficients, at most 5 steps), --muon-normuon with --muon-normuon-beta2 (NorMuon's
// per-neuron second moment; under --reducer mpi or nccl sharded with the momentum, its owner's)
// and --muon-cautious-wd (cautious weight decay of --muon-weight-decay, Muon's own
// decay, 0 by default), and --muon-momentum-warmup/--muon-momentum-start (momentum warmed up,
// modded-nanogpt's 0.85 → 0.95). The AdamW half is built exactly as families/adamw.hpp builds
// AdamW (adamw_family::config: --lr, --beta1, --beta2, --eps, --weight-decay), so a change there
// reaches it. On the CPU it is muon_cpu; under `--reducer mpi` sharded_muon_cpu, whose ranks split
// the matrices (each keeps only its share of the momentum) and all-gather them, bit for bit one
// process's result. On CUDA it is muon_cuda (bf16 Newton–Schulz on cuBLASLt, fp32 master weights),
// from the same muon_config; under `--reducer nccl` sharded_muon_cuda, the same split over GPUs
// with the matrices gathered by NCCL broadcasts on the compute stream. A sharded form's state is
// sharded, so its checkpoints are the sharded kind, written synchronously: `--ckpt-mode async`
// with `--reducer mpi` or `nccl` is refused naming --ckpt-mode. No ZeRO-1 form
// (`--reducer mpi-zero1` / `nccl-zero1` are refused naming --reducer). CPU and CUDA checkpoints
// do not interchange (fp32 parameters against bf16 ones with fp32 master weights): the driver
// refuses a resume across devices naming --device (train/checkpoint_families.hpp).
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <string>
#include <string_view>

#include <trainkit/core/error.hpp>
#include <trainkit/optim/muon_config.hpp>

#include "../train/options.hpp"
#include "adamw.hpp"
#include "family.hpp"

namespace gpt_fineweb {

struct muon_family {
  static constexpr std::string_view name = "muon";
  static constexpr std::string_view summary =
      "Muon (orthogonalised momentum) for the hidden matrices, AdamW (--lr --beta1 --beta2 "
      "--eps --weight-decay) for embeddings, head and norms";
  using config_type = trainkit::optim::muon_config;

  struct flags {
    double lr = 0.02;                                  // --muon-lr: the published Muon's peak
    double momentum = double(config_type{}.momentum);  // --muon-momentum
    int ns_steps = config_type{}.ns_steps;             // --muon-ns-steps
    std::string orthogonalizer{
        trainkit::optim::muon_orthogonalizer_name(config_type{}.orthogonalizer)};  // --muon-ns
    bool normuon = config_type{}.normuon;                                          // --muon-normuon
    double normuon_beta2 = double(config_type{}.normuon_beta2);       // --muon-normuon-beta2
    double weight_decay = double(config_type{}.weight_decay);         // --muon-weight-decay
    int momentum_warmup_steps = config_type{}.momentum_warmup_steps;  // --muon-momentum-warmup
    double momentum_warmup_start = double(config_type{}.momentum_warmup_start);  // ...-start
    bool cautious_weight_decay = config_type{}.cautious_weight_decay;  // --muon-cautious-wd
  };

  static void add_flags(CLI::App& app, flags& f) {
    app.add_option("--muon-lr", f.lr,
                   "--optimizer muon: Muon's peak learning rate for the hidden matrices (the "
                   "schedule's shape, scaled to this peak); AdamW's half uses --lr")
        ->capture_default_str();
    app.add_option("--muon-momentum", f.momentum, "--optimizer muon: Muon's momentum beta")
        ->capture_default_str();
    app.add_option("--muon-ns-steps", f.ns_steps,
                   "--optimizer muon: Newton-Schulz iterations per matrix and step")
        ->capture_default_str();
    app.add_option("--muon-ns", f.orthogonalizer,
                   "--optimizer muon: ns5 (Keller Jordan's fixed quintic) or polar (Polar "
                   "Express per-iteration coefficients, arXiv:2505.16932; --muon-ns-steps <= 5)")
        ->capture_default_str();
    app.add_flag("--muon-normuon", f.normuon,
                 "--optimizer muon: NorMuon's per-neuron second-moment normalisation of the "
                 "orthogonalised update (arXiv:2510.05491)");
    app.add_option("--muon-normuon-beta2", f.normuon_beta2,
                   "--optimizer muon --muon-normuon: the second moment's EMA factor")
        ->capture_default_str();
    app.add_option("--muon-weight-decay", f.weight_decay,
                   "--optimizer muon: Muon's decoupled weight decay for the matrices "
                   "(p <- p*(1 - rate*wd)); --weight-decay stays the AdamW half's")
        ->capture_default_str();
    app.add_option("--muon-momentum-warmup", f.momentum_warmup_steps,
                   "--optimizer muon: steps over which Muon's momentum grows linearly from "
                   "--muon-momentum-start to --muon-momentum (0 = none)")
        ->capture_default_str();
    app.add_option("--muon-momentum-start", f.momentum_warmup_start,
                   "--optimizer muon --muon-momentum-warmup: the momentum of the first step")
        ->capture_default_str();
    app.add_flag("--muon-cautious-wd", f.cautious_weight_decay,
                 "--optimizer muon: decay a weight only where the update moves it toward zero "
                 "(cautious weight decay, arXiv:2510.12402)");
  }

  /// Muon's settings from its flags and AdamW's half from the training command's, validated
  /// (config_error naming the field; flag_names.hpp names the flag).
  static config_type config(const train_options& o, const flags& f) {
    if ((o.reducer == "mpi" || o.reducer == "nccl") && o.ckpt_mode == "async")
      throw trainkit::config_error(
          "--ckpt-mode async: --optimizer muon under --reducer " + o.reducer +
          " shards Muon's momentum over the ranks, whose checkpoints are written synchronously, "
          "every rank its shard; use --ckpt-mode sync or none");
    if (o.reducer == "mpi-zero1" || o.reducer == "nccl-zero1")
      throw trainkit::config_error(
          "--reducer " + o.reducer +
          ": --optimizer muon has no ZeRO-1 form; its sharded form runs under --reducer mpi "
          "(sharded_muon_cpu) or --reducer nccl (sharded_muon_cuda)");
    // --muon-lr is checked alone (the ratio's own check would quote a ratio, not the flag's value);
    // --lr has its own check (train_options::validate), and a bad --lr reports there.
    if (!(f.lr > 0.0) || !std::isfinite(f.lr))
      throw trainkit::config_error("--muon-lr must be finite and > 0: " + std::to_string(f.lr));
    config_type c;
    c.momentum = float(f.momentum);
    c.ns_steps = f.ns_steps;
    const auto orthogonalizer = trainkit::optim::parse_muon_orthogonalizer(f.orthogonalizer);
    if (!orthogonalizer)
      throw trainkit::config_error("--muon-ns must be ns5 or polar: " + f.orthogonalizer);
    c.orthogonalizer = *orthogonalizer;
    c.normuon = f.normuon;
    c.normuon_beta2 = float(f.normuon_beta2);
    c.weight_decay = float(f.weight_decay);
    c.momentum_warmup_steps = f.momentum_warmup_steps;
    c.momentum_warmup_start = float(f.momentum_warmup_start);
    c.cautious_weight_decay = f.cautious_weight_decay;
    // Muon's peak (--muon-lr) over the schedule's (--lr): the one ratio muon_config keeps.
    c.lr_ratio = double(float(f.lr)) / double(float(o.lr));
    c.adamw = adamw_family::config(o, {});
    c.validate();
    return c;
  }
};
static_assert(optimizer_family<muon_family>);

}  // namespace gpt_fineweb

#if !defined(__CUDACC__) && !defined(GPT_FINEWEB_FRONT_END)
#include <trainkit/optim/muon_cpu.hpp>
#if defined(TRAINKIT_HAS_MPI)
#include <trainkit/optim/sharded_muon_cpu.hpp>
#endif

namespace gpt_fineweb {

template <>
struct host_policies<muon_family> {
  template <class Model>
  using optimizer_type = trainkit::optim::muon_cpu;
#if defined(TRAINKIT_HAS_MPI)
  /// --reducer mpi: the ranks share the matrices (state sharded, gradients all-reduced whole).
  template <class Model>
  using all_reduce_optimizer_type = trainkit::optim::sharded_muon_cpu;
  static trainkit::optim::sharded_muon_config all_reduce_config(const muon_family::config_type& m) {
    return trainkit::optim::sharded_muon_config(m);
  }
#endif
};

}  // namespace gpt_fineweb
#endif  // !__CUDACC__

#if defined(__CUDACC__) && !defined(GPT_FINEWEB_FRONT_END)
#include <trainkit/optim/muon_cuda.hpp>
#if defined(TRAINKIT_HAS_NCCL)
#include <trainkit/optim/sharded_muon_cuda.hpp>
#endif

namespace gpt_fineweb {

/// The CUDA half: muon_cuda for any bf16 device model whose layout gives its matrices the role
/// `matrix` (gpt2_cuda; a Llama CUDA model with its parameter roles fits the same way).
template <>
struct cuda_policies<muon_family> {
  using is_defined = void;
  template <class Model>
  using optimizer_type = trainkit::optim::muon_cuda;
#if defined(TRAINKIT_HAS_NCCL)
  /// --reducer nccl: the GPUs share the matrices (state sharded, gradients all-reduced whole),
  /// over the communicator the reducer made.
  template <class Model>
  using all_reduce_optimizer_type = trainkit::optim::sharded_muon_cuda;
  template <class Communicator>
  static trainkit::optim::sharded_muon_cuda_config all_reduce_config(
      const muon_family::config_type& m, const Communicator& comm) {
    return trainkit::optim::sharded_muon_cuda_config(m, comm);
  }
#endif
};

}  // namespace gpt_fineweb
#endif  // __CUDACC__
