// fuzz_run_log.cpp — libFuzzer target: the readers of other programs' logs (nanoGPT, llm.c,
// torchtitan, sniffed; gpt_fineweb report LOG) and the analysis of what they read.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "trainkit/core/error.hpp"
#include "trainkit/report/read_run_log.hpp"
#include "trainkit/report/run_analysis.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    const auto run = trainkit::report::parse_run_log(in, "fuzz.log");
    trainkit::report::log_report_config cfg;
    cfg.params = 1'000'000;
    cfg.layers = 2;
    cfg.width = 128;
    cfg.seq = 64;
    cfg.tokens_per_step = 4096;
    cfg.peak_tflops = 1.0;
    const auto a = trainkit::report::analyze_run(run, cfg);
    (void)trainkit::report::format_run_analysis(a);
  } catch (const trainkit::format_error&) {
  } catch (const trainkit::config_error&) {
  }
  return 0;
}
