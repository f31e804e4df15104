// fuzz_shard_header.cpp — libFuzzer target: token shard headers (data/shard_format.hpp).
//
// Every input is parsed in both layouts; a parse that succeeds must describe tokens that lie
// inside the input, and the range check over them must not read past it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/data/shard_format.hpp"

namespace td = trainkit::data;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A copy in 4-byte aligned storage, as an mmap'd file is aligned.
  std::vector<std::uint32_t> storage((size + 3) / 4);
  if (size > 0) std::memcpy(storage.data(), data, size);
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(storage.data()), size);
  for (const auto layout : {td::shard_layout::llmc, td::shard_layout::headerless_uint16}) {
    try {
      const td::shard_header h = td::parse_shard_header(bytes, "fuzz.bin", layout);
      if (h.data_offset + h.token_count * 2 != size) std::abort();  // tokens must fill the file
      td::check_token_range(td::shard_tokens(bytes, h), 50257, "fuzz.bin");
    } catch (const trainkit::format_error&) {
    }
  }
  return 0;
}
