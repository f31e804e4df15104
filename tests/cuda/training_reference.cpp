// tests/cuda/training_reference.cpp — g++ side of the end-to-end GPU training test: the CPU
// reference composition (Eigen) on the embedded corpus.
#include "training_reference.hpp"

#include <filesystem>
#include <span>

#include "../../examples/gpt_fineweb/data/default_corpus.hpp"
#include "trainkit/checkpoint/no_checkpoint.hpp"
#include "trainkit/core/bf16.hpp"
#include "trainkit/data/mmap_token_source.hpp"
#include "trainkit/data/shard_format.hpp"
#include "trainkit/model/gpt2/cpu.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/prefetch/threaded_prefetcher.hpp"
#include "trainkit/trainer/trainer.hpp"

namespace trainkit::test_ref {

std::string write_corpus_shard(const std::string& dir) {
  std::filesystem::create_directories(dir);
  const std::string path = (std::filesystem::path(dir) / "corpus_000000.bin").string();
  data::write_shard(path, std::span<const std::uint16_t>(gpt_fineweb::default_corpus_tokens));
  return path;
}

std::vector<double> cpu_training_losses(const training_setup& s) {
  const auto cfg = model::gpt2_config::preset(s.preset);
  model::gpt2_cpu m(cfg, s.seed);
  for (float& p : m.parameters()) p = bf16::from_float(p).to_float();

  trainer_config tc;
  tc.steps = s.steps;
  tc.schedule.kind = optim::schedule_kind::cosine;
  tc.schedule.max_lr = s.lr;
  tc.schedule.warmup_steps = s.warmup;
  tc.schedule.final_lr_frac = 0.1f;
  tc.ckpt_at_end = false;
  tc.output.console.quiet = true;
  tc.grad_clip = s.grad_clip;
  optim::adamw_config ac;
  ac.weight_decay = s.weight_decay;

  using cpu_trainer = trainer<data::mmap_token_source, prefetch::threaded<4>, model::gpt2_cpu,
                              optim::adamw_cpu, checkpoint::no_checkpoint>;
  data::mmap_source_config dc{s.shard, s.batch, s.seq, cfg.vocab_size, data::order_kind::sequential,
                              0};
  cpu_trainer t(tc, data::mmap_token_source(dc), std::nullopt, std::move(m), ac,
                checkpoint::no_checkpoint{});
  std::vector<double> losses;
  for (const auto& step : t.run().steps) losses.push_back(step.loss);
  return losses;
}

}  // namespace trainkit::test_ref
