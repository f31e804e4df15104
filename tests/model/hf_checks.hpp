// tests/model/hf_checks.hpp — what every family's Hugging Face folder test shares: a scratch
// folder, the exported-logits check (trainkit's CPU logits over fixed tokens, written beside the
// exported folder for a Python script to recompute from the folder alone: numpy, or transformers
// where importable), and the config-refusal check (a config.json edited one key at a time must be
// refused by the family's reader, naming the key). Family-neutral: the model, the save function and
// the reader are parameters.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../io/python_support.hpp"
#include "trainkit/core/error.hpp"

namespace trainkit::test_hf {

namespace fs = std::filesystem;

/// An empty folder trainkit_hf_<family>_<name> under the system's temporary folder.
inline fs::path scratch(const std::string& family, const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("trainkit_hf_" + family + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

/// `save(d / "model")` exports `m`; its CPU logits over B = 2 rows of T fixed tokens (below 97)
/// are written as d/tokens.bin and d/logits.bin (the V real columns only: HF has no padded ones),
/// and `script` (tests/...) recomputes them in `mode` from the folder alone.
template <class Model, class Save>
void check_exported_logits(const char* script, const std::string& mode, const fs::path& d, Model& m,
                           int vocab_size, int padded_vocab_size, int T, Save save) {
  save(d / "model");
  const int B = 2;
  std::vector<std::int32_t> tokens(std::size_t(B * T));
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = std::int32_t((i * 37 + 11) % 97);
  const auto logits = m.forward_logits(tokens, B, T);
  std::ofstream(d / "tokens.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 4));
  {
    std::ofstream out(d / "logits.bin", std::ios::binary);
    for (int r = 0; r < B * T; ++r)
      out.write(reinterpret_cast<const char*>(logits.data() + std::size_t(r) * padded_vocab_size),
                std::streamsize(vocab_size * 4));
  }
  RUN_PYTHON_CHECK(script, mode + " '" + (d / "model").string() + "' '" +
                               (d / "tokens.bin").string() + "' '" + (d / "logits.bin").string() +
                               "' " + std::to_string(T));
}

/// One edit of a good config.json: `key` set to `value` (erased where `value` is `erased`), which
/// the reader must refuse with a message containing `needle`.
struct config_edit {
  std::string key;
  nlohmann::json value;
  std::string needle;
};
inline const nlohmann::json erased(nlohmann::json::value_t::discarded);

/// For each edit in order: writes `good` with that edit as d/config.json and expects `read(d)` to
/// throw a format_error containing its needle.
template <class Read>
void expect_edits_refused(const fs::path& d, const nlohmann::json& good,
                          const std::vector<config_edit>& edits, Read read) {
  for (const auto& e : edits) {
    nlohmann::json j = good;
    if (e.value.is_discarded())
      j.erase(e.key);
    else
      j[e.key] = e.value;
    std::ofstream(d / "config.json", std::ios::trunc) << j.dump();
    try {
      read(d);
      ADD_FAILURE() << e.key << ": accepted; expected '" << e.needle << "'";
    } catch (const format_error& err) {
      EXPECT_NE(std::string(err.what()).find(e.needle), std::string::npos) << err.what();
    }
  }
}

}  // namespace trainkit::test_hf
