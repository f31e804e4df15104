// asio_crash_child — the process test_checkpoint_crash kills with SIGKILL. It trains a small
// GPT-2 (gpt2_cpu + AdamW on synthetic data) with the asynchronous checkpointer saving after every
// step into argv[1], resuming from what the previous (killed) run left there, and never ends on
// its own: every moment of its life is inside, or a few milliseconds from, a background save.
// With --stop-on-signal it is the SIGINT test's child instead.
// A separate executable (not a fork of the test) because forking a process that already runs
// threads leaves the child with locks held by threads that do not exist in it.
#include <cstdio>
#include <exception>
#include <string_view>

#include <trainkit/checkpoint/asio_checkpointer.hpp>
#include <trainkit/trainkit.hpp>

namespace tk = trainkit;

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 3 && std::string_view(argv[2]) == "--stop-on-signal")) {
    std::fprintf(stderr, "usage: asio_crash_child CKPT_DIR [--stop-on-signal]\n");
    return 2;
  }
  // With --stop-on-signal, SIGINT/SIGTERM end the run as gpt_fineweb's do: the step in flight
  // finishes, the background write completes, a final checkpoint is written, exit 0.
  if (argc == 3) tk::install_stop_handlers();
  try {
    // ~120k parameters: params + two moments are ~1.4 MB per checkpoint, a few ms to write.
    const tk::model::gpt2_config model{.max_seq_len = 32,
                                       .vocab_size = 256,
                                       .padded_vocab_size = 256,
                                       .num_layers = 2,
                                       .num_heads = 2,
                                       .channels = 64};
    tk::trainer_config cfg;
    cfg.steps = 1'000'000;
    cfg.ckpt_every = 1;
    cfg.resume = true;
    cfg.output.console.quiet = true;
    cfg.meta["model"] = model.to_string();
    using trainer =
        tk::trainer<tk::data::synthetic_source, tk::prefetch::threaded<2>, tk::model::gpt2_cpu,
                    tk::optim::adamw_cpu, tk::checkpoint::asio_checkpointer>;
    trainer t(cfg,
              tk::data::synthetic_source(
                  {.batch_size = 2, .seq_len = 16, .vocab_size = 256, .alphabet = 32, .seed = 1}),
              std::nullopt, tk::model::gpt2_cpu(model, 1), tk::optim::adamw_config{},
              tk::checkpoint::asio_checkpointer({argv[1], 3}));
    t.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "asio_crash_child: %s\n", e.what());
    return 1;
  }
  return 0;
}
