// train_cuda.cu — gpt_fineweb's `--device cuda` composition:
//
//   trainer<mmap_token_source, prefetch::pinned<4>, gpt2_cuda, adamw_cuda, Checkpointer>
//
// with Checkpointer by --ckpt-mode: none (no_checkpoint), sync (sync_checkpointer behind
// host_staged_checkpointer, which copies device tensors to pinned memory before each write and
// back after a resume) or async (basic_asio_checkpointer<cuda_stager>: device→pinned copies on a
// side stream, written on a Boost.Asio thread; the trainer's compute stream is guarded so the next
// update waits for the snapshot on the device, not on the host). --init-from and --export read and
// write llm.c model files (llmc_file.hpp's span functions). Library errors propagate to main.cpp,
// which turns them into one line and exit code 2.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <trainkit/checkpoint/asio_checkpointer.hpp>
#include <trainkit/checkpoint/cuda_stager.hpp>
#include <trainkit/checkpoint/host_staged_checkpointer.hpp>
#include <trainkit/checkpoint/no_checkpoint.hpp>
#include <trainkit/checkpoint/sync_checkpointer.hpp>
#include <trainkit/core/cuda/device.hpp>
#include <trainkit/data/default_corpus.hpp>
#include <trainkit/data/mmap_token_source.hpp>
#include <trainkit/data/shard_format.hpp>
#include <trainkit/model/gpt2_cuda.hpp>
#include <trainkit/model/llmc_file.hpp>
#include <trainkit/optim/adamw_cuda.hpp>
#include <trainkit/prefetch/pinned_prefetcher.hpp>
#include <trainkit/trainer/report.hpp>
#include <trainkit/trainer/trainer.hpp>

#include "train_cuda.hpp"

namespace tk = trainkit;
namespace fs = std::filesystem;

static_assert(tk::optim::optimizer_for<tk::optim::adamw_cuda, tk::model::gpt2_cuda>);

namespace gpt_fineweb {
namespace {

/// The embedded corpus as llm.c shards in a fresh temporary directory, removed on every exit path
/// (the same files main.cpp writes for the CPU composition).
struct cuda_default_corpus {
  fs::path dir;
  cuda_default_corpus() {
    dir =
        fs::temp_directory_path() / ("trainkit-default-corpus-cuda-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    tk::data::write_shard((dir / "default_train_000000.bin").string(),
                          std::span<const std::uint16_t>(tk::data::default_corpus_tokens));
    tk::data::write_shard((dir / "default_val_000000.bin").string(),
                          std::span<const std::uint16_t>(tk::data::default_corpus_val_tokens));
  }
  cuda_default_corpus(const cuda_default_corpus&) = delete;
  cuda_default_corpus& operator=(const cuda_default_corpus&) = delete;
  ~cuda_default_corpus() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

template <class Checkpointer>
using cuda_trainer = tk::trainer<tk::data::mmap_token_source, tk::prefetch::pinned<4>,
                                 tk::model::gpt2_cuda, tk::optim::adamw_cuda, Checkpointer>;

/// Builds and runs the trainer; `prepare(trainer&)` runs once it exists (stream guards).
template <class Checkpointer, class Prepare>
int train_cuda_with(const train_options& o, Checkpointer checkpointer, Prepare prepare) {
  std::optional<cuda_default_corpus> corpus;
  std::string data = o.data, val = o.val;
  if (data.empty()) {
    corpus.emplace();
    data = (corpus->dir / "default_train_*.bin").string();
    if (val.empty()) val = (corpus->dir / "default_val_*.bin").string();
    std::cout << "no --data given: training on the embedded corpus ("
              << std::size(tk::data::default_corpus_tokens)
              << " tokens of Python documentation text)\n";
  }

  tk::model::gpt2_cuda_options mo;
  // Bit-reproducible kernels everywhere except flash attention, whose backward adds dQ with fp32
  // atomics (the model refuses flash with deterministic set).
  if (o.attention == "flash") {
    mo.attention = tk::model::gpt2_attention::flash;
    mo.deterministic = false;
  } else {
#if !defined(TRAINKIT_HAS_CUDNN_FRONTEND)
    if (o.attention == "cudnn")
      throw tk::config_error(
          "--attention cudnn: this gpt_fineweb was built without cuDNN attention (configure with "
          "-DTRAINKIT_GPT_FINEWEB_CUDNN=ON after pip install nvidia-cudnn-frontend)");
#endif
    mo.attention = o.attention == "cudnn" ? tk::model::gpt2_attention::cudnn
                                          : tk::model::gpt2_attention::naive;
    mo.deterministic = true;
  }
  mo.cuda_graph = o.cuda_graph;
  mo.batch_size = o.batch;  // size the activation arena once, up front
  mo.seq_len = o.seq;
  std::optional<tk::model::gpt2_cuda> model;
  if (!o.init_from.empty()) {
    const tk::model::gpt2_config file_cfg = tk::model::read_llmc_header(o.init_from);
    std::vector<float> params(file_cfg.num_parameters());
    tk::model::read_llmc_parameters<float>(o.init_from, file_cfg, std::span<float>(params));
    model.emplace(file_cfg, std::span<const float>(params), mo);
  } else {
    model.emplace(tk::model::gpt2_config::preset(o.model), o.seed, mo);
  }
  const tk::model::gpt2_config mc = model->config();
  if (o.seq > mc.max_seq_len)
    throw tk::config_error("--seq " + std::to_string(o.seq) + " exceeds the model's max_seq_len " +
                           std::to_string(mc.max_seq_len));

  tk::data::mmap_source_config train_cfg{data,
                                         o.batch,
                                         o.seq,
                                         mc.vocab_size,
                                         tk::data::parse_order(o.order),
                                         o.seed,
                                         o.layout_of(o.data)};
  std::optional<tk::data::mmap_token_source> val_source;
  if (!val.empty())
    val_source.emplace(tk::data::mmap_source_config{val, o.batch, o.seq, mc.vocab_size,
                                                    tk::data::order_kind::sequential, 0,
                                                    o.layout_of(o.val)});

  tk::trainer_config tc = make_trainer_config(o, mc.to_string());
  tc.device_name = model->device_name();
  tc.dtype = tk::compute_dtype::bf16;
  tc.meta["device"] = "cuda";
  const tk::optim::adamw_config ac = make_adamw_config(o);

  std::cout << "model " << mc.to_string() << " | " << model->num_parameters() << " parameters | "
            << model->device_name() << " | " << model->memory_report().to_string() << "\n";
  cuda_trainer<Checkpointer> t(tc, tk::data::mmap_token_source(train_cfg), std::move(val_source),
                               std::move(*model), ac, std::move(checkpointer));
  prepare(t);
  std::cout << "batch " << o.batch << "x" << o.seq << " | grad accumulation "
            << t.grad_accum_steps() << " | " << t.tokens_per_step() << " tokens/step | " << o.steps
            << " steps\n";
  const auto result = t.run();
  if (result.stopped) std::cout << "stopped by signal at step " << result.last_step << "\n";
  if (!result.steps.empty()) {
    std::cout << "---- report ----\n" << tk::format_summary(result.summary);
    if (!std::isnan(result.final_val_loss))
      std::printf("final val loss %.4f\n", result.final_val_loss);
  }
  if (t.model().matmul_fallbacks() > 0)
    std::cout << "note: " << t.model().matmul_fallbacks()
              << " GEMM epilogues ran through fallback kernels (no fused cuBLASLt algorithm)\n";
  if (!o.export_path.empty()) {
    std::vector<float> params(t.model().num_parameters());
    t.model().copy_parameters_to_host(params);
    tk::model::write_llmc_parameters<float>(o.export_path, mc, std::span<const float>(params));
    std::cout << "exported llm.c model file " << o.export_path << "\n";
  }
  return 0;
}

}  // namespace

int run_train_cuda(const train_options& o) {
  if (!tk::cuda::device_present()) throw tk::config_error("--device cuda: no CUDA device found");
  auto nothing = [](auto&) {};
  if (o.ckpt_mode == "none") return train_cuda_with(o, tk::checkpoint::no_checkpoint{}, nothing);
  if (o.ckpt_dir.empty())
    throw tk::config_error("--ckpt-mode " + o.ckpt_mode + " needs --ckpt-dir DIR");
  if (o.ckpt_mode == "sync")
    return train_cuda_with(
        o,
        tk::checkpoint::host_staged_checkpointer<tk::checkpoint::sync_checkpointer>(
            tk::checkpoint::sync_checkpointer({o.ckpt_dir, o.ckpt_keep})),
        nothing);
  using async_checkpointer = tk::checkpoint::basic_asio_checkpointer<tk::checkpoint::cuda_stager>;
  static_assert(tk::checkpoint::defers_snapshot<async_checkpointer>,
                "the trainer must call before_update so the update waits for the snapshot");
  return train_cuda_with(
      o,
      async_checkpointer(
          {.dir = o.ckpt_dir, .keep_last = o.ckpt_keep, .fail_on_error = o.ckpt_fatal}),
      [](auto& t) {
        // The snapshot's copies wait for this stream's work before them, and the next update
        // (after before_update) waits for the copies, on the device.
        t.checkpointer().stager().guard_stream(t.context().stream());
      });
}

}  // namespace gpt_fineweb
