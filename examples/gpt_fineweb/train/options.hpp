// train/options.hpp — gpt_fineweb's training flags (the contract of docs/cli.md) and their checks.
//
// Defaults suit a first run on a laptop CPU (d2 on the embedded corpus, loss falling within a
// minute); the H200 recipe in the README sets every flag explicitly. --arch, --model and
// --optimizer, whose values come from the family registry, and the families' own flags are added
// by the training command (commands/train.hpp).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include <unistd.h>

#include <trainkit/core/error.hpp>
#include <trainkit/data/shard_format.hpp>
#include <trainkit/model/sampling.hpp>
#include <trainkit/optim/schedule.hpp>
#include <trainkit/trainer/config.hpp>

namespace gpt_fineweb {

struct train_options {
  std::string data, val;             // shard globs; empty data = embedded corpus
  std::string data_format = "llmc";  // layout of --data/--val files: llmc or headerless_uint16
  std::string device = "cpu";
  std::string attention = "auto";      // --device cuda: auto, naive, flash or cudnn
  bool cuda_graph = false;             // --device cuda: replay each micro-step as a CUDA graph
  std::string precision = "fp32";      // --device cpu: fp32 or bf16 GEMMs (linalg::gemm_settings)
  std::string arch = "gpt2";           // model family (families/registry.hpp)
  std::string model = "d2";            // preset of the --arch family
  std::string optimizer = "adamw";     // optimizer family (families/registry.hpp)
  std::string recipe;                  // --recipe: a named set of flags (train/recipes.hpp)
  int batch = 8;                       // B (micro-batch)
  int seq = 64;                        // T
  std::size_t total_batch_tokens = 0;  // 0 = B·T (no accumulation)
  std::size_t batch_ramp_tokens = 0;   // tokens of step 1 of a batch ramp; 0 = no ramp
  int batch_ramp_steps = 0;            // steps the ramp grows over
  int steps = 200;
  double lr = 1e-3;
  std::string schedule = "cosine";
  int warmup = 10;
  double final_lr_frac = 0.1;
  double weight_decay = 0.1;
  double grad_clip = 1.0;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  // AdamW's rate per role, as multiples of the schedule's (optim/role_lr_scales.hpp)
  double lr_embedding_scale = 1.0, lr_head_scale = 1.0, lr_scalar_scale = 1.0;
  std::uint64_t seed = 1337;
  std::string order = "sequential";
  std::string metrics;
  std::string ckpt_dir;
  int ckpt_every = 0;
  int ckpt_keep = 3;
  std::string ckpt_mode = "none";
  bool ckpt_fatal = false;  // async: a failed checkpoint write ends the run (default: warning)
  bool resume = false;
  std::string init_from;
  std::string init_from_hf;  // Hugging Face GPT-2 folder (config.json + model.safetensors)
  std::string export_path;
  std::string export_hf;  // write a Hugging Face folder at the end
  std::string export_hf_dtype = "f32";
  int eval_every = 50;
  int eval_batches = 10;
  int log_every = 1;
  int threads = 0;
  double peak_tflops = 0;
  bool calibrate = false;
  std::string tensorboard;  // event file directory; empty = none
  std::string chart;        // SVG chart at the end; empty = <metrics>.svg when --metrics
  bool no_progress = false;
  int sample = 0;            // tokens to sample: generation mode, or per sample with --sample-every
  int sample_every = 0;      // during training: a sample every K steps (0 = none)
  std::string prompt;        // text the samples continue (after <|endoftext|>)
  std::string hellaswag;     // HellaSwag JSONL scored during training (--device cpu)
  int hellaswag_every = 0;   // score it every K steps and at the end (0 = never)
  int hellaswag_limit = 0;   // only the first N examples (0 = all)
  double temperature = 1.0;  // 0 = greedy
  int top_k = 40;
  std::string vocab;  // GPT-2 encoder.json + vocab.bpe; empty = $TRAINKIT_GPT2_VOCAB

  // ---- data parallelism (--reducer; docs/distributed.md) ----
  // single: one process; mpi, mpi-zero1, nccl, nccl-zero1: a rank per process
  std::string reducer = "single";
  // ---- end data parallelism ----

  /// The layout of the files a glob flag (--data or --val) names; the embedded corpus (no glob)
  /// is written as llm.c shards.
  trainkit::data::shard_layout layout_of(const std::string& glob) const {
    return glob.empty() ? trainkit::data::shard_layout::llmc
                        : trainkit::data::parse_shard_layout(data_format);
  }

  /// Cross-flag checks CLI11 cannot express; throws config_error naming the flag. A check of a
  /// flag's own value never depends on another flag (issue 39: --eval-batches 0 was refused or
  /// accepted by whether --data and --val were given): a value is valid or not on its own, and a
  /// check of a combination (--attention with --device, --sample-every with --sample) names both
  /// flags and states the pairing, not the value. The trainer's
  /// own settings (--steps, --total-batch-tokens, --eval-every, --eval-batches, --ckpt-every,
  /// --warmup, --final-lr-frac) are checked by the library's one check() (trainer/config.hpp),
  /// which the training driver runs before the device is touched; --lr is checked here because
  /// the program asks more than the library (a positive rate; the library accepts 0).
  void validate() const {
    auto positive = [](const char* flag, long long v) {
      if (v <= 0)
        throw trainkit::config_error(std::string(flag) + " must be positive: " + std::to_string(v));
    };
    positive("--batch", batch);
    positive("--seq", seq);
    positive("--log-every", log_every);
    if (threads < 0)
      throw trainkit::config_error("--threads must be >= 0 (0 = all cores): " +
                                   std::to_string(threads));
    if (attention != "auto" && device != "cuda")
      throw trainkit::config_error("--attention " + attention +
                                   " needs --device cuda (the CPU model has one attention)");
    if (cuda_graph && device != "cuda")
      throw trainkit::config_error("--cuda-graph needs --device cuda");
    if (precision != "fp32" && device != "cpu")
      throw trainkit::config_error("--precision " + precision +
                                   " is for --device cpu (the CUDA models compute in bf16)");
    if (!(lr > 0)) throw trainkit::config_error("--lr must be positive: " + std::to_string(lr));
    if (ckpt_keep < 0)
      throw trainkit::config_error("--ckpt-keep must be >= 0: " + std::to_string(ckpt_keep));
    if (!init_from.empty() && !init_from_hf.empty())
      throw trainkit::config_error("--init-from and --init-from-hf: give one starting model");
    if ((!init_from_hf.empty() || !export_hf.empty()) && device != "cpu")
      throw trainkit::config_error(
          std::string(init_from_hf.empty() ? "--export-hf" : "--init-from-hf") +
          " needs --device cpu for now; with --device cuda convert the "
          "model file with `gpt_fineweb import-hf` / `export-hf`");
    if (resume && ckpt_mode == "none")
      throw trainkit::config_error("--resume needs --ckpt-mode sync|async and --ckpt-dir");
    if (sample < 0)
      throw trainkit::config_error("--sample must be >= 0: " + std::to_string(sample));
    if (sample_every < 0)
      throw trainkit::config_error("--sample-every must be >= 0: " + std::to_string(sample_every));
    if (sample_every > 0 && sample == 0)
      throw trainkit::config_error("--sample-every needs --sample N (tokens per sample)");
    if (sample_every > 0 && device != "cpu")
      throw trainkit::config_error(
          "--sample-every: samples during training need --device cpu for now; "
          "sample afterwards with --sample N --ckpt-dir DIR or --init-from FILE");
    if (hellaswag_every < 0)
      throw trainkit::config_error("--hellaswag-every must be >= 0: " +
                                   std::to_string(hellaswag_every));
    if (hellaswag_limit < 0)
      throw trainkit::config_error("--hellaswag-limit must be >= 0: " +
                                   std::to_string(hellaswag_limit));
    if ((hellaswag_every > 0) != !hellaswag.empty())
      throw trainkit::config_error("--hellaswag FILE and --hellaswag-every K go together");
    if (hellaswag_every > 0 && device != "cpu")
      throw trainkit::config_error(
          "--hellaswag-every: HellaSwag during training needs --device "
          "cpu for now; score a model file afterwards with `eval`");
    trainkit::model::sampling_config{float(temperature), top_k, seed}.validate();
    // ---- data parallelism ----
    const bool gpu_reducer = reducer == "nccl" || reducer == "nccl-zero1";
    if (reducer == "nccl" && device != "cuda")
      throw trainkit::config_error(
          "--reducer nccl all-reduces GPU gradients: it needs --device cuda (on the CPU: "
          "--reducer mpi)");
    if (reducer == "nccl-zero1" && device != "cuda")
      throw trainkit::config_error(
          "--reducer nccl-zero1 shards GPU optimizer state: it needs --device cuda (on the CPU: "
          "--reducer mpi-zero1)");
    if (reducer != "single" && !gpu_reducer && device != "cpu")
      throw trainkit::config_error("--reducer " + reducer +
                                   " reduces CPU gradients: it needs --device cpu (on GPUs: "
                                   "--reducer nccl or nccl-zero1)");
    if ((reducer == "mpi-zero1" || reducer == "nccl-zero1") && ckpt_mode == "async")
      throw trainkit::config_error(
          "--ckpt-mode async: ZeRO-1's sharded checkpoints (--reducer " + reducer +
          ") are written synchronously, every rank its shard; use --ckpt-mode sync or none");
    // ---- end data parallelism ----
  }
};

inline void add_train_options(CLI::App& app, train_options& o) {
  app.add_option("--data", o.data,
                 "training shards (glob of llm.c .bin files); none = embedded corpus");
  app.add_option("--val", o.val, "validation shards (glob)");
  app.add_option("--data-format", o.data_format,
                 "layout of --data/--val files: llmc (1 KiB header, magic 20240520) or "
                 "headerless_uint16 (nanoGPT .bin, tokens only)")
      ->check(CLI::IsMember({"llmc", "headerless_uint16"}));
  app.add_option("--device", o.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--precision", o.precision,
                 "--device cpu GEMMs: fp32, or bf16 (oneDNN; a CPU with AVX512_BF16 or AMX-BF16; "
                 "fp32 master weights, activations and optimizer state)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--attention", o.attention,
                 "--device cuda attention kernels: auto (cudnn where this build has it, else "
                 "flash), naive (T x T matrices, bit-reproducible), flash (tiled, not "
                 "bit-reproducible) or cudnn (cuDNN SDPA; builds with "
                 "TRAINKIT_GPT_FINEWEB_CUDNN=ON)")
      ->check(CLI::IsMember({"auto", "naive", "flash", "cudnn"}));
  app.add_flag("--cuda-graph", o.cuda_graph,
               "--device cuda: capture each micro-step as a CUDA graph and replay it (one launch "
               "instead of hundreds; same results)");
  app.add_option("--batch", o.batch, "micro-batch size B");
  app.add_option("--seq", o.seq, "sequence length T");
  app.add_option("--total-batch-tokens", o.total_batch_tokens,
                 "tokens per optimizer step (gradient accumulation); 0 = B*T");
  app.add_option("--batch-ramp-tokens", o.batch_ramp_tokens,
                 "tokens of the first optimizer step, growing linearly to --total-batch-tokens "
                 "over --batch-ramp-steps (whole micro-batches); 0 = no ramp");
  app.add_option("--batch-ramp-steps", o.batch_ramp_steps,
                 "steps over which --batch-ramp-tokens grows to --total-batch-tokens");
  app.add_option("--steps", o.steps, "optimizer steps");
  app.add_option("--lr", o.lr, "peak learning rate");
  app.add_option("--schedule", o.schedule, "constant, cosine or wsd (warmup-stable-decay)")
      ->check(CLI::IsMember({"constant", "cosine", "wsd"}));
  app.add_option("--warmup", o.warmup, "linear warm-up steps");
  app.add_option("--final-lr-frac", o.final_lr_frac,
                 "final lr as a fraction of --lr (cosine, wsd)");
  app.add_option("--weight-decay", o.weight_decay,
                 "AdamW decoupled weight decay (2-D weights only)");
  app.add_option("--grad-clip", o.grad_clip, "global gradient-norm clip; 0 = off");
  app.add_option("--lr-embedding-scale", o.lr_embedding_scale,
                 "AdamW's rate for embeddings as a multiple of the schedule's (--lr)");
  app.add_option("--lr-head-scale", o.lr_head_scale,
                 "AdamW's rate for an untied head as a multiple of the schedule's (--lr)");
  app.add_option("--lr-scalar-scale", o.lr_scalar_scale,
                 "AdamW's rate for norms and biases as a multiple of the schedule's (--lr)");
  app.add_option("--beta1", o.beta1, "AdamW beta1");
  app.add_option("--beta2", o.beta2, "AdamW beta2");
  app.add_option("--eps", o.eps, "AdamW epsilon");
  app.add_option("--seed", o.seed, "seed for initialisation and random data order");
  app.add_option("--order", o.order, "data order: sequential (llm.c) or random")
      ->check(CLI::IsMember({"sequential", "random"}));
  app.add_option("--metrics", o.metrics, "append one JSON line per step to this file");
  app.add_option("--ckpt-dir", o.ckpt_dir, "checkpoint directory");
  app.add_option("--ckpt-every", o.ckpt_every, "checkpoint every N steps (0 = only at the end)");
  app.add_option("--ckpt-keep", o.ckpt_keep, "keep the last K checkpoints (0 = all)");
  app.add_option("--ckpt-mode", o.ckpt_mode, "none, sync or async")
      ->check(CLI::IsMember({"none", "sync", "async"}));
  app.add_flag("--ckpt-fatal", o.ckpt_fatal,
               "async: a failed checkpoint write ends the run (exit 2) instead of a warning");
  app.add_flag("--resume", o.resume, "continue from the newest valid checkpoint in --ckpt-dir");
  app.add_option("--init-from", o.init_from, "initialise from an llm.c model file (.bin)");
  app.add_option("--export", o.export_path, "write the trained model as an llm.c model file");
  app.add_option("--init-from-hf", o.init_from_hf,
                 "initialise from a Hugging Face GPT-2 folder (config.json + model.safetensors)");
  app.add_option("--export-hf", o.export_hf,
                 "write the trained model as a Hugging Face GPT-2 folder (with the tokenizer)");
  app.add_option("--export-hf-dtype", o.export_hf_dtype, "weights of --export-hf: f32 or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}));
  app.add_option("--eval-every", o.eval_every,
                 "validation loss every N steps (0 = only at the end)");
  app.add_option("--eval-batches", o.eval_batches, "validation batches per evaluation");
  app.add_option("--log-every", o.log_every, "console line every N steps");
  app.add_option("--threads", o.threads, "CPU threads (OpenMP); 0 = all cores");
  app.add_option("--peak-tflops", o.peak_tflops, "device peak for MFU, overriding the table");
  app.add_flag("--calibrate", o.calibrate,
               "time a GEMM at start-up; MFU is also reported against the measured rate");
  app.add_option("--tensorboard", o.tensorboard, "write TensorBoard scalars (event file) to DIR");
  app.add_option("--chart", o.chart,
                 "SVG chart of loss and phase times per step (default: <metrics>.svg)");
  app.add_flag("--no-progress", o.no_progress, "no live progress line on a terminal");
  app.add_option("--sample", o.sample,
                 "sample N tokens: alone (with --init-from or --ckpt-dir) it generates instead of "
                 "training; with --sample-every it sets the length of training-time samples");
  app.add_option("--sample-every", o.sample_every, "print a sample every K training steps");
  app.add_option("--prompt", o.prompt, "text the samples continue");
  app.add_option("--hellaswag", o.hellaswag,
                 "HellaSwag JSONL scored during training (with --hellaswag-every)");
  app.add_option("--hellaswag-every", o.hellaswag_every,
                 "HellaSwag acc/acc_norm every K steps and after the last (0 = never)");
  app.add_option("--hellaswag-limit", o.hellaswag_limit,
                 "score only the first N HellaSwag examples (0 = all)");
  app.add_option("--temperature", o.temperature, "sampling temperature (0 = greedy)");
  app.add_option("--top-k", o.top_k, "sample among the K most likely tokens (0 = all)");
  // ---- data parallelism ----
  app.add_option("--reducer", o.reducer,
                 "gradient reducer: single (one process), mpi (data parallel on CPU, one rank "
                 "per process: mpirun -np N gpt_fineweb --reducer mpi ...), mpi-zero1 (the "
                 "same with the optimizer state sharded over the ranks, ZeRO-1), nccl (data "
                 "parallel with --device cuda, one rank per GPU, NCCL all-reduce) or "
                 "nccl-zero1 (the same with ZeRO-1 over NCCL); nccl and nccl-zero1 have never "
                 "run on a GPU")
      ->check(CLI::IsMember({"single", "mpi", "mpi-zero1", "nccl", "nccl-zero1"}));
  // ---- end data parallelism ----
  app.add_option("--vocab", o.vocab,
                 "directory with GPT-2 encoder.json and vocab.bpe (default $TRAINKIT_GPT2_VOCAB, "
                 "else the bundled vocab/gpt2)");
}

/// The trainer settings every device shares; the caller adds mfu.device_name, mfu.dtype,
/// meta["model"] and meta["device"].
inline trainkit::trainer_config make_trainer_config(const train_options& o) {
  trainkit::trainer_config tc;
  tc.steps = o.steps;
  tc.total_batch_tokens = o.total_batch_tokens;
  tc.batch_ramp = {o.batch_ramp_tokens, o.batch_ramp_steps};
  tc.schedule.kind = trainkit::optim::parse_schedule_kind(o.schedule);
  tc.schedule.max_lr = float(o.lr);
  tc.schedule.warmup_steps = o.warmup;
  tc.schedule.final_lr_frac = float(o.final_lr_frac);
  tc.grad_clip = float(o.grad_clip);
  tc.eval_every = o.eval_every;
  tc.eval_batches = o.eval_batches;
  tc.ckpt_every = o.ckpt_every;
  tc.ckpt_at_end = o.ckpt_mode != "none";
  tc.resume = o.resume;
  tc.mfu.calibrate = o.calibrate;
  tc.mfu.peak_tflops = o.peak_tflops;
  tc.output.metrics_path = o.metrics;
  tc.output.tensorboard_dir = o.tensorboard;
  tc.output.console.log_every = o.log_every;
  tc.output.console.progress_bar = !o.no_progress && ::isatty(STDOUT_FILENO);
  tc.meta["seed"] = std::to_string(o.seed);
  return tc;
}

}  // namespace gpt_fineweb
