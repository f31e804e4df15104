// bench_tokenizer.cpp — GPT-2 tokenizer and `prepare` throughput.
//
// Goal (issue 6): encoding at least 2x tiktoken's single-thread MB/s on the same English text,
// measured side by side: tools/bench_tiktoken.py times tiktoken (built from the same vocab files)
// on exactly this text — the embedded default corpus (Python documentation prose) decoded back to
// its documents — so the two figures compare. Also reported: encoding on every core, decoding,
// and `prepare` end to end (JSONL in, shards out, vocabulary load included) on every core.
// Uses $TRAINKIT_GPT2_VOCAB, else the vocabulary bundled in vocab/gpt2; says so and exits
// 0 when neither is found.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../examples/gpt_fineweb/commands/prepare.hpp"
#include "../examples/gpt_fineweb/data/default_corpus.hpp"
#include "trainkit/tokenizer/gpt2_tokenizer.hpp"

namespace {

namespace fs = std::filesystem;
using trainkit::tokenizer::gpt2_tokenizer;

std::optional<fs::path> vocab_dir() {
  try {
    return trainkit::tokenizer::resolve_vocab_dir("");  // $TRAINKIT_GPT2_VOCAB, else bundled
  } catch (const trainkit::config_error&) {
    return std::nullopt;
  }
}

struct corpus {
  std::unique_ptr<gpt2_tokenizer> tok;
  std::vector<std::string> docs;
  std::size_t bytes = 0;
};

corpus& the_corpus() {
  static corpus c = [] {
    corpus r;
    r.tok = std::make_unique<gpt2_tokenizer>(gpt2_tokenizer::from_directory(*vocab_dir()));
    std::vector<std::uint16_t> all(std::begin(gpt_fineweb::default_corpus_tokens),
                                   std::end(gpt_fineweb::default_corpus_tokens));
    all.insert(all.end(), std::begin(gpt_fineweb::default_corpus_val_tokens),
               std::end(gpt_fineweb::default_corpus_val_tokens));
    std::vector<std::uint16_t> doc;
    auto flush = [&] {
      if (doc.empty()) return;
      r.docs.push_back(r.tok->decode(std::span<const std::uint16_t>(doc)));
      r.bytes += r.docs.back().size();
      doc.clear();
    };
    for (const std::uint16_t t : all) {
      if (t == 50256)
        flush();
      else
        doc.push_back(t);
    }
    flush();
    return r;
  }();
  return c;
}

void BM_encode_english(benchmark::State& state) {
  const corpus& c = the_corpus();
  std::vector<std::uint32_t> ids;
  for (auto _ : state) {
    for (const std::string& d : c.docs) {
      ids.clear();
      c.tok->encode_into(d, ids);
      benchmark::DoNotOptimize(ids.data());
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * c.bytes));
  state.SetLabel("goal >= 2x tiktoken single-thread (tools/bench_tiktoken.py)");
}
// Single thread on CPU time (fair on a shared machine; tools/bench_tiktoken.py does the same),
// then every core on wall-clock time (bytes_per_second is then the total over threads).
BENCHMARK(BM_encode_english)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_encode_english)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));

void BM_decode_english(benchmark::State& state) {
  const corpus& c = the_corpus();
  std::vector<std::vector<std::uint32_t>> encoded;
  for (const std::string& d : c.docs) encoded.push_back(c.tok->encode(d));
  std::string out;
  for (auto _ : state) {
    for (const auto& ids : encoded) {
      out.clear();
      c.tok->decode_into(std::span<const std::uint32_t>(ids), out);
      benchmark::DoNotOptimize(out.data());
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * c.bytes));
}
BENCHMARK(BM_decode_english)->Unit(benchmark::kMillisecond);

void BM_prepare_jsonl_all_cores(benchmark::State& state) {
  const corpus& c = the_corpus();
  const fs::path dir = fs::temp_directory_path() / "trainkit_bench_prepare";
  fs::create_directories(dir);
  const fs::path input = dir / "input.jsonl";
  std::size_t bytes = 0;
  {
    std::ofstream out(input, std::ios::binary);
    for (int copy = 0; bytes < 16u << 20; ++copy)
      for (const std::string& d : c.docs) {
        const std::string line = nlohmann::json{{"text", d}, {"copy", copy}}.dump() + "\n";
        out << line;
        bytes += line.size();
      }
  }
  gpt_fineweb::prepare_options o;
  o.vocab = vocab_dir()->string();
  o.out = (dir / "out").string();
  o.inputs = {input.string()};
  o.overwrite = true;
  o.progress_seconds = 0;
  o.val_tokens = 1'000'000;
  for (auto _ : state) {
    std::ostringstream log;
    gpt_fineweb::run_prepare(o, log);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.SetLabel("16 MiB JSONL, " + std::to_string(std::thread::hardware_concurrency()) +
                 " threads, vocab load + shard writes included");
  fs::remove_all(dir);
}
BENCHMARK(BM_prepare_jsonl_all_cores)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

}  // namespace

int main(int argc, char** argv) {
  if (!vocab_dir()) {
    std::cout << "bench_tokenizer: GPT-2 vocabulary not found ($TRAINKIT_GPT2_VOCAB, else the "
                 "bundled vocab/gpt2); nothing measured\n";
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  std::cout << "Goal: GPT-2 encoding >= 2x tiktoken's single-thread MB/s on the same text.\n"
               "Compare BM_encode_english (single thread, CPU time) with the CPU-time figure of "
               "`python3 tools/bench_tiktoken.py`; Google Benchmark's M/s is MiB/s (x1.048576 "
               "for MB/s).\n";
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
