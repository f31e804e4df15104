// fuzz_manifest.cpp — libFuzzer target: checkpoint manifests (checkpoint/format.hpp).
//
// The input is parsed as is (checksum verified) and with the checksum check skipped, so the
// field checks behind it are reached too. A manifest that parses must survive a round trip:
// written again and re-read, it is the same manifest.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "trainkit/checkpoint/format.hpp"
#include "trainkit/core/error.hpp"

namespace ck = trainkit::checkpoint;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  for (const auto mode :
       {ck::detail::manifest_checksum::verify, ck::detail::manifest_checksum::skip}) {
    try {
      ck::manifest m = ck::detail::parse_manifest(json, "fuzz.json", mode);
      m.version = m.written_version();  // the writer writes the current version (3: shards)
      if (ck::parse_manifest(ck::manifest_to_json(m), "again.json") != m) std::abort();
    } catch (const trainkit::format_error&) {
    }
  }
  return 0;
}
