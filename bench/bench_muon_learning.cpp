// bench_muon_learning — does Muon learn faster than AdamW? Steps to reach AdamW's best validation
// loss, AdamW at the best of 3 learning rates against the Muon family at its defaults.
//
// Goal (issue 27): Muon needs <= 0.8 × the steps AdamW needs to reach AdamW's best validation
// loss, d6 GPT-2 and d6 Llama (`--arch gpt2|llama`), the same data in the same order and the same
// tokens per step for every run.
//
// It prepares its own data from real text already on the machine — the plain-text files under
// /usr/share/doc (READMEs, changelogs, licences, manuals; each distinct text once) and the
// repository's docs/ and sources — tokenised with the bundled GPT-2 vocabulary into a training
// shard and a validation shard (every 20th document), and refuses to run when one epoch of the
// training shard would not cover the run (steps × tokens per step): every run sees fresh text at
// every step. Then it trains four runs with the trainer (gpt2_cpu or llama_cpu, sequential order,
// the same seed and initial weights): AdamW at 3 rates (1e-3, 2e-3, 4e-3; warmup then cosine to
// 10%) and muon_cpu with muon_config's defaults (Muon at 0.02 on the matrices; AdamW's half at the
// best AdamW run's rate and schedule, so the comparison is about the matrices), evaluating every
// --eval-every steps on the same validation batches. AdamW's best is the lowest validation loss of
// any AdamW run; its steps are the first evaluation at which that run reached it, Muon's the first
// evaluation at which Muon's validation loss was at or below it.
//
// Writes into OUT_DIR: data/ (the shards), curves.jsonl (run, lr, step, val_loss per evaluation),
// curves.svg (the validation curves), summary.txt (the table printed last). Every run's metrics go
// to OUT_DIR/<run>.jsonl as it trains, so it can run in the background and be watched:
//
//   nohup bench_muon_learning OUT_DIR [--arch gpt2|llama] [--model d6] [--steps 300] [--batch 8]
//        [--seq 256] [--eval-every 25] [--eval-batches 16] > OUT_DIR.log 2>&1 &
// d6 at 2,048 tokens per step takes a few seconds a step on 2 cores: ~1.5 h for the four runs;
// bench/RESULTS.md records both families at --steps 200 --batch 4 --seq 256 --eval-every 20
// --eval-batches 8 (~12 min a run on one core).
// --model d2 --steps 40 --eval-every 10 is a smoke run of a few minutes.
//
// --suite variants (issue 38, the speedrun recipe's optimizer parts): instead of the AdamW sweep,
// six Muon runs with the AdamW half at --adamw-lr (default 2e-3, the Llama d6 sweep's best):
// `muon` (the published Muon, the baseline), `variants` (Polar Express, NorMuon, cautious weight
// decay at Muon weight decay 0.05, and momentum warmed up 0.85 → 0.95 over the first sixth of the
// steps), and `variants` minus each part in turn (the ablation). The table gives each run's steps
// to reach the baseline's best validation loss and the ratio to the baseline's steps; curves to
// OUT_DIR/curves.svg as for the default suite (bench/recipes/ keeps the committed ones).
//   nohup bench_muon_learning bench-out/variants --arch llama --suite variants --steps 200
//        --batch 4 --seq 256 --eval-every 20 --eval-batches 8 > bench-out/variants.log 2>&1 &
//
// --suite recipe (issue 38, the speedrun recipe as a whole): the configurations the issue names,
// on the same data, tokens and evaluation: `adamw_gpt2` (AdamW on GPT-2 at --adamw-lr, the
// baseline), `muon_llama` (the published Muon on the Llama preset), `recipe` (the Llama block
// with every model part of the recipe on, and Muon with its variants and per-role rates:
// recipe_parts below) and `recipe` minus each part in turn (the ablation: value embeddings, U-net,
// logit cap, zero init, windows, the Muon variants, the per-role rates, ReLU² with QK-norm). The
// table gives each run's steps to the baseline's best validation loss, with the goals beside the
// figures: the recipe at <= 0.5x AdamW GPT-2's steps and <= 0.8x Muon Llama's. Then the speedrun
// measure: the recipe as the library defines it (its WSD schedule, no warm-up) trained from the
// start for only 0.5x AdamW's and 0.8x Muon Llama's steps to the target; does a run that short
// reach it? `--text corpus` trains on the embedded corpus of gpt_fineweb (the Python
// documentation topics, 65,764 training tokens) instead of the default text (plain text under
// /usr/share/doc and the repository's docs and sources): the issue asks for both. Its windows are
// visited in a seeded random order (--order random, this suite's default).
// `--only RUN,RUN` trains only those runs and reads the others back from their finished
// OUT_DIR/<run>.jsonl, so the suite can be split over two processes (each OMP_NUM_THREADS=1) and
// the table rebuilt at the end with `--only none` (d6: ~3.5 min a run on one idle Zen 5 core).
//   nohup bench_muon_learning bench-out/recipe-docs --suite recipe --model d6 --steps 200
//        --batch 4 --seq 256 --eval-every 20 --eval-batches 8 > bench-out/recipe-docs.log 2>&1 &
//   nohup bench_muon_learning bench-out/recipe-corpus --suite recipe --text corpus --model d6
//        --steps 60 --batch 4 --seq 256 --eval-every 6 --eval-batches 4 > ... &
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "trainkit/checkpoint/no_checkpoint.hpp"
#include "trainkit/data/mmap_token_source.hpp"
#include "trainkit/data/order.hpp"
#include "trainkit/data/shard_format.hpp"
#include "trainkit/model/gpt2/cpu.hpp"
#include "trainkit/model/llama/cpu.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/muon_cpu.hpp"
#include "trainkit/prefetch/threaded_prefetcher.hpp"
#include "trainkit/recipe/speedrun.hpp"
#include "trainkit/report/metrics_reader.hpp"
#include "trainkit/tokenizer/gpt2_tokenizer.hpp"
#include "trainkit/tokenizer/vocab_files.hpp"
#include "trainkit/trainer/trainer.hpp"

#include "../examples/gpt_fineweb/data/default_corpus.hpp"  // --text corpus: the embedded text

namespace {

namespace tk = trainkit;
namespace fs = std::filesystem;

struct options {
  fs::path out;
  std::string arch = "gpt2", model = "d6";
  int steps = 300, batch = 8, seq = 256, eval_every = 25, eval_batches = 16;
  float adamw_lrs[3] = {1e-3f, 2e-3f, 4e-3f};
  int warmup = 20;
  std::string suite = "muon";  // muon: AdamW sweep against Muon; variants: the Muon ablation
  float adamw_lr = 2e-3f;      // --suite variants/recipe: the AdamW (half's) rate (schedule's peak)
  std::string text = "docs";   // docs: /usr/share/doc + the repository; corpus: gpt_fineweb's
  // --only a,b: train only these runs; every other run of the suite is read back from
  // OUT_DIR/<run>.jsonl when a finished one is there (so one suite can be split over processes,
  // and the table rebuilt from finished runs with --only none).
  std::vector<std::string> only;
  // The training windows' order: sequential (llm.c's; the default of the muon and variants suites,
  // whose recorded figures used it) or random (a seeded permutation of every window; the recipe
  // suite's default: the docs text is documents sorted by path, so a sequential run of 1% of an
  // epoch trains on a few packages' files and is validated on all of them).
  std::string order;
};

struct curve {
  std::string name;
  float lr = 0;
  std::vector<std::pair<std::uint64_t, double>> val;  // (step, val_loss)
  std::vector<std::uint64_t> tokens;                  // tokens seen by each evaluation's step
};

// Text files under `root` (sorted, so the data does not depend on directory order): regular,
// uncompressed, 200 B to 2 MB, mostly printable.
std::vector<fs::path> text_files(const fs::path& root, const std::vector<std::string>& exts) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::exists(root, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(
           root, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const fs::path& p = it->path();
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    const auto size = it->file_size(ec);
    if (ec || size < 200 || size > (2u << 20)) continue;
    const std::string ext = p.extension().string();
    if (ext == ".gz" || ext == ".bz2" || ext == ".xz" || ext == ".png" || ext == ".jpg" ||
        ext == ".gif" || ext == ".pdf" || ext == ".svg" || ext == ".bin")
      continue;
    if (!exts.empty() && std::find(exts.begin(), exts.end(), ext) == exts.end()) continue;
    out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool mostly_text(const std::string& s) {
  std::size_t odd = 0;
  for (unsigned char c : s)
    if (c == 0 || (c < 32 && c != '\n' && c != '\t' && c != '\r')) ++odd;
  return odd * 100 < s.size();
}

// Tokenises every document (EOT before each, as the shard format wants) into train and val.
void prepare(const options& o, std::size_t& train_tokens, std::size_t& val_tokens) {
  const fs::path data = o.out / "data";
  fs::create_directories(data);
  if (fs::exists(data / "train_000.bin") && fs::exists(data / "val_000.bin")) {
    train_tokens = tk::data::read_shard_header((data / "train_000.bin").string()).token_count;
    val_tokens = tk::data::read_shard_header((data / "val_000.bin").string()).token_count;
    return;
  }
  if (o.text == "corpus") {  // already GPT-2 tokens, split 90/10 by tools/make_default_corpus.py
    const std::vector<std::uint16_t> train(std::begin(gpt_fineweb::default_corpus_tokens),
                                           std::end(gpt_fineweb::default_corpus_tokens));
    const std::vector<std::uint16_t> val(std::begin(gpt_fineweb::default_corpus_val_tokens),
                                         std::end(gpt_fineweb::default_corpus_val_tokens));
    tk::data::write_shard((data / "train_000.bin").string(), train);
    tk::data::write_shard((data / "val_000.bin").string(), val);
    train_tokens = train.size();
    val_tokens = val.size();
    std::printf("the embedded corpus: %zu training, %zu validation tokens\n", train_tokens,
                val_tokens);
    return;
  }
  const auto tok =
      tk::tokenizer::gpt2_tokenizer::from_directory(tk::tokenizer::resolve_vocab_dir(""));
  std::vector<fs::path> files = text_files("/usr/share/doc", {});
  for (const char* sub : {"docs", "include", "examples"}) {
    const auto more = text_files(fs::path(TRAINKIT_SOURCE_DIR) / sub, {".md", ".hpp", ".cpp"});
    files.insert(files.end(), more.begin(), more.end());
  }
  std::vector<std::uint16_t> train, val;
  const tk::tokenizer::encode_options enc{.on_invalid = tk::tokenizer::invalid_utf8::replace};
  std::size_t docs = 0;
  std::unordered_set<std::size_t> seen;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    // Licence texts repeat across packages: each distinct text once, so validation documents
    // are not copies of training ones.
    if (!mostly_text(text) || !seen.insert(std::hash<std::string>{}(text)).second) continue;
    std::vector<std::uint16_t>& into = docs++ % 20 == 19 ? val : train;
    into.push_back(std::uint16_t(tok.eot_token()));
    for (std::uint32_t id : tok.encode(text, enc)) into.push_back(std::uint16_t(id));
  }
  tk::data::write_shard((data / "train_000.bin").string(), train);
  tk::data::write_shard((data / "val_000.bin").string(), val);
  train_tokens = train.size();
  val_tokens = val.size();
  std::printf("prepared %zu documents from %zu files: %zu training, %zu validation tokens\n", docs,
              files.size(), train_tokens, val_tokens);
}

template <class Model>
Model make_model(const options& o) {
  if constexpr (std::is_same_v<Model, tk::model::gpt2_cpu>)
    return Model(tk::model::gpt2_config::preset(o.model), 1337);
  else
    return Model(tk::model::llama_config::preset(o.model), 1337);
}

template <class Model, class Optimizer>
curve train(const options& o, const std::string& name, float lr,
            typename Optimizer::config_type opt_config,
            const std::function<Model()>& model = nullptr,
            const std::function<void(tk::trainer_config&)>& tweak = nullptr) {
  tk::trainer_config cfg;
  cfg.steps = o.steps;
  cfg.schedule.kind = tk::optim::schedule_kind::cosine;
  cfg.schedule.max_lr = lr;
  cfg.schedule.warmup_steps = o.warmup;
  cfg.schedule.final_lr_frac = 0.1f;
  cfg.eval_every = o.eval_every;
  cfg.eval_batches = o.eval_batches;
  cfg.output.metrics_path = o.out / (name + ".jsonl");
  cfg.output.console.quiet = true;
  if (tweak) tweak(cfg);
  const std::string data = (o.out / "data").string();
  const tk::data::mmap_source_config train_data{
      data + "/train_*.bin", o.batch, o.seq, 50257, tk::data::parse_order(o.order), 1};
  tk::data::mmap_source_config val_data = train_data;
  val_data.pattern = data + "/val_*.bin";
  val_data.order = tk::data::order_kind::sequential;  // the same validation windows every time
  tk::trainer<tk::data::mmap_token_source, tk::prefetch::threaded<2>, Model, Optimizer,
              tk::checkpoint::no_checkpoint>
      t(cfg, tk::data::mmap_token_source(train_data), tk::data::mmap_token_source(val_data),
        model ? model() : make_model<Model>(o), opt_config, tk::checkpoint::no_checkpoint{});
  curve c{name, lr, {}, {}};
  std::uint64_t seen = 0;
  t.on_step([&](const tk::step_metrics& m) {
    seen += m.tokens;
    if (!std::isnan(m.val_loss)) {
      c.val.push_back({m.step, m.val_loss});
      c.tokens.push_back(seen);
      std::printf("  %-14s step %5llu  val %.4f\n", name.c_str(), (unsigned long long)m.step,
                  m.val_loss);
      std::fflush(stdout);
    }
    return true;
  });
  t.run();
  return c;
}

double min_val(const curve& c) {
  double b = std::numeric_limits<double>::infinity();
  for (const auto& p : c.val) b = std::min(b, p.second);
  return b;
}

// The first evaluation step at which `c` is at or below `loss`; 0 if never.
std::uint64_t steps_to(const curve& c, double loss) {
  for (const auto& [step, v] : c.val)
    if (v <= loss) return step;
  return 0;
}

// A finished run's curve read back from OUT_DIR/<name>.jsonl (the trainer's metrics, read by the
// report's reader); nullopt when the file is absent or the run did not reach `steps`.
std::optional<curve> load_curve(const options& o, const std::string& name, float lr, int steps) {
  const fs::path path = o.out / (name + ".jsonl");
  if (!fs::exists(path)) return std::nullopt;
  curve c{name, lr, {}, {}};
  std::uint64_t seen = 0;
  const tk::metrics_file file = tk::read_metrics_jsonl(path);
  for (const tk::step_metrics& m : file.steps) {
    seen += m.tokens;
    if (!std::isnan(m.val_loss)) {
      c.val.push_back({m.step, m.val_loss});
      c.tokens.push_back(seen);
    }
  }
  if (file.steps.empty() || file.steps.back().step != std::uint64_t(steps) || c.val.empty())
    return std::nullopt;
  return c;
}

bool trains_here(const options& o, const std::string& name) {
  return o.only.empty() || std::find(o.only.begin(), o.only.end(), name) != o.only.end();
}

// The run `name`: trained here (`run`), or, when --only leaves it out, read back from its metrics.
template <class Run>
std::optional<curve> obtain(const options& o, const std::string& name, float lr, int steps,
                            Run&& run) {
  if (trains_here(o, name)) return run();
  std::optional<curve> c = load_curve(o, name, lr, steps);
  std::printf("  %-14s %s\n", name.c_str(),
              c ? "read back from its finished metrics"
                : "not trained here (--only) and no finished metrics: left out");
  return c;
}

// OUT_DIR/curves.jsonl: one line per evaluation of every run (run, lr, step, tokens, val_loss).
void write_curves(const options& o, const std::vector<curve>& curves) {
  std::ofstream jl(o.out / "curves.jsonl");
  jl.precision(9);  // runs may agree to 6 digits (a d2 smoke's did at step 40)
  for (const curve& cv : curves)
    for (std::size_t i = 0; i < cv.val.size(); ++i)
      jl << "{\"run\":\"" << cv.name << "\",\"lr\":" << cv.lr << ",\"step\":" << cv.val[i].first
         << ",\"tokens\":" << cv.tokens[i] << ",\"val_loss\":" << cv.val[i].second << "}\n";
}

void write_svg(const fs::path& path, const std::string& title, const std::vector<curve>& curves) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, last = 1;
  for (const curve& c : curves)
    for (const auto& [s, v] : c.val) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      last = std::max(last, double(s));
    }
  const double W = 720, H = 420, L = 60, R = 170, T = 20, B = 40;
  auto x = [&](double s) { return L + (W - L - R) * s / last; };
  auto y = [&](double v) { return T + (H - T - B) * (hi - v) / std::max(hi - lo, 1e-9); };
  const char* colors[] = {"#9ecae1", "#4292c6", "#08519c", "#d62728", "#2ca02c",
                          "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                          "#bcbd22", "#17becf", "#000000", "#fdae6b"};  // the recipe suite's 13
  std::ofstream f(path);
  f << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' "
       "fill='white'/>\n";
  f << "<text x='" << L << "' y='14'>" << title
    << ": validation loss over optimizer steps</text>\n";
  for (int k = 0; k <= 4; ++k) {
    const double v = lo + (hi - lo) * k / 4;
    f << "<line x1='" << L << "' x2='" << W - R << "' y1='" << y(v) << "' y2='" << y(v)
      << "' stroke='#ddd'/><text x='4' y='" << y(v) + 4 << "'>" << std::round(v * 100) / 100
      << "</text>\n";
  }
  f << "<text x='" << (W - R) / 2 << "' y='" << H - 8 << "'>step (0 to " << last << ")</text>\n";
  for (std::size_t i = 0; i < curves.size(); ++i) {
    f << "<polyline fill='none' stroke-width='2' stroke='" << colors[i % std::size(colors)]
      << "' points='";
    for (const auto& [s, v] : curves[i].val) f << x(double(s)) << "," << y(v) << " ";
    f << "'/>\n<text x='" << W - R + 10 << "' y='" << T + 16 * (i + 1) << "' fill='"
      << colors[i % std::size(colors)] << "'>" << curves[i].name << "</text>\n";
  }
  f << "</svg>\n";
}

// --suite variants: the published Muon against its variants together and each left out.
int run_variants(const options& o) {
  tk::optim::muon_config base;
  base.lr_ratio = double(0.02f) / double(o.adamw_lr);  // Muon's 0.02 at the schedule's peak
  tk::optim::muon_config all = base;
  all.orthogonalizer = tk::optim::muon_orthogonalizer::polar_express;
  all.normuon = true;
  all.cautious_weight_decay = true;
  all.weight_decay = 0.05f;  // cautious decay needs a decay; "minus cautious" keeps it plain
  all.momentum_warmup_steps = std::max(1, o.steps / 6);
  std::vector<std::pair<std::string, tk::optim::muon_config>> runs{{"muon", base},
                                                                   {"variants", all}};
  tk::optim::muon_config c = all;
  c.orthogonalizer = tk::optim::muon_orthogonalizer::ns5;
  runs.push_back({"-polar", c});
  c = all;
  c.normuon = false;
  runs.push_back({"-normuon", c});
  c = all;
  c.cautious_weight_decay = false;
  runs.push_back({"-cautious", c});
  c = all;
  c.momentum_warmup_steps = 0;
  runs.push_back({"-warmup", c});
  std::vector<curve> curves;
  for (const auto& [name, config] : runs)
    curves.push_back(
        o.arch == "gpt2"
            ? train<tk::model::gpt2_cpu, tk::optim::muon_cpu>(o, name, o.adamw_lr, config)
            : train<tk::model::llama_cpu, tk::optim::muon_cpu>(o, name, o.adamw_lr, config));
  write_curves(o, curves);
  write_svg(o.out / "curves.svg",
            o.arch + " " + o.model + " Muon variants, " + std::to_string(o.batch * o.seq) +
                " tokens per step",
            curves);
  const double target = min_val(curves[0]);
  const std::uint64_t base_steps = steps_to(curves[0], target);
  std::ostringstream s;
  s << "bench_muon_learning --suite variants: " << o.arch << " " << o.model << ", " << o.steps
    << " steps of " << o.batch * o.seq << " tokens, AdamW half at " << o.adamw_lr << "\n"
    << "  target: the published Muon's best val loss " << target << " (step " << base_steps
    << ")\n";
  for (const curve& cv : curves) {
    const std::uint64_t st = steps_to(cv, target);
    s << "  " << cv.name << ": best " << min_val(cv) << ", steps to target "
      << (st == 0 ? std::string("never") : std::to_string(st));
    if (st != 0) s << " (" << double(st) / double(base_steps) << "x)";
    s << "\n";
  }
  std::fputs(s.str().c_str(), stdout);
  std::ofstream(o.out / "summary.txt") << s.str();
  return 0;
}

// --suite recipe: the speedrun recipe's parts at this model's depth, sequence length and run
// length: the library's one definition (trainkit::recipe::speedrun, recipe/speedrun.hpp, which
// gpt_fineweb's --recipe speedrun applies too), at this benchmark's AdamW (half) rate; its
// schedule and batch ramp are left out (every run here shares the benchmark's schedule and
// batch). Where each value comes from: docs/recipes.md.
struct recipe_parts {
  tk::model::llama_config block;  // the shape with the recipe's block (ReLU², QK-norm)
  tk::model::llama_recipe model;
  tk::optim::muon_config muon;
};

recipe_parts speedrun_parts(const options& o, const tk::model::llama_config& shape) {
  const tk::recipe::speedrun_settings s =
      tk::recipe::speedrun(shape, o.seq, o.steps, double(o.adamw_lr));
  recipe_parts r;
  r.block = s.model;
  r.block.recipe = {};
  r.model = s.model.recipe;
  r.muon = s.muon;
  return r;
}

int run_recipe(const options& o) {
  using tk::model::gpt2_cpu;
  using tk::model::llama_cpu;
  using tk::optim::adamw_cpu;
  using tk::optim::muon_cpu;
  const tk::model::llama_config shape = tk::model::llama_config::preset(o.model);
  const recipe_parts all = speedrun_parts(o, shape);
  tk::optim::muon_config published;
  published.lr_ratio = double(0.02f) / double(o.adamw_lr);
  std::vector<curve> curves;
  auto add = [&](std::optional<curve> c) {
    if (c) curves.push_back(std::move(*c));
  };
  const float lr = o.adamw_lr;
  add(obtain(o, "adamw_gpt2", lr, o.steps, [&] {
    return train<gpt2_cpu, adamw_cpu>(o, "adamw_gpt2", lr, tk::optim::adamw_config{});
  }));
  add(obtain(o, "muon_llama", lr, o.steps,
             [&] { return train<llama_cpu, muon_cpu>(o, "muon_llama", lr, published); }));
  // The recipe and each part left out: (name, the parts of that run).
  std::vector<std::pair<std::string, recipe_parts>> runs{{"recipe", all}};
  recipe_parts r = all;
  r.model.value_embeddings = 0;
  runs.push_back({"-value_embeds", r});
  r = all;
  r.model.unet_skips = false;
  runs.push_back({"-unet", r});
  r = all;
  r.model.logit_cap = 0.0f;
  runs.push_back({"-logit_cap", r});
  r = all;
  r.model.zero_init_projections = false;
  runs.push_back({"-zero_init", r});
  r = all;
  r.model.windows = {};
  runs.push_back({"-windows", r});
  r = all;  // the published Muon's matrix half (NS5, no NorMuon, no decay, no momentum warm-up)
  r.muon.orthogonalizer = published.orthogonalizer;
  r.muon.normuon = false;
  r.muon.cautious_weight_decay = false;
  r.muon.weight_decay = published.weight_decay;
  r.muon.momentum = published.momentum;
  r.muon.momentum_warmup_steps = 0;
  runs.push_back({"-muon_variants", r});
  r = all;  // one rate for every AdamW group (the schedule's), the recipe's betas and eps kept
  r.muon.adamw.lr_scales = {};
  runs.push_back({"-role_rates", r});
  r = all;  // the preset's block: SwiGLU at its width, no QK-norm
  r.block.mlp = shape.mlp;
  r.block.hidden_size = shape.hidden_size;
  r.block.qk_norm = shape.qk_norm;
  runs.push_back({"-relu2_qknorm", r});
  for (const auto& [name, parts] : runs) {
    tk::model::llama_config cfg = parts.block;
    cfg.recipe = parts.model;
    add(obtain(o, name, lr, o.steps, [&] {
      return train<llama_cpu, muon_cpu>(o, name, lr, parts.muon,
                                        [cfg] { return llama_cpu(cfg, 1337); });
    }));
  }
  auto find = [&](const std::string& name) -> const curve* {
    for (const curve& c : curves)
      if (c.name == name) return &c;
    return nullptr;
  };
  const curve* adamw = find("adamw_gpt2");
  const curve* muon = find("muon_llama");
  const curve* recipe = find("recipe");
  if (!adamw || !muon || !recipe) {
    std::printf("the table needs adamw_gpt2, muon_llama and recipe (finished or trained here)\n");
    write_curves(o, curves);
    return 0;
  }
  const double target = min_val(*adamw);
  const std::uint64_t adamw_steps = steps_to(*adamw, target);
  const std::uint64_t muon_steps = steps_to(*muon, target);
  // The speedrun measure: the recipe as the library defines it (its WSD schedule without warm-up,
  // windows and momentum warm-up over the shorter run) trained for the goal's share of the
  // baseline's steps, from the start: does a run that short reach the target?
  struct short_run {
    std::string name;
    std::uint64_t base;
    double share;
    int steps = 0;
  };
  std::vector<short_run> shorts{{"recipe@0.5xadamw", adamw_steps, 0.5},
                                {"recipe@0.8xmuon", muon_steps, 0.8}};
  for (short_run& sr : shorts) {
    sr.steps = int(std::floor(sr.share * double(sr.base)));
    if (sr.steps < 1) continue;
    const tk::recipe::speedrun_settings s =
        tk::recipe::speedrun(shape, o.seq, sr.steps, double(o.adamw_lr));
    add(obtain(o, sr.name, lr, sr.steps, [&] {
      return train<llama_cpu, muon_cpu>(
          o, sr.name, lr, s.muon, [m = s.model] { return llama_cpu(m, 1337); },
          [&](tk::trainer_config& cfg) {
            cfg.steps = sr.steps;
            cfg.schedule.kind = s.schedule;
            cfg.schedule.warmup_steps = s.warmup_steps;
            cfg.schedule.final_lr_frac = s.final_lr_frac;
          });
    }));
  }
  write_curves(o, curves);
  write_svg(o.out / "curves.svg",
            "llama " + o.model + " speedrun recipe (" + o.text + "), " +
                std::to_string(o.batch * o.seq) + " tokens per step",
            curves);
  std::ostringstream s;
  s << "bench_muon_learning --suite recipe: llama " << o.model << " (GPT-2 " << o.model
    << " for the baseline), text " << o.text << " (" << o.order << " order), " << o.steps
    << " steps of " << o.batch * o.seq << " tokens, AdamW (half) at " << o.adamw_lr << "\n"
    << "  target: AdamW GPT-2's best val loss " << target << " (step " << adamw_steps << ")\n"
    << "  steps to the target, every run under the benchmark's cosine schedule over " << o.steps
    << " steps:\n";
  for (const curve& cv : curves) {
    if (cv.name.find('@') != std::string::npos) continue;
    const std::uint64_t st = steps_to(cv, target);
    s << "  " << cv.name << ": best " << min_val(cv) << ", steps to target "
      << (st == 0 ? std::string("never") : std::to_string(st));
    if (st != 0 && adamw_steps != 0) s << " (" << double(st) / double(adamw_steps) << "x AdamW";
    if (st != 0 && muon_steps != 0) s << ", " << double(st) / double(muon_steps) << "x Muon Llama";
    if (st != 0) s << ")";
    s << "\n";
  }
  const std::uint64_t recipe_steps = steps_to(*recipe, target);
  auto goal = [&](const char* what, std::uint64_t base, double bound) {
    s << "  recipe / " << what << ": ";
    if (recipe_steps == 0 || base == 0) {
      s << (recipe_steps == 0 ? "the recipe never reached the target" : "no baseline figure")
        << "   goal <= " << bound << "x NOT met\n";
      return;
    }
    const double ratio = double(recipe_steps) / double(base);
    s << ratio << "x   goal <= " << bound << "x " << (ratio <= bound ? "(met)" : "(NOT met)")
      << "\n";
  };
  goal("AdamW GPT-2 steps", adamw_steps, 0.5);
  goal("Muon Llama steps", muon_steps, 0.8);
  s << "  the recipe with its own schedule (WSD, no warm-up), trained for the goal's share of the "
       "baseline's steps:\n";
  for (const short_run& sr : shorts) {
    const curve* c = find(sr.name);
    s << "  " << sr.name << " (" << sr.steps << " steps): ";
    if (!c) {
      s << "not run   goal NOT shown\n";
      continue;
    }
    const double best = min_val(*c);
    s << "best " << best << (best <= target ? " <= " : " > ") << "target " << target << "   goal "
      << (best <= target ? "(met)" : "(NOT met)") << "\n";
  }
  std::fputs(s.str().c_str(), stdout);
  std::ofstream(o.out / "summary.txt") << s.str();
  return 0;
}

int usage(const char* what) {
  std::fprintf(stderr,
               "bench_muon_learning: %s\nusage: bench_muon_learning OUT_DIR [--arch gpt2|llama] "
               "[--model d6] "
               "[--steps N] [--batch B] [--seq T] [--eval-every N] [--eval-batches N] "
               "[--suite muon|variants|recipe] [--adamw-lr X] [--text docs|corpus] "
               "[--only RUN,RUN] [--order sequential|random]\n",
               what);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--arch")
        o.arch = value();
      else if (a == "--model")
        o.model = value();
      else if (a == "--steps")
        o.steps = std::stoi(value());
      else if (a == "--batch")
        o.batch = std::stoi(value());
      else if (a == "--seq")
        o.seq = std::stoi(value());
      else if (a == "--eval-every")
        o.eval_every = std::stoi(value());
      else if (a == "--eval-batches")
        o.eval_batches = std::stoi(value());
      else if (a == "--suite")
        o.suite = value();
      else if (a == "--adamw-lr")
        o.adamw_lr = std::stof(value());
      else if (a == "--text")
        o.text = value();
      else if (a == "--order")
        o.order = value();
      else if (a == "--only") {
        std::stringstream names(value());
        for (std::string n; std::getline(names, n, ',');)
          if (!n.empty()) o.only.push_back(n);
      } else if (!a.empty() && a[0] != '-' && o.out.empty())
        o.out = a;
      else
        return usage(("unknown argument " + a).c_str());
    } catch (const std::exception& e) {
      return usage(e.what());
    }
  }
  if (o.out.empty()) return usage("OUT_DIR is required");
  if (o.arch != "gpt2" && o.arch != "llama")
    return usage(("--arch " + o.arch + ": not gpt2 or llama").c_str());
  if (o.suite != "muon" && o.suite != "variants" && o.suite != "recipe")
    return usage(("--suite " + o.suite + ": not muon, variants or recipe").c_str());
  if (o.order.empty()) o.order = o.suite == "recipe" ? "random" : "sequential";
  if (o.order != "sequential" && o.order != "random")
    return usage(("--order " + o.order + ": not sequential or random").c_str());
  if (!o.only.empty() && o.suite != "recipe")
    return usage("--only: only the recipe suite can be split over processes");
  if (o.text != "docs" && o.text != "corpus")
    return usage(("--text " + o.text + ": not docs or corpus").c_str());
  try {
    std::size_t train_tokens = 0, val_tokens = 0;
    prepare(o, train_tokens, val_tokens);
    const std::size_t needed = std::size_t(o.steps) * std::size_t(o.batch) * std::size_t(o.seq);
    if (train_tokens < needed + 1 || val_tokens < std::size_t(o.eval_batches * o.batch * o.seq + 1))
      return usage(("the text gives " + std::to_string(train_tokens) + " training tokens but " +
                    std::to_string(o.steps) + " steps need more than one epoch of " +
                    std::to_string(needed))
                       .c_str());
    std::printf(
        "%s %s, %d steps of %d tokens (%.0f%% of one epoch, %s order), eval every %d steps\n",
        o.arch.c_str(), o.model.c_str(), o.steps, o.batch * o.seq,
        100.0 * double(needed) / train_tokens, o.order.c_str(), o.eval_every);
    if (o.suite == "variants") return run_variants(o);
    if (o.suite == "recipe") return run_recipe(o);
    std::vector<curve> curves;
    for (float lr : o.adamw_lrs) {
      char name[32];
      std::snprintf(name, sizeof name, "adamw_%g", double(lr));
      curves.push_back(o.arch == "gpt2" ? train<tk::model::gpt2_cpu, tk::optim::adamw_cpu>(
                                              o, name, lr, tk::optim::adamw_config{})
                                        : train<tk::model::llama_cpu, tk::optim::adamw_cpu>(
                                              o, name, lr, tk::optim::adamw_config{}));
    }
    // Muon at its defaults on the matrices; AdamW's half at the rate of the best AdamW run, so the
    // comparison is about what Muon does to the matrices.
    const curve* best_adamw = &curves[0];
    for (const curve& c : curves)
      if (min_val(c) < min_val(*best_adamw)) best_adamw = &c;
    tk::optim::muon_config muon;
    muon.lr_ratio = double(0.02f) / double(best_adamw->lr);  // Muon's 0.02 at the schedule peak
    curves.push_back(
        o.arch == "gpt2"
            ? train<tk::model::gpt2_cpu, tk::optim::muon_cpu>(o, "muon", best_adamw->lr, muon)
            : train<tk::model::llama_cpu, tk::optim::muon_cpu>(o, "muon", best_adamw->lr, muon));

    write_curves(o, curves);
    write_svg(o.out / "curves.svg",
              o.arch + " " + o.model + ", " + std::to_string(o.batch * o.seq) + " tokens per step",
              curves);

    double best = std::numeric_limits<double>::infinity();
    const curve* best_run = nullptr;
    for (std::size_t i = 0; i < 3; ++i)
      for (const auto& [s, v] : curves[i].val)
        if (v < best) best = v, best_run = &curves[i];
    const std::uint64_t adamw_steps = steps_to(*best_run, best);
    const std::uint64_t muon_steps = steps_to(curves[3], best);
    std::ostringstream s;
    s << "bench_muon_learning: " << o.arch << " " << o.model << ", " << o.steps << " steps of "
      << o.batch * o.seq << " tokens\n";
    for (const curve& c : curves)
      s << "  " << c.name << ": final val " << (c.val.empty() ? NAN : c.val.back().second)
        << ", best " << min_val(c) << "\n";
    s << "  AdamW's best val loss " << best << " (" << best_run->name << ") at step " << adamw_steps
      << "\n";
    if (muon_steps == 0) {
      s << "  Muon never reached it: goal <= 0.8x NOT met\n";
    } else {
      const double ratio = double(muon_steps) / double(adamw_steps);
      s << "  Muon reached it at step " << muon_steps << ": " << ratio
        << "x AdamW's steps   goal <= 0.8x " << (ratio <= 0.8 ? "(met)" : "(NOT met)") << "\n";
    }
    std::fputs(s.str().c_str(), stdout);
    std::ofstream(o.out / "summary.txt") << s.str();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_muon_learning: %s\n", e.what());
    return 2;
  }
  return 0;
}
