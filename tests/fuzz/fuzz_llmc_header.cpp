// fuzz_llmc_header.cpp — libFuzzer target: the llm.c model-file header (model/gpt2/llmc_file.hpp).
//
// The input is written to a file (the reader takes a path, as users hand it one) and parsed; a
// header that parses must describe a shape that validates and whose parameter count does not
// overflow. The parameters are read too when the file is small enough to hold them.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/model/gpt2/llmc_file.hpp"

namespace tkm = trainkit::model;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path file =
      std::filesystem::temp_directory_path() /
      ("trainkit_fuzz_llmc_" + std::to_string(::getpid()) + ".bin");
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  try {
    const tkm::llmc_header h = tkm::read_llmc_file_header(file);
    h.config.validate();
    const std::size_t n = h.config.num_parameters();
    if (n < 1024 * 1024) {
      std::vector<float> params(n);
      tkm::read_llmc_parameters<float>(file, h.config, std::span<float>(params));
    }
  } catch (const trainkit::format_error&) {
  } catch (const trainkit::config_error&) {
  }
  return 0;
}
