// gpt_fineweb — the flagship example: train GPT-2 on FineWeb shards (or the embedded corpus),
// tokenize text into shards (`prepare`, prepare.hpp), summarise any metrics file (`report`), and
// convert model files to and from Hugging Face folders (`export-hf`, `import-hf`, hf_commands.hpp),
// and score a model on HellaSwag (`eval`, eval_command.hpp).
//
// Training is train_driver.hpp's, for both devices: this file gives it the CPU device policy
// (gpt2_cpu, adamw_cpu, the threaded prefetcher) and launches the CPU reducers under mpirun;
// train_cuda.cu gives it the CUDA one. Library code throws; this program turns a
// trainkit::config_error / format_error / io_error (a bad flag, a bad or unreadable file) into
// one line on stderr and exit code 2.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <trainkit/checkpoint/asio_checkpointer.hpp>
#include <trainkit/report/chart.hpp>
#include <trainkit/report/metrics_reader.hpp>
#include <trainkit/trainkit.hpp>

#include "eval_command.hpp"
#include "flag_names.hpp"
#include "hellaswag_log.hpp"
#include "hf_commands.hpp"
#include "prepare.hpp"
#include "sampler.hpp"
#include "train_driver.hpp"
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
#include <trainkit/comm/mpi_session.hpp>
#include <trainkit/optim/zero1_adamw_cpu.hpp>
#include <trainkit/reduce/mpi_allreduce.hpp>
#include <trainkit/reduce/mpi_zero1.hpp>

#include "mpi_launch.hpp"
#endif
// ---- end data parallelism ----

namespace tk = trainkit;
namespace fs = std::filesystem;

namespace gpt_fineweb {

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

/// --device cpu, the reference composition:
///   trainer<mmap_token_source, prefetch::threaded<4>, gpt2_cpu, adamw_cpu, Checkpointer>
/// with Checkpointer by --ckpt-mode: no_checkpoint, sync_checkpointer or asio_checkpointer
/// (train_driver.hpp's device_policy).
struct cpu_device {
  using model_type = tk::model::gpt2_cpu;
  using optimizer_type = tk::optim::adamw_cpu;
  using prefetch_recipe = tk::prefetch::threaded<4>;
  static constexpr std::string_view name = "cpu";

  std::optional<tk::model::gpt2_cpu> from_file;  // --init-from / --init-from-hf, read in phase 1

  tk::model::gpt2_config model_config(const train_options& o) {
    from_file = model_from_file(o);
    return from_file ? tk::model::gpt2_config(from_file->config())
                     : tk::model::gpt2_config::preset(o.model);
  }
  void check_device() const noexcept {}
  model_type make_model(const train_options& o, const tk::model::gpt2_config& cfg) {
    if (!from_file) return model_type(cfg, o.seed);
    model_type m = std::move(*from_file);
    from_file.reset();
    return m;
  }
  void configure(tk::mfu_settings& mfu, const model_type&) const { mfu.device_name = "cpu"; }
  std::string describe(const model_type&) const { return {}; }
  tk::checkpoint::sync_checkpointer sync_checkpointer(const train_options& o) const {
    return tk::checkpoint::sync_checkpointer({o.ckpt_dir, o.ckpt_keep});
  }
  tk::checkpoint::asio_checkpointer async_checkpointer(const train_options& o) const {
    return tk::checkpoint::asio_checkpointer(
        {.dir = o.ckpt_dir, .keep_last = o.ckpt_keep, .fail_on_error = o.ckpt_fatal});
  }
  template <class Trainer>
  void bind(Trainer&) const noexcept {}
  void after_run(const model_type&, std::ostream&) const noexcept {}
  void export_model(const train_options& o, const model_type& model, std::ostream& out) const {
    if (!o.export_hf.empty())
      export_hf_after_training(o.export_hf, o.export_hf_dtype, o.vocab, model, out);
    if (!o.export_path.empty()) {
      tk::model::save_llmc_model(o.export_path, model);
      out << "exported llm.c model file " << o.export_path << "\n";
    }
  }
};
static_assert(device_policy<cpu_device>);
static_assert(reports_state_bytes<tk::optim::adamw_cpu>, "the ranks line reports it");

// ---- data parallelism: --reducer mpi ----
#if defined(TRAINKIT_HAS_MPI)
/// One rank of `mpirun -np N gpt_fineweb --reducer mpi|mpi-zero1 ...` (mpi_launch.hpp). Every
/// rank trains on its slice of each global batch; rank 0 writes the console, metrics,
/// TensorBoard, checkpoints and exports.
int run_train_mpi(const train_options& o) {
  tk::comm::mpi_session mpi;
  return run_mpi_rank(mpi, [&](const mpi_ranks& ranks) {
    train_driver driver(o, cpu_device{}, ranks.rank, ranks.ranks);
    if (o.reducer == "mpi-zero1")  // ZeRO-1: the optimizer state sharded over the ranks
      return driver.run_sharded<tk::optim::zero1_adamw_cpu>(
          [] { return tk::reduce::mpi_zero1{}; },
          [](const tk::optim::adamw_config& a) { return tk::optim::zero1_adamw_config(a); }, ranks);
    return driver.run<tk::optim::adamw_cpu>([] { return tk::reduce::mpi_allreduce{}; }, ranks);
  });
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
  if (o.device == "cuda") {
#if defined(TRAINKIT_HAS_CUDA)
    return run_train_cuda(o);  // train_cuda.cu: the same driver with the CUDA device policy
#else
    throw tk::config_error(
        "--device cuda: this build has no CUDA support (nvcc was not found "
        "when it was configured)");
#endif
  }
  if (o.reducer != "single") return run_train_mpi(o);  // data parallelism
  return train_driver(o, cpu_device{}).run();
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
