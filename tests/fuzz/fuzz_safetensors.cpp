// fuzz_safetensors.cpp — libFuzzer target: safetensors files (io/safetensors_read.hpp), the
// format of the Hugging Face checkpoints `gpt_fineweb import-hf` reads.
//
// The input is written to a file (the reader takes a path, as users hand it one) and opened; a
// file that opens must describe tensors that lie inside its data, in order, without overlap, each
// of numel × dtype size bytes, and every one of them (when small) must read back.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/io/safetensors_read.hpp"

namespace tio = trainkit::io;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path file =
      std::filesystem::temp_directory_path() /
      ("trainkit_fuzz_safetensors_" + std::to_string(::getpid()) + ".safetensors");
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  try {
    tio::safetensors_file f(file);
    std::uint64_t previous_end = 0;
    for (const auto& t : f.tensors()) {
      // What a successful open promises: ordered, inside the file, sized by shape and dtype.
      if (t.begin < previous_end || t.end < t.begin || t.end > size) std::abort();
      if (t.end - t.begin != t.numel() * tio::safetensors_dtype_bytes(t.dtype)) std::abort();
      previous_end = t.end;
      if (t.numel() <= 65536) {
        std::vector<float> values(t.numel());
        f.read(t, std::span<float>(values));
      }
    }
  } catch (const trainkit::format_error&) {
  } catch (const trainkit::config_error&) {
  } catch (const trainkit::io_error&) {
  }
  return 0;
}
