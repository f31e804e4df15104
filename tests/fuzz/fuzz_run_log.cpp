// fuzz_run_log.cpp — libFuzzer target: the readers of other programs' logs as people paste them
// (detail/log_lines.hpp's prefixes, ANSI codes, '\r'; nanoGPT, llm.c, torchtitan, build-nanogpt,
// sniffed; gpt_fineweb report LOG) and the analysis of what they read, with one device and with
// eight, for a GPT-2 shape and a Llama preset. Any bytes in: no crash, and every step is a
// bounded walk (no regex), so the time stays linear in the input.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "trainkit/core/device_info.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/report/read_run_log.hpp"
#include "trainkit/report/run_analysis.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  (void)trainkit::peak_tflops(bytes.substr(0, 200), trainkit::compute_dtype::bf16);
  (void)trainkit::report::detail::normalise_line(bytes.substr(0, 4096), 1);
  std::istringstream in(bytes);
  try {
    const auto run = trainkit::report::parse_run_log(in, "fuzz.log");
    trainkit::report::log_report_config cfg;
    cfg.params = 1'000'000;
    cfg.layers = 2;
    cfg.width = 128;
    cfg.seq = 64;
    cfg.tokens_per_step = 4096;
    cfg.peak_tflops = 1.0;
    (void)trainkit::report::format_run_analysis(trainkit::report::analyze_run(run, cfg));
    trainkit::report::log_report_config llama;
    llama.arch = "llama";
    llama.model = "d2";
    llama.devices = 8;
    llama.device = "H100";
    llama.seq = 64;
    try {
      (void)trainkit::report::format_run_analysis(trainkit::report::analyze_run(run, llama));
    } catch (const trainkit::config_error&) {  // tokens per step unknown: a missing fact
    }
  } catch (const trainkit::format_error&) {
  } catch (const trainkit::config_error&) {
  }
  return 0;
}
