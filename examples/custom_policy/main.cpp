// examples/custom_policy/main.cpp — trains a user-written model on a user-written data source.
//
// char_corpus (DataSource) and mlp_lm (Model) live in this folder, not in include/; the prefetcher,
// optimizer and checkpointer are the library's own. If this composes, trains and resumes, the
// policies really are independent of each other. Flags:
//   --steps N --batch B --seq T --lr X --seed N --text FILE
//   --ckpt-dir DIR --ckpt-every N --resume --stop-at N (stop after step N, as a signal would)
// Prints the first and last training loss and the final validation loss; exit code 2 on bad input.
#include <trainkit/trainkit.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "char_corpus.hpp"
#include "mlp_lm.hpp"

namespace tk = trainkit;
using custom_policy::char_corpus;
using custom_policy::mlp_lm;

// Two user policies between three shipped ones.
using char_trainer = tk::trainer<char_corpus, tk::prefetch::threaded<4>, mlp_lm,
                                 tk::optim::adamw_cpu, tk::checkpoint::sync_checkpointer>;

namespace {

struct options {
  int steps = 150;
  int batch = 16;
  int seq = 64;
  float lr = 3e-3f;
  std::uint64_t seed = 1;
  std::string text_file;
  std::string ckpt_dir = "custom_policy_ckpt";
  int ckpt_every = 0;
  bool resume = false;
  int stop_at = 0;  // 0 = run to --steps
  bool quiet = false;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw tk::config_error(std::string(a) + " needs a value");
      return argv[++i];
    };
    auto number = [&]() -> long long {
      const std::string v = value();
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 0)
        throw tk::config_error(std::string(a) + ": expected a non-negative integer, got '" + v +
                               "'");
      return n;
    };
    if (a == "--steps")
      o.steps = int(number());
    else if (a == "--batch")
      o.batch = int(number());
    else if (a == "--seq")
      o.seq = int(number());
    else if (a == "--lr")
      o.lr = std::stof(value());
    else if (a == "--seed")
      o.seed = std::uint64_t(number());
    else if (a == "--text")
      o.text_file = value();
    else if (a == "--ckpt-dir")
      o.ckpt_dir = value();
    else if (a == "--ckpt-every")
      o.ckpt_every = int(number());
    else if (a == "--resume")
      o.resume = true;
    else if (a == "--stop-at")
      o.stop_at = int(number());
    else if (a == "--quiet")
      o.quiet = true;
    else if (a == "--help" || a == "-h") {
      std::puts(
          "custom_policy [--steps N] [--batch B] [--seq T] [--lr X] [--seed N] [--text FILE]\n"
          "              [--ckpt-dir DIR] [--ckpt-every N] [--resume] [--stop-at N] [--quiet]");
      std::exit(0);
    } else {
      throw tk::config_error("unknown flag '" + std::string(a) + "' (see --help)");
    }
  }
  return o;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw tk::io_error("--text: cannot open '" + path + "'");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

int main(int argc, char** argv) try {
  const options o = parse(argc, argv);
  const std::string text =
      o.text_file.empty() ? std::string(custom_policy::default_text) : read_text(o.text_file);
  // The last tenth of the text is held out for validation.
  const std::size_t split = text.size() - text.size() / 10;
  const custom_policy::char_corpus_config shape{.batch_size = o.batch, .seq_len = o.seq};

  tk::trainer_config cfg;
  cfg.steps = o.steps;
  cfg.schedule = {.kind = tk::optim::schedule_kind::cosine,
                  .max_lr = o.lr,
                  .warmup_steps = 10,
                  .final_lr_frac = 0.1f};
  cfg.grad_clip = 1.0f;  // global gradient-norm clipping: the trainer's, not the optimizer's
  cfg.eval_every = 100;
  cfg.eval_batches = 4;
  cfg.ckpt_every = o.ckpt_every;
  cfg.resume = o.resume;
  cfg.output.console = {.log_every = 50, .quiet = o.quiet};
  cfg.meta["model"] = "mlp_lm";  // resume refuses a checkpoint written for another model

  char_trainer trainer(cfg, char_corpus(std::string_view(text).substr(0, split), shape),
                       char_corpus(std::string_view(text).substr(split), shape),
                       mlp_lm(custom_policy::mlp_lm_config{}, o.seed),
                       tk::optim::adamw_config{.weight_decay = 0.01f},
                       tk::checkpoint::sync_checkpointer({o.ckpt_dir, /*keep_last=*/2}));
  if (o.stop_at > 0)
    trainer.on_step([&](const tk::step_metrics& m) { return m.step < std::uint64_t(o.stop_at); });

  const tk::run_result r = trainer.run();
  if (r.steps.empty()) {
    std::printf("nothing to do: already at step %llu of %d\n", (unsigned long long)r.last_step,
                o.steps);
    return 0;
  }
  // %.9g prints a float exactly, so a test can compare a resumed run with an uninterrupted one.
  std::printf("steps %llu..%llu%s | first loss %.9g | last loss %.9g | val loss %.9g\n",
              (unsigned long long)r.first_step, (unsigned long long)r.last_step,
              r.resumed ? " (resumed)" : "", r.steps.front().loss, r.steps.back().loss,
              r.final_val_loss);
  if (!o.quiet) std::cout << tk::format_summary(r.summary);
  return 0;
} catch (const tk::error& e) {
  std::fprintf(stderr, "custom_policy: %s\n", e.what());
  return 2;
} catch (const std::exception& e) {
  std::fprintf(stderr, "custom_policy: %s\n", e.what());
  return 2;
}
