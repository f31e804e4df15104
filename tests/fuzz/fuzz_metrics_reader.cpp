// fuzz_metrics_reader.cpp — libFuzzer target: the metrics JSONL reader (gpt_fineweb report).
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "trainkit/core/error.hpp"
#include "trainkit/report/metrics_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    const auto file = trainkit::parse_metrics_jsonl(in, "fuzz.jsonl");
    (void)file;
  } catch (const trainkit::format_error&) {
  }
  return 0;
}
