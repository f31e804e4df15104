// trainkit/eval/hellaswag.hpp — HellaSwag scoring as llm.c and build-nanogpt compute it.
//
// Each example (the official hellaswag_val.jsonl: "ctx", four "endings", "label") is scored
// completion-style: for every ending, the context's tokens followed by the tokens of
// " " + ending go through the model, and the cross-entropy of the ending's tokens (each
// predicted from everything before it) is summed and averaged. The prediction is the ending with
// the lowest summed loss (acc) and the one with the lowest mean loss (acc_norm, the
// length-normalised figure llm.c reports: 124M GPT-2 gets ~0.294). Ties go to the first ending.
// The model is any callable giving logits, so this header needs no particular model; JSON
// parsing uses nlohmann_json (link trainkit::hf).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "trainkit/core/error.hpp"

namespace trainkit::eval {

/// One tokenized HellaSwag example.
struct hellaswag_example {
  std::vector<std::int32_t> context;
  std::array<std::vector<std::int32_t>, 4> endings;  // tokens of " " + ending
  int label = 0;                                     // index of the correct ending
};

/// The four endings' losses of one example and the two predictions.
struct hellaswag_scores {
  std::array<double, 4> sum_loss{};   // nats, summed over the ending's tokens
  std::array<double, 4> mean_loss{};  // sum_loss / number of ending tokens
  int pred = 0;                       // argmin sum_loss
  int pred_norm = 0;                  // argmin mean_loss
};

/// Totals over a set of examples.
struct hellaswag_result {
  int examples = 0;
  int correct = 0;       // pred == label
  int correct_norm = 0;  // pred_norm == label
  double acc() const noexcept { return examples ? double(correct) / examples : 0.0; }
  double acc_norm() const noexcept { return examples ? double(correct_norm) / examples : 0.0; }
};

/// Reads a HellaSwag JSONL file, tokenizing with `encode` (a callable string -> ids). The ending
/// is encoded with a leading space, as GPT-2 sees a word after the context. format_error naming
/// FILE:LINE and the field for a malformed line; io_error when the file cannot be read.
template <class Encode>
std::vector<hellaswag_example> read_hellaswag(const std::filesystem::path& path, Encode&& encode) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw io_error("HellaSwag file '" + path.string() + "' cannot be opened");
  auto ids = [&](const std::string& text) {
    std::vector<std::int32_t> out;
    for (auto id : encode(text)) out.push_back(std::int32_t(id));
    return out;
  };
  std::vector<hellaswag_example> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "'" + path.string() + "':" + std::to_string(n);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range (overflow)
      throw format_error(where + ": not valid JSON (" + e.what() + ")");
    }
    if (!j.is_object() || !j.contains("ctx") || !j["ctx"].is_string())
      throw format_error(where + ": needs a string \"ctx\"");
    if (!j.contains("endings") || !j["endings"].is_array() || j["endings"].size() != 4)
      throw format_error(where + ": needs \"endings\", an array of four strings");
    if (!j.contains("label") || !j["label"].is_number_integer() || j["label"].get<int>() < 0 ||
        j["label"].get<int>() > 3)
      throw format_error(where + ": needs an integer \"label\" in 0..3");
    hellaswag_example ex;
    ex.context = ids(j["ctx"].get<std::string>());
    if (ex.context.empty()) throw format_error(where + ": \"ctx\" has no tokens");
    ex.label = j["label"].get<int>();
    for (std::size_t e = 0; e < 4; ++e) {
      if (!j["endings"][e].is_string())
        throw format_error(where + ": ending " + std::to_string(e) + " is not a string");
      ex.endings[e] = ids(" " + j["endings"][e].get<std::string>());
      if (ex.endings[e].empty())
        throw format_error(where + ": ending " + std::to_string(e) + " has no tokens");
    }
    out.push_back(std::move(ex));
  }
  if (in.bad()) throw io_error("HellaSwag file '" + path.string() + "': read failed");
  return out;
}

/// Scores one example. `logits(tokens)` returns, for tokens of length T, T rows of `vocab_size`
/// floats, row t predicting token t + 1 (rows may be longer: `row_stride` floats apart, e.g. the
/// padded vocabulary). Only the first `vocab_size` columns enter the softmax. config_error when the
/// context is empty, an ending does not fit in `max_tokens` (the model's context) or a token is
/// out of range.
template <class Logits>
hellaswag_scores score_hellaswag(const hellaswag_example& ex, Logits&& logits, int vocab_size,
                                 std::size_t row_stride, std::size_t max_tokens) {
  if (ex.context.empty()) throw config_error("HellaSwag: an example with an empty context");
  hellaswag_scores s;
  for (std::size_t e = 0; e < 4; ++e) {
    const auto& end = ex.endings[e];
    std::vector<std::int32_t> tokens = ex.context;
    tokens.insert(tokens.end(), end.begin(), end.end());
    if (tokens.size() > max_tokens)
      throw config_error("HellaSwag: context + ending " + std::to_string(e) + " is " +
                         std::to_string(tokens.size()) + " tokens, the model's context is " +
                         std::to_string(max_tokens));
    for (auto t : tokens)
      if (t < 0 || t >= vocab_size)
        throw config_error("HellaSwag: token " + std::to_string(t) + " is outside the vocabulary");
    // The model sees every token but the last; position p predicts token p + 1.
    const std::vector<std::int32_t> inputs(tokens.begin(), tokens.end() - 1);
    const std::span<const float> out = logits(std::span<const std::int32_t>(inputs));
    double sum = 0;
    for (std::size_t k = 0; k < end.size(); ++k) {
      const std::size_t p = ex.context.size() + k - 1;  // predicts end[k]
      const float* row = out.data() + p * row_stride;
      const float mx = *std::max_element(row, row + vocab_size);
      double z = 0;
      for (int v = 0; v < vocab_size; ++v) z += std::exp(double(row[v]) - mx);
      sum += std::log(z) + mx - double(row[end[k]]);
    }
    s.sum_loss[e] = sum;
    s.mean_loss[e] = sum / double(end.size());
  }
  for (int e = 1; e < 4; ++e) {
    if (s.sum_loss[std::size_t(e)] < s.sum_loss[std::size_t(s.pred)]) s.pred = e;
    if (s.mean_loss[std::size_t(e)] < s.mean_loss[std::size_t(s.pred_norm)]) s.pred_norm = e;
  }
  return s;
}

/// Adds one example's scores to `r`.
inline void accumulate(hellaswag_result& r, const hellaswag_example& ex,
                       const hellaswag_scores& s) noexcept {
  ++r.examples;
  r.correct += s.pred == ex.label;
  r.correct_norm += s.pred_norm == ex.label;
}

}  // namespace trainkit::eval
