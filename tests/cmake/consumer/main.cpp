// A consumer of trainkit: composes the CPU reference trainer from the shipped policies and checks
// that a few steps on a synthetic source lower the loss; with CONSUMER_TOKENIZER it also uses
// trainkit::tokenizer, with CONSUMER_HF trainkit::hf, with
// CONSUMER_MPI it compiles and links a trainer with trainkit::mpi's reducer (not run: that needs
// mpiexec). Built by the packaging tests.
#include <trainkit/trainkit.hpp>

#include <cstdint>
#include <cstdio>
#include <sstream>

#if defined(CONSUMER_HF)
#include <trainkit/io/safetensors_read.hpp>
#include <trainkit/io/safetensors_write.hpp>

#include <filesystem>
#include <vector>
#endif
#if defined(CONSUMER_MPI)
#include <trainkit/comm/mpi_session.hpp>
#include <trainkit/reduce/mpi_allreduce.hpp>

static_assert(trainkit::reduce::gradient_reducer_for<trainkit::reduce::mpi_allreduce,
                                                     trainkit::model::gpt2_cpu>);
// Not called (running MPI needs mpiexec), but emitted: the link needs MPI's library.
int consumer_mpi_world_size() {
  trainkit::comm::mpi_session mpi;
  return trainkit::reduce::mpi_allreduce{}.world_size();
}
#endif
#if defined(CONSUMER_TOKENIZER)
#include <trainkit/tokenizer/gpt2_tokenizer.hpp>
#include <trainkit/tokenizer/pretokenize.hpp>

#include <string>
#include <vector>
#endif

int main() {
  namespace tk = trainkit;
#if defined(CONSUMER_TOKENIZER)
  // Non-ASCII letters take utf8proc's tables, so this only passes when libutf8proc is linked.
  const std::vector<std::string> want{"h\u00e9llo", " w\u00f6rld", " 42"};
  if (tk::tokenizer::gpt2_pieces("h\u00e9llo w\u00f6rld 42") != want) {
    std::printf("consumer: trainkit::tokenizer split the text wrongly\n");
    return 1;
  }
  // No directory given: the vocabulary installed (or, in a source tree, bundled) with trainkit.
  const auto tok =
      tk::tokenizer::gpt2_tokenizer::from_directory(tk::tokenizer::resolve_vocab_dir(""));
  if (tok.encode("Hello world") != std::vector<std::uint32_t>{15496, 995}) {
    std::printf("consumer: the bundled vocabulary encodes wrongly\n");
    return 1;
  }
  std::printf("consumer: trainkit::tokenizer OK (vocabulary %s)\n",
              tk::tokenizer::resolve_vocab_dir("").c_str());
#endif
#if defined(CONSUMER_HF)
  {  // trainkit::hf: a safetensors round trip through nlohmann_json
    const std::vector<float> v{1.5f, -2.0f, 0.25f};
    const auto path = std::filesystem::temp_directory_path() / "trainkit_consumer.safetensors";
    tk::io::write_safetensors(
        path, {tk::io::safetensors_entry_of("x", tk::io::safetensors_dtype::f32, {3}, v)});
    tk::io::safetensors_file f(path);
    if (f.read("x") != v) {
      std::printf("consumer: trainkit::hf safetensors round trip differs\n");
      return 1;
    }
    std::printf("consumer: trainkit::hf OK\n");
  }
#endif
  using cpu_trainer =
      tk::trainer<tk::data::synthetic_source, tk::prefetch::threaded<2>, tk::model::gpt2_cpu,
                  tk::optim::adamw_cpu, tk::checkpoint::no_checkpoint>;
  auto cfg = tk::model::gpt2_config::preset("d2");
  cfg.max_seq_len = 32;
  tk::data::synthetic_config data{.batch_size = 4, .seq_len = 32, .vocab_size = 256, .seed = 1};
  tk::trainer_config tc;
  tc.steps = 30;
  tc.schedule.max_lr = 3e-3f;
  tc.output.console.quiet = true;
  std::ostringstream log;
  cpu_trainer t(tc, tk::data::synthetic_source(data), std::nullopt, tk::model::gpt2_cpu(cfg, 1),
                tk::optim::adamw_config{}, tk::checkpoint::no_checkpoint{}, log);
  const auto r = t.run();
  const double first = r.steps.front().loss, last = r.steps.back().loss;
  const bool ok = last < first;
  std::printf("consumer trained: loss %.3f -> %.3f %s\n", first, last, ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
