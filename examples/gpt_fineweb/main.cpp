// gpt_fineweb — the flagship example: train GPT-2 on FineWeb shards (or the embedded corpus),
// tokenize text into shards (`prepare`, prepare.hpp), summarise any metrics file (`report`), and
// convert model files to and from Hugging Face folders (`export-hf`, `import-hf`, hf_commands.hpp),
// and score a model on HellaSwag (`eval`, eval_command.hpp).
//
// Library code throws; this program turns a trainkit::config_error / format_error / io_error (a
// bad flag, a bad or unreadable file) into one line on stderr and exit code 2. The
// composition is the CPU reference one (issue: CUDA policies arrive with --device cuda).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <trainkit/checkpoint/asio_checkpointer.hpp>
#include <trainkit/data/default_corpus.hpp>
#include <trainkit/model/sampling.hpp>
#include <trainkit/report/chart.hpp>
#include <trainkit/report/metrics_reader.hpp>
#include <trainkit/tokenizer/gpt2_tokenizer.hpp>
#include <trainkit/tokenizer/vocab_files.hpp>
#include <trainkit/trainkit.hpp>

#include "eval_command.hpp"
#include "flag_names.hpp"
#include "hellaswag_log.hpp"
#include "hf_commands.hpp"
#include "prepare.hpp"
#include "train_options.hpp"
#include "verify.hpp"
#if defined(TRAINKIT_HAS_CUDA)
#include "train_cuda.hpp"
#endif

#if defined(_OPENMP)
#include <omp.h>
#endif

// ---- data parallelism (--reducer mpi; built where CMake found MPI) ----
#if defined(TRAINKIT_HAS_MPI)
#include <trainkit/optim/zero1_adamw_cpu.hpp>
#include <trainkit/reduce/mpi_allreduce.hpp>
#include <trainkit/reduce/mpi_session.hpp>
#include <trainkit/reduce/mpi_zero1.hpp>
#endif
// ---- end data parallelism ----

namespace tk = trainkit;
namespace fs = std::filesystem;

namespace gpt_fineweb {

/// Writes the embedded corpus as llm.c shards in a fresh temporary directory, so the run with no
/// --data goes through the same mmap'd-shard path as a real one.
inline fs::path write_default_corpus() {
  const fs::path dir =
      fs::temp_directory_path() / ("trainkit-default-corpus-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  tk::data::write_shard((dir / "default_train_000000.bin").string(),
                        std::span<const std::uint16_t>(tk::data::default_corpus_tokens));
  tk::data::write_shard((dir / "default_val_000000.bin").string(),
                        std::span<const std::uint16_t>(tk::data::default_corpus_val_tokens));
  return dir;
}

/// Samples text from a trained model: the tokenizer, the prompt's tokens and the settings.
struct sampler {
  tk::tokenizer::gpt2_tokenizer tokenizer;
  std::vector<std::int32_t>
      prompt;  // <|endoftext|> then the --prompt text, as GPT-2 starts a document
  tk::model::sampling_config settings;
  int length = 0;

  static sampler from_options(const train_options& o) {
    sampler s{
        tk::tokenizer::gpt2_tokenizer::from_directory(tk::tokenizer::resolve_vocab_dir(o.vocab)),
        {},
        {float(o.temperature), o.top_k, o.seed},
        o.sample};
    s.settings.validate();
    s.prompt.push_back(std::int32_t(s.tokenizer.eot_token()));
    for (auto id : s.tokenizer.encode(o.prompt)) s.prompt.push_back(std::int32_t(id));
    return s;
  }

  /// The prompt and its sampled continuation, decoded (a seed per call keeps samples different).
  template <class Model>
  std::string operator()(Model& model, std::uint64_t seed_offset = 0) const {
    auto cfg = settings;
    cfg.seed += seed_offset;
    const auto out = tk::model::generate(model, prompt, length, cfg);
    std::vector<std::uint32_t> ids(prompt.begin() + 1, prompt.end());
    for (auto t : out) ids.push_back(std::uint32_t(t));
    return tokenizer.decode(std::span<const std::uint32_t>(ids));
  }
};

/// The CPU model --init-from (an llm.c file) or --init-from-hf (a Hugging Face folder) names;
/// empty when neither is given.
std::optional<tk::model::gpt2_cpu> model_from_file(const train_options& o) {
  if (!o.init_from.empty()) return tk::model::load_llmc_gpt2_cpu<float>(o.init_from);
  if (!o.init_from_hf.empty()) return tk::model::load_hf_gpt2_cpu(o.init_from_hf);
  return std::nullopt;
}

/// `--sample N` without training: a model from --init-from or the newest checkpoint in --ckpt-dir.
int run_sample(const train_options& o) {
  if (o.init_from.empty() && o.init_from_hf.empty() && o.ckpt_dir.empty())
    throw tk::config_error(
        "--sample needs a trained model: --init-from FILE, --init-from-hf DIR or --ckpt-dir DIR");
  const auto s = sampler::from_options(o);
  std::optional<tk::model::gpt2_cpu> model = model_from_file(o);
  if (!model) {
    model.emplace(tk::model::gpt2_config::preset(o.model), o.seed);
    tk::checkpoint::checkpoint_state state;
    state.tensors = model->state();     // the model's tensors only: optimizer state is not needed
    std::vector<std::string> warnings;  // read only: a checkpointer would check it can write
    if (!tk::checkpoint::load_latest_checkpoint(o.ckpt_dir, state, warnings))
      throw tk::config_error("--ckpt-dir " + o.ckpt_dir + ": no valid checkpoint to sample from");
    for (const auto& w : warnings) std::cerr << "warning: " << w << "\n";
    const auto it = state.meta.find("model");
    if (it != state.meta.end() && it->second != model->config().to_string())
      throw tk::config_error("--ckpt-dir " + o.ckpt_dir + " holds model '" + it->second +
                             "', not --model " + o.model);
    std::cout << "sampling from the checkpoint of step " << state.step << "\n";
  }
  std::cout << s(*model) << "\n";
  return 0;
}

/// Removes the temporary corpus directory on every exit path.
struct scoped_dir {
  fs::path path;
  ~scoped_dir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

/// The end-of-run chart: --chart, or <metrics>.svg beside --metrics. It is drawn from the
/// metrics file when there is one, so a resumed run's chart shows the whole run.
inline void write_run_chart(const train_options& o, const std::vector<tk::step_metrics>& steps) {
  fs::path chart = o.chart;
  if (chart.empty() && !o.metrics.empty()) chart = fs::path(o.metrics).replace_extension(".svg");
  if (chart.empty()) return;
  const std::string title = "gpt_fineweb " + o.model + " (" + o.device + ")";
  if (!o.metrics.empty()) {
    const auto file = tk::read_metrics_jsonl(o.metrics);
    tk::write_chart_svg(chart, file.steps, {.title = title});
  } else {
    tk::write_chart_svg(chart, steps, {.title = title});
  }
  std::cout << "chart: " << chart.string() << "\n";
}

/// Rank r of a data-parallel run prints nothing on stdout (rank 0 speaks for all); stderr stays.
struct mute_stdout_unless_rank_zero {
  bool muted;
  explicit mute_stdout_unless_rank_zero(int rank) : muted(rank != 0) {
    if (muted) std::cout.setstate(std::ios::badbit);
  }
  ~mute_stdout_unless_rank_zero() {
    if (muted) std::cout.clear();
  }
};

template <class Checkpointer, class Reducer = tk::reduce::single,
          class Optimizer = tk::optim::adamw_cpu>
int train_with(const train_options& o, Checkpointer checkpointer, Reducer reducer = {}) {
  using cpu_trainer = tk::trainer<tk::data::mmap_token_source, tk::prefetch::threaded<4>,
                                  tk::model::gpt2_cpu, Optimizer, Checkpointer, Reducer>;
  // ---- data parallelism: rank r reads its slice of every round of batches ----
  const int rank = reducer.rank(), ranks = reducer.world_size();
  const mute_stdout_unless_rank_zero mute(rank);
  // ---- end data parallelism ----
  scoped_dir default_corpus;
  std::string data = o.data, val = o.val;
  if (data.empty()) {
    default_corpus.path = write_default_corpus();
    data = (default_corpus.path / "default_train_*.bin").string();
    if (val.empty()) val = (default_corpus.path / "default_val_*.bin").string();
    std::cout << "no --data given: training on the embedded corpus ("
              << std::size(tk::data::default_corpus_tokens)
              << " tokens of Python documentation text)\n";
  }

  // The model: from an llm.c file (--init-from), a Hugging Face folder (--init-from-hf) or
  // freshly initialised from a preset.
  std::optional<tk::model::gpt2_cpu> model = model_from_file(o);
  if (!model) model.emplace(tk::model::gpt2_config::preset(o.model), o.seed);
  const auto& mc = model->config();
  if (o.seq > mc.max_seq_len)
    throw tk::config_error("--seq " + std::to_string(o.seq) + " exceeds the model's max_seq_len " +
                           std::to_string(mc.max_seq_len));

  tk::data::mmap_source_config train_cfg{data,
                                         o.batch,
                                         o.seq,
                                         mc.vocab_size,
                                         tk::data::parse_order(o.order),
                                         o.seed,
                                         o.layout_of(o.data),
                                         rank,
                                         ranks};
  std::optional<tk::data::mmap_token_source> val_source;
  if (!val.empty())
    val_source.emplace(tk::data::mmap_source_config{val, o.batch, o.seq, mc.vocab_size,
                                                    tk::data::order_kind::sequential, 0,
                                                    o.layout_of(o.val), rank, ranks});

  tk::trainer_config tc = make_trainer_config(o, mc.to_string());
  tc.device_name = "cpu";
  const tk::optim::adamw_config ac = make_adamw_config(o);

  std::cout << "model " << mc.to_string() << " | " << model->num_parameters() << " parameters\n";
  cpu_trainer t(tc, tk::data::mmap_token_source(train_cfg), std::move(val_source),
                std::move(*model), ac, std::move(checkpointer), std::move(reducer));
  std::cout << "batch " << o.batch << "x" << o.seq << " | grad accumulation "
            << t.grad_accum_steps() << " | " << t.tokens_per_step() << " tokens/step | " << o.steps
            << " steps\n";
  if (ranks > 1)
    std::cout << ranks << " ranks (--reducer " << o.reducer << ") | optimizer state "
              << tk::detail::format("%.2f", double(t.optimizer().state_bytes()) / (1 << 20))
              << " MiB per rank\n";
  // Samples and HellaSwag come from rank 0 alone (every rank holds the same weights).
  std::optional<sampler> samples;
  if (o.sample_every > 0 && rank == 0) samples.emplace(sampler::from_options(o));
  std::optional<hellaswag_scorer> hellaswag;
  std::optional<std::ofstream> hellaswag_log;  // <metrics stem>.hellaswag.jsonl beside --metrics
  std::optional<tk::tensorboard_writer> hellaswag_tb;  // <--tensorboard>/hellaswag/
  std::vector<hellaswag_point> hellaswag_points;       // this run's, for the report
  auto score_hellaswag = [&](std::uint64_t step) {
    const auto r = (*hellaswag)(t.model());
    std::cout << "hellaswag at step " << step << ": " << format_hellaswag(r) << "\n";
    const hellaswag_point p = hellaswag_point_of(step, r);
    hellaswag_points.push_back(p);
    if (hellaswag_log) {
      *hellaswag_log << hellaswag_log_line(p) << "\n" << std::flush;
      if (!*hellaswag_log) throw tk::io_error("writing the HellaSwag log beside " + o.metrics);
    }
    if (hellaswag_tb)
      hellaswag_tb->write_scalars(
          std::int64_t(step),
          {{"eval/hellaswag_acc", float(p.acc)}, {"eval/hellaswag_acc_norm", float(p.acc_norm)}});
  };
  if (o.hellaswag_every > 0 && rank == 0) {
    hellaswag.emplace(o.hellaswag, o.vocab, o.hellaswag_limit);
    if (!o.metrics.empty()) {
      const fs::path path = hellaswag_log_path(o.metrics);
      hellaswag_log.emplace(path, std::ios::app);
      if (!*hellaswag_log) throw tk::io_error("cannot open " + path.string() + " for writing");
    }
    // A folder of its own: TensorBoard shows it as a run beside the training run's scalars, and
    // its reader never has two event files of one run growing at once.
    if (!o.tensorboard.empty()) hellaswag_tb.emplace(fs::path(o.tensorboard) / "hellaswag");
  }
  if (samples || hellaswag) {
    t.on_step([&](const tk::step_metrics& m) {
      if (samples && m.step % std::uint64_t(o.sample_every) == 0)
        std::cout << "---- sample at step " << m.step << " ----\n"
                  << (*samples)(t.model(), m.step) << "\n----\n";
      if (hellaswag && m.step % std::uint64_t(o.hellaswag_every) == 0) score_hellaswag(m.step);
      return true;
    });
  }
  const auto result = t.run();
  // The last step was scored by the callback when it is a multiple of K.
  if (hellaswag && !result.steps.empty() &&
      result.last_step % std::uint64_t(o.hellaswag_every) != 0)
    score_hellaswag(result.last_step);
  if (result.stopped) std::cout << "stopped by signal at step " << result.last_step << "\n";
  if (!result.steps.empty()) {
    std::cout << "---- report ----\n" << tk::format_summary(result.summary);
    if (!std::isnan(result.final_val_loss))
      std::printf("final val loss %.4f\n", result.final_val_loss);
    if (!hellaswag_points.empty()) std::cout << format_hellaswag_log(hellaswag_points);
    if (rank == 0) write_run_chart(o, result.steps);
  }
  if (!o.export_hf.empty() && rank == 0)
    export_hf_after_training(o.export_hf, o.export_hf_dtype, o.vocab, t.model(), std::cout);
  if (!o.export_path.empty() && rank == 0) {
    tk::model::save_llmc_model(o.export_path, t.model());
    std::cout << "exported llm.c model file " << o.export_path << "\n";
  }
  return 0;
}

// ---- data parallelism: --reducer mpi ----
#if defined(TRAINKIT_HAS_MPI)
/// The kind of failure, as main() words it.
inline const char* failure_kind(const std::exception& e) {
  if (dynamic_cast<const tk::io_error*>(&e)) return "I/O error: ";
  if (dynamic_cast<const tk::config_error*>(&e) || dynamic_cast<const tk::format_error*>(&e))
    return "error: ";
  return "fatal: ";
}

/// One rank of `mpirun -np N gpt_fineweb --reducer mpi ...`. Every rank trains on its slice of
/// each global batch; rank 0 writes the console, metrics, TensorBoard, checkpoints and exports.
/// An exception on any rank is printed with the rank and ends the whole job with MPI_Abort:
/// the other ranks would otherwise wait forever in their next collective.
int run_train_mpi(const train_options& o) {
  tk::reduce::mpi_session mpi;
  const int rank = mpi.world_rank(), ranks = mpi.world_size();
  // mpirun passes SIGUSR1 on to every rank (a SIGTERM to mpirun ends the ranks before a final
  // checkpoint): here it is a stop request like SIGTERM to one rank.
  std::signal(SIGUSR1, [](int sig) { tk::request_stop(sig); });
  try {
    if (o.reducer == "mpi-zero1")  // ZeRO-1; train_options::validate refuses checkpoints
      return train_with<tk::checkpoint::no_checkpoint, tk::reduce::mpi_zero1,
                        tk::optim::zero1_adamw_cpu>(o, {}, tk::reduce::mpi_zero1{});
    tk::reduce::mpi_allreduce reducer;
    // Constructing a checkpointer removes crashed saves' temporaries: rank 0 first, alone.
    auto rank_zero_first = [&](auto make) {
      if (rank != 0) tk::reduce::detail::check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
      auto c = make();
      if (rank == 0) tk::reduce::detail::check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
      return c;
    };
    if (o.ckpt_mode == "none")
      return train_with(o, tk::checkpoint::no_checkpoint{}, std::move(reducer));
    if (o.ckpt_dir.empty())
      throw tk::config_error("--ckpt-mode " + o.ckpt_mode + " needs --ckpt-dir DIR");
    if (o.ckpt_mode == "sync")
      return train_with(o, rank_zero_first([&] {
                          return tk::checkpoint::sync_checkpointer({o.ckpt_dir, o.ckpt_keep});
                        }),
                        std::move(reducer));
    return train_with(
        o, rank_zero_first([&] {
          return tk::checkpoint::asio_checkpointer(
              {.dir = o.ckpt_dir, .keep_last = o.ckpt_keep, .fail_on_error = o.ckpt_fatal});
        }),
        std::move(reducer));
  } catch (const std::exception& e) {
    if (ranks == 1) throw;  // main() reports it, and MPI finalises normally
    std::cerr << "gpt_fineweb: rank " << rank << " of " << ranks << ": " << failure_kind(e)
              << e.what() << "\n"
              << std::flush;
    MPI_Abort(MPI_COMM_WORLD, 2);
    throw;  // not reached: MPI_Abort ends the process
  }
}
#else
inline int run_train_mpi(const train_options&) {
  throw tk::config_error(
      "--reducer mpi: this build has no MPI (CMake found none, or "
      "TRAINKIT_MPI was OFF)");
}
#endif
// ---- end data parallelism ----

int run_train(const train_options& o) {
  o.validate();
#if defined(_OPENMP)
  if (o.threads > 0) omp_set_num_threads(o.threads);
#endif
  // Sampling runs the CPU model (gpt2_cuda has no forward_logits yet), also after a CUDA run.
  if (o.sample > 0 && o.sample_every == 0) return run_sample(o);
  if (o.device == "cuda" && o.sample_every > 0)
    throw tk::config_error(
        "--sample-every: samples during training need --device cpu for now; "
        "sample afterwards with --sample N --ckpt-dir DIR or --init-from FILE");
  if (o.device == "cuda") {
#if defined(TRAINKIT_HAS_CUDA)
    const int rc = run_train_cuda(o);                           // train_cuda.cu
    if (rc == 0 && !o.metrics.empty()) write_run_chart(o, {});  // the chart reads the metrics file
    return rc;
#else
    throw tk::config_error(
        "--device cuda: this build has no CUDA support (nvcc was not found "
        "when it was configured)");
#endif
  }
  if (o.sample > 0 && o.sample_every == 0) return run_sample(o);
  if (o.reducer != "single") return run_train_mpi(o);  // data parallelism
  if (o.ckpt_mode == "none") return train_with(o, tk::checkpoint::no_checkpoint{});
  if (o.ckpt_dir.empty())
    throw tk::config_error("--ckpt-mode " + o.ckpt_mode + " needs --ckpt-dir DIR");
  if (o.ckpt_mode == "sync")
    return train_with(o, tk::checkpoint::sync_checkpointer({o.ckpt_dir, o.ckpt_keep}));
  // async: saves snapshot the state and write it on a background thread; run() waits for the
  // last one before it returns, also after SIGINT/SIGTERM.
  return train_with(
      o, tk::checkpoint::asio_checkpointer(
             {.dir = o.ckpt_dir, .keep_last = o.ckpt_keep, .fail_on_error = o.ckpt_fatal}));
}

/// `gpt_fineweb report METRICS.jsonl [--svg FILE]`: the end-of-run report for any metrics file,
/// a crashed run's included (its cut-off last line is skipped with a warning).
int run_report(const std::string& path, const std::string& svg) {
  const auto file = tk::read_metrics_jsonl(path);
  for (const auto& w : file.warnings) std::cerr << "gpt_fineweb: warning: " << w << "\n";
  if (file.steps.empty()) throw tk::format_error(path + ": no step lines");
  std::cout << tk::format_summary(tk::summarize(file.steps));
  // HellaSwag scored during that run (--hellaswag-every) sits beside the metrics file.
  if (const fs::path hs = hellaswag_log_path(path); fs::exists(hs))
    std::cout << format_hellaswag_log(read_hellaswag_log(hs));
  if (!svg.empty()) {
    tk::write_chart_svg(svg, file.steps, {.title = fs::path(path).filename().string()});
    std::cout << "chart: " << svg << "\n";
  }
  return 0;
}

}  // namespace gpt_fineweb

int main(int argc, char** argv) {
  using namespace gpt_fineweb;
  CLI::App app{
      "gpt_fineweb — train GPT-2 with trainkit (CPU reference composition)\n"
      "With no subcommand it trains; with no --data it trains on an embedded corpus."};
  app.set_version_flag("--version", std::string("trainkit ") + TRAINKIT_VERSION_STRING);
  train_options train;
  add_train_options(app, train);
  prepare_options prep;
  auto* prepare = app.add_subcommand("prepare", "Tokenize text / JSONL into llm.c token shards");
  add_prepare_options(*prepare, prep);
  std::string report_path, report_svg;
  auto* report =
      app.add_subcommand("report", "Summarise a metrics JSONL file (even a crashed run's)");
  report->add_option("metrics", report_path, "metrics file written by --metrics")->required();
  report->add_option("--svg", report_svg, "also write a chart of loss and phases per step (SVG)");
  hf_export_command hf_export;
  auto* export_hf =
      app.add_subcommand("export-hf", "Write an llm.c model file as a Hugging Face GPT-2 folder");
  add_hf_export_options(*export_hf, hf_export);
  hf_import_command hf_import;
  auto* import_hf =
      app.add_subcommand("import-hf", "Read a Hugging Face GPT-2 folder into an llm.c model file");
  add_hf_import_options(*import_hf, hf_import);
  eval_command eval;
  auto* eval_sub = app.add_subcommand("eval", "Score an llm.c model file on HellaSwag");
  add_eval_options(*eval_sub, eval);
  verify_options verify_opts;
  auto* verify = app.add_subcommand("verify", "Check every checkpoint in a directory (CRC-32C)");
  verify->add_option("dir", verify_opts.dir, "checkpoint directory (--ckpt-dir)")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "gpt_fineweb: " << e.what() << " (see --help)\n";
    return 2;
  }

  try {
    tk::install_stop_handlers();
    if (*prepare) return run_prepare(prep, std::cout);
    if (*report) return run_report(report_path, report_svg);
    if (*export_hf) return run_hf_export(hf_export, std::cout);
    if (*import_hf) return run_hf_import(hf_import, std::cout);
    if (*eval_sub) return run_eval(eval, std::cout);
    if (*verify) return run_verify(verify_opts, std::cout);
    return run_train(train);
  } catch (const tk::config_error& e) {
    std::cerr << "gpt_fineweb: error: " << name_flags(e.what()) << "\n";
    return 2;
  } catch (const tk::data::shard_magic_error& e) {
    std::cerr << "gpt_fineweb: error: " << e.what()
              << "; for headerless uint16 files pass --data-format headerless_uint16\n";
    return 2;
  } catch (const tk::format_error& e) {
    std::cerr << "gpt_fineweb: error: " << name_flags(e.what()) << "\n";
    return 2;
  } catch (const tk::io_error& e) {
    std::cerr << "gpt_fineweb: I/O error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "gpt_fineweb: fatal: " << e.what() << "\n";
    return 1;
  }
}
