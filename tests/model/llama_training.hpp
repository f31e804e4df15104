// tests/model/llama_training.hpp — a trainer around llama_cpu on the synthetic stream, shared by
// test_llama_training.cpp (resume through checkpoints) and test_llama_mpi.cpp (data parallel): the
// same trainer, optimizer, reducers and checkpointers GPT-2 runs with, none of them changed for the
// family. A small shape with GQA, SwiGLU and an untied head, so 8 steps take well under a second.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <ostream>
#include <sstream>
#include <vector>

#include "trainkit/data/synthetic_source.hpp"
#include "trainkit/model/llama/cpu.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/prefetch/threaded_prefetcher.hpp"
#include "trainkit/trainer/trainer.hpp"

namespace llama_test {

namespace tk = trainkit;

inline tk::model::llama_config small_llama() {
  tk::model::llama_config c;
  c.max_seq_len = 16;
  c.vocab_size = 100;
  c.padded_vocab_size = 128;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.channels = 64;
  c.hidden_size = 192;
  return c;
}

inline tk::data::synthetic_source synthetic(int B, int T, int rank = 0, int ranks = 1) {
  return tk::data::synthetic_source({.batch_size = B,
                                     .seq_len = T,
                                     .vocab_size = 100,
                                     .alphabet = 20,
                                     .branching = 2,
                                     .seed = 5,
                                     .rank = rank,
                                     .world_size = ranks});
}

struct run_record {
  std::vector<double> loss, grad_norm;
  std::vector<float> parameters;
  tk::run_result result;
};

/// Runs `t` to its end, or stops it after `stop_after` (> 0) steps as a signal does, recording
/// every step's loss and gradient norm and the parameters it ends with.
template <class Trainer>
run_record record_run(Trainer& t, int stop_after) {
  run_record r;
  t.on_step([&](const tk::step_metrics& m) {
    r.loss.push_back(m.loss);
    r.grad_norm.push_back(m.grad_norm);
    return stop_after <= 0 || m.step < std::uint64_t(stop_after);
  });
  r.result = t.run();
  const auto p = t.model().parameters();
  r.parameters.assign(p.begin(), p.end());
  return r;
}

constexpr int batch = 2, seq = 8;

/// `steps` optimizer steps of `micro_batches` micro-batches per rank; `stop_after` > 0 stops there
/// (as a signal does: final checkpoint written).
template <class Checkpointer, class Reducer>
run_record train(int rank, int ranks, int micro_batches, int steps, Checkpointer checkpointer,
                 Reducer reducer, bool resume = false, int stop_after = 0) {
  tk::trainer_config cfg;
  cfg.steps = steps;
  cfg.resume = resume;
  cfg.output.console.quiet = true;
  cfg.total_batch_tokens = std::size_t(micro_batches) * std::size_t(ranks) * batch * seq;
  cfg.schedule.kind = tk::optim::schedule_kind::cosine;
  cfg.schedule.warmup_steps = 2;
  cfg.schedule.max_lr = 3e-3f;
  cfg.meta["model"] = small_llama().to_string();
  cfg.grad_clip = 0.5f;  // small: clipping acts on every step
  tk::optim::adamw_config ac;
  std::ostringstream quiet;
  tk::trainer<tk::data::synthetic_source, tk::prefetch::threaded<2>, tk::model::llama_cpu,
              tk::optim::adamw_cpu, Checkpointer, Reducer>
      t(cfg, synthetic(batch, seq, rank, ranks), std::nullopt,
        tk::model::llama_cpu(small_llama(), 11), ac, std::move(checkpointer), std::move(reducer),
        quiet);
  return record_run(t, stop_after);
}

inline bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace llama_test
