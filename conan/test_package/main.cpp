// conan/test_package/main.cpp — proves the Conan package is usable: the umbrella header compiles
// with the packaged include/ and its Eigen/Boost requirements, version.hpp matches the package's
// version, the CPU trainer lowers the loss of a tiny GPT-2 on a synthetic source, and (with
// -o trainkit/*:tokenizer=True) the tokenizer component links utf8proc and finds the packaged
// GPT-2 vocabulary; with hf=True the trained model goes to a Hugging Face folder and back bit for
// bit; with mpi=True the MPI reducer initialises MPI as a one-rank job.
#include <trainkit/trainkit.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sstream>

#if defined(TEST_TOKENIZER)
#include <trainkit/tokenizer/gpt2_tokenizer.hpp>
#include <trainkit/tokenizer/pretokenize.hpp>

#include <string>
#include <vector>
#endif
#if defined(TEST_HF)
#include <trainkit/model/gpt2/hf.hpp>

#include <algorithm>
#include <filesystem>
#include <span>
#endif
#if defined(TEST_MPI)
#include <trainkit/comm/mpi_session.hpp>
#include <trainkit/reduce/mpi_allreduce.hpp>
#endif

int main() {
  namespace tk = trainkit;
  if (std::strcmp(tk::version_string, TRAINKIT_EXPECTED_VERSION) != 0) {
    std::printf("version.hpp says %s but the package is %s\n", tk::version_string,
                TRAINKIT_EXPECTED_VERSION);
    return 1;
  }
#if defined(TEST_TOKENIZER)
  // Non-ASCII letters take utf8proc's tables: this passes only with libutf8proc linked.
  const std::vector<std::string> want{"h\u00e9llo", " w\u00f6rld", " 42"};
  if (tk::tokenizer::gpt2_pieces("h\u00e9llo w\u00f6rld 42") != want) {
    std::printf("trainkit::tokenizer split the text wrongly\n");
    return 1;
  }
  // No directory given: the vocabulary packaged with trainkit (SHA-256 checked on load).
  const auto tok =
      tk::tokenizer::gpt2_tokenizer::from_directory(tk::tokenizer::resolve_vocab_dir(""));
  if (tok.encode("Hello world") != std::vector<std::uint32_t>{15496, 995}) {
    std::printf("trainkit::tokenizer: the packaged vocabulary encodes wrongly\n");
    return 1;
  }
  std::printf("trainkit::tokenizer from Conan OK (vocabulary %s)\n",
              tk::tokenizer::resolve_vocab_dir("").c_str());
#endif
  using cpu_trainer =
      tk::trainer<tk::data::synthetic_source, tk::prefetch::threaded<2>, tk::model::gpt2_cpu,
                  tk::optim::adamw_cpu, tk::checkpoint::no_checkpoint>;
  auto cfg = tk::model::gpt2_config::preset("d2");
  cfg.max_seq_len = 32;
  tk::trainer_config tc;
  tc.steps = 20;
  tc.schedule.max_lr = 3e-3f;
  tc.output.console.quiet = true;
  std::ostringstream log;
  cpu_trainer t(tc, tk::data::synthetic_source({.batch_size = 4, .seq_len = 32, .vocab_size = 256}),
                std::nullopt, tk::model::gpt2_cpu(cfg, 1), tk::optim::adamw_config{},
                tk::checkpoint::no_checkpoint{}, log);
  const auto r = t.run();
  const double first = r.steps.front().loss, last = r.steps.back().loss;
  const bool ok = last < first;
  std::printf("trainkit %s from Conan: loss %.3f -> %.3f %s\n", tk::version_string, first, last,
              ok ? "OK" : "FAILED");
  if (!ok) return 1;
#if defined(TEST_HF)
  const auto dir = std::filesystem::temp_directory_path() / "trainkit_conan_test_package_hf";
  std::filesystem::remove_all(dir);
  tk::model::save_hf_gpt2(dir, t.model());
  const auto back = tk::model::load_hf_gpt2_cpu(dir);
  const std::span<const float> a = t.model().parameters(), b = back.parameters();
  if (a.size() != b.size() || !std::equal(a.begin(), a.end(), b.begin())) {
    std::printf("trainkit::hf: the Hugging Face round trip changed the weights\n");
    return 1;
  }
  std::filesystem::remove_all(dir);
  std::printf("trainkit::hf from Conan OK (safetensors round trip of %zu parameters)\n", a.size());
#endif
#if defined(TEST_MPI)
  tk::comm::mpi_session session;
  tk::reduce::mpi_allreduce reducer;
  if (reducer.world_size() != 1) {
    std::printf("trainkit::mpi: a singleton run has world size %d\n", reducer.world_size());
    return 1;
  }
  std::printf("trainkit::mpi from Conan OK (rank %d of %d)\n", reducer.rank(),
              reducer.world_size());
#endif
  return 0;
}
