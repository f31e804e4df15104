// tests/cuda/training_reference.hpp — the CPU side of the end-to-end GPU training test, compiled
// by g++ (training_reference.cpp): the embedded corpus as an llm.c shard, and the
// CPU composition's per-step losses on it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainkit::test_ref {

/// What both compositions train: a preset on `shard` (one llm.c shard, read in order).
struct training_setup {
  std::string shard;
  std::string preset = "d2";
  int batch = 4;
  int seq = 64;
  int steps = 50;
  std::uint64_t seed = 1337;
  float lr = 1e-3f;
  int warmup = 5;
  float weight_decay = 0.1f;
  float grad_clip = 1.0f;
};

/// Writes the embedded training corpus (examples/gpt_fineweb/data/default_corpus.hpp: 65764
/// GPT-2 tokens of Python documentation) as `dir`/corpus_000000.bin and returns the path.
std::string write_corpus_shard(const std::string& dir);

/// Per-step training losses of trainer<mmap_token_source, threaded<4>, gpt2_cpu, adamw_cpu,
/// no_checkpoint>, starting from gpt2_cpu's initialisation of `seed` rounded to bf16 (the
/// weights gpt2_cuda starts from).
std::vector<double> cpu_training_losses(const training_setup& s);

}  // namespace trainkit::test_ref
