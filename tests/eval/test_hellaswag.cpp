// tests/eval/test_hellaswag.cpp — HellaSwag scoring: hand-computed losses and predictions over
// synthetic logits (including which position predicts which token), the JSONL reader and its
// errors, and trainkit's CPU GPT-2 scoring a fixture in hellaswag_val.jsonl's format, checked
// against an independent numpy GPT-2 (tests/eval/hellaswag_check.py) over the same weights, and a
// tiny model trained on the fixture picking the endings it was taught.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../io/python_support.hpp"
#include "trainkit/eval/hellaswag.hpp"
#include "trainkit/model/gpt2/hf.hpp"
#include "trainkit/optim/adamw_cpu.hpp"
#include "trainkit/optim/grad_clip.hpp"
#include "trainkit/tokenizer/gpt2_tokenizer.hpp"

namespace {

namespace fs = std::filesystem;
using trainkit::eval::hellaswag_example;
using trainkit::eval::score_hellaswag;

constexpr int V = 10;

/// The committed fixture in hellaswag_val.jsonl's format, tokenized with the bundled vocabulary.
std::vector<hellaswag_example> fixture_examples() {
  const auto vocab = trainkit::tokenizer::bundled_vocab_dir();
  if (!vocab) throw std::runtime_error("the bundled GPT-2 vocabulary is missing");
  const auto tok = trainkit::tokenizer::gpt2_tokenizer::from_directory(*vocab);
  return trainkit::eval::read_hellaswag(
      fs::path(TRAINKIT_SOURCE_DIR) / "tests/eval/hellaswag_fixture.jsonl",
      [&](const std::string& s) { return tok.encode(s); });
}

// One example scored by a CPU GPT-2, as `gpt_fineweb eval` scores it.
trainkit::eval::hellaswag_scores score_with(trainkit::model::gpt2_cpu& m,
                                            const hellaswag_example& ex) {
  const auto& cfg = m.config();
  auto logits = [&](std::span<const std::int32_t> in) {
    return m.forward_logits(in, 1, int(in.size()));
  };
  return score_hellaswag(ex, logits, cfg.vocab_size, std::size_t(cfg.padded_vocab_size),
                         std::size_t(cfg.max_seq_len));
}

// Logits where every row is `row(inputs, p)`, V columns plus `pad` padding columns.
template <class Row>
auto synthetic(Row row, std::size_t pad, std::vector<float>& store) {
  return [row, pad, &store](std::span<const std::int32_t> in) {
    store.assign(in.size() * (V + pad), 1e9f);  // padding columns: huge, must be ignored
    for (std::size_t p = 0; p < in.size(); ++p) row(in, p, store.data() + p * (V + pad));
    return std::span<const float>(store);
  };
}

TEST(Hellaswag, UniformLogitsCostLnVPerToken) {
  hellaswag_example ex{{1, 2}, {{{3, 4, 5}, {6}, {7, 8}, {9, 0}}}, 1};
  std::vector<float> store;
  auto uniform = synthetic([](auto, std::size_t, float* r) { std::fill_n(r, V, 0.0f); }, 3, store);
  const auto s = score_hellaswag(ex, uniform, V, V + 3, 64);
  const double l = std::log(10.0);
  EXPECT_NEAR(s.sum_loss[0], 3 * l, 1e-9);
  EXPECT_NEAR(s.sum_loss[1], 1 * l, 1e-9);
  EXPECT_NEAR(s.sum_loss[2], 2 * l, 1e-9);
  EXPECT_NEAR(s.mean_loss[3], l, 1e-9);
  EXPECT_EQ(s.pred, 1);       // the shortest ending
  EXPECT_EQ(s.pred_norm, 0);  // all means equal: the first wins the tie
}

TEST(Hellaswag, PositionPPredictsTokenPPlusOne) {
  // Row p favours (input[p] + 1) % V by a logit of 5, so a counting continuation is cheap:
  // cheap = ln(9 + e^5) - 5 per token, dear = ln(9 + e^5).
  std::vector<float> store;
  auto counting = synthetic(
      [](std::span<const std::int32_t> in, std::size_t p, float* r) {
        std::fill_n(r, V, 0.0f);
        r[(in[p] + 1) % V] = 5.0f;
      },
      0, store);
  const double dear = std::log(9.0 + std::exp(5.0)), cheap = dear - 5.0;
  // Context 1 2; ending 0 = 3 4 5 6 (counts on), 1 = 3 9 (one miss), 2 = 7 (a miss),
  // 3 = 3 4 0 0 0 (two hits, three misses).
  hellaswag_example ex{{1, 2}, {{{3, 4, 5, 6}, {3, 9}, {7}, {3, 4, 0, 0, 0}}}, 0};
  const auto s = score_hellaswag(ex, counting, V, V, 64);
  EXPECT_NEAR(s.sum_loss[0], 4 * cheap, 1e-9);
  EXPECT_NEAR(s.sum_loss[1], cheap + dear, 1e-9);
  EXPECT_NEAR(s.sum_loss[2], dear, 1e-9);
  EXPECT_NEAR(s.sum_loss[3], 2 * cheap + 3 * dear, 1e-9);
  EXPECT_NEAR(s.mean_loss[3], (2 * cheap + 3 * dear) / 5, 1e-9);
  EXPECT_EQ(s.pred, 0);
  EXPECT_EQ(s.pred_norm, 0);
  // The two metrics disagree: ending 1 hits five times and misses once (sum 5·cheap + dear, the
  // largest) but is by far the cheapest per token; the one-token endings each miss once.
  hellaswag_example ex2{{1, 2}, {{{7}, {3, 4, 5, 6, 7, 1}, {9}, {8}}}, 1};
  const auto s2 = score_hellaswag(ex2, counting, V, V, 64);
  EXPECT_NEAR(s2.sum_loss[1], 5 * cheap + dear, 1e-9);
  EXPECT_NEAR(s2.sum_loss[0], dear, 1e-9);
  EXPECT_EQ(s2.pred, 0);       // 5.059 (ties with 2 and 3: the first) < 5.353
  EXPECT_EQ(s2.pred_norm, 1);  // 5.353 / 6 = 0.892
  trainkit::eval::hellaswag_result r;
  trainkit::eval::accumulate(r, ex, s);
  trainkit::eval::accumulate(r, ex2, s2);
  EXPECT_EQ(r.examples, 2);
  EXPECT_DOUBLE_EQ(r.acc(), 0.5);
  EXPECT_DOUBLE_EQ(r.acc_norm(), 1.0);
}

TEST(Hellaswag, RefusesWhatDoesNotFit) {
  std::vector<float> store;
  auto uniform = synthetic([](auto, std::size_t, float* r) { std::fill_n(r, V, 0.0f); }, 0, store);
  hellaswag_example ex{{1, 2, 3}, {{{4, 5}, {6}, {7}, {8}}}, 0};
  EXPECT_THROW((void)score_hellaswag(ex, uniform, V, V, 4), trainkit::config_error);  // 5 > 4
  ex.endings[2] = {12};
  EXPECT_THROW((void)score_hellaswag(ex, uniform, V, V, 64), trainkit::config_error);
}

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("trainkit_hellaswag_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// One id per byte: makes the leading space and the order visible.
std::vector<std::uint32_t> bytes_of(const std::string& s) {
  return {s.begin(), s.end()};
}

TEST(Hellaswag, ReadsTheOfficialFormat) {
  const fs::path d = scratch("read");
  std::ofstream(d / "h.jsonl")
      << R"({"ctx": "ab", "label": 2, "endings": ["c", "de", "f", "g"], "ind": 1})"
      << "\n\n"
      << R"({"ctx": "x", "label": 0, "endings": ["y", "y", "y", "y"]})"
      << "\n";
  const auto ex = trainkit::eval::read_hellaswag(d / "h.jsonl", bytes_of);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].context, (std::vector<std::int32_t>{'a', 'b'}));
  EXPECT_EQ(ex[0].endings[1], (std::vector<std::int32_t>{' ', 'd', 'e'}));
  EXPECT_EQ(ex[0].label, 2);
  EXPECT_EQ(ex[1].endings[3], (std::vector<std::int32_t>{' ', 'y'}));
  auto expect_refused = [&](const std::string& line, const std::string& needle) {
    std::ofstream(d / "bad.jsonl") << R"({"ctx": "ok", "label": 0, "endings": ["a","b","c","d"]})"
                                   << "\n"
                                   << line << "\n";
    try {
      (void)trainkit::eval::read_hellaswag(d / "bad.jsonl", bytes_of);
      ADD_FAILURE() << "accepted: " << line;
    } catch (const trainkit::format_error& e) {
      EXPECT_NE(std::string(e.what()).find("bad.jsonl':2"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_refused(R"({"ctx": "a", "label": 4, "endings": ["a","b","c","d"]})", "label");
  expect_refused(R"({"ctx": "a", "label": 0, "endings": ["a","b","c"]})", "four strings");
  expect_refused(R"({"label": 0, "endings": ["a","b","c","d"]})", "ctx");
  expect_refused(R"({"ctx": "a", "label": 0, "endings": ["a","b",3,"d"]})", "ending 2");
  expect_refused("{not json", "not valid JSON");
  expect_refused(R"({"label": 1E400})", "not valid JSON");  // out_of_range, not parse_error
  EXPECT_THROW((void)trainkit::eval::read_hellaswag(d / "missing.jsonl", bytes_of),
               trainkit::io_error);
}

// trainkit's CPU GPT-2 on the committed fixture (GPT-2 tokens), against numpy over the export.
TEST(Hellaswag, Gpt2CpuAgreesWithNumpyOnTheFixture) {
  const auto examples = fixture_examples();
  ASSERT_EQ(examples.size(), 3u);
  trainkit::model::gpt2_config cfg;
  cfg.max_seq_len = 64;
  cfg.num_layers = 2;
  cfg.num_heads = 4;
  cfg.channels = 32;
  trainkit::model::gpt2_cpu m(cfg, 7);
  std::mt19937 rng(8);  // random biases and gains too (the seeded init leaves them 0 and 1)
  std::normal_distribution<float> n(0.0f, 0.3f);
  for (const auto& t : trainkit::model::gpt2_parameter_layout(cfg))
    if (t.role == trainkit::tensor_role::bias || t.role == trainkit::tensor_role::norm)
      for (std::size_t i = 0; i < t.numel(); ++i) m.parameters()[t.offset + i] += n(rng);
  const fs::path d = scratch("gpt2");
  trainkit::model::save_hf_gpt2(d / "model", m);
  nlohmann::json ex_json = nlohmann::json::array(), scores = nlohmann::json::array();
  trainkit::eval::hellaswag_result r;
  for (const auto& ex : examples) {
    const auto s = score_with(m, ex);
    trainkit::eval::accumulate(r, ex, s);
    ex_json.push_back({{"context", ex.context}, {"endings", ex.endings}, {"label", ex.label}});
    scores.push_back({{"sum_loss", s.sum_loss}, {"pred", s.pred}, {"pred_norm", s.pred_norm}});
  }
  EXPECT_EQ(r.examples, 3);
  std::ofstream(d / "examples.json") << ex_json.dump();
  std::ofstream(d / "scores.json") << scores.dump();
  RUN_PYTHON_CHECK("eval/hellaswag_check.py", "'" + (d / "model").string() + "' '" +
                                                  (d / "examples.json").string() + "' '" +
                                                  (d / "scores.json").string() + "'");
}

// A model taught, by training on them, one ending per context must pick that ending: the answer
// follows what was learned, not the label field. Examples 0 and 1 are taught their labelled
// ending and example 2 another one, so the expected accuracy is exactly 2/3 (a scorer reading the
// wrong positions, or the wrong ending's tokens, cannot reproduce the taught choice three times).
TEST(Hellaswag, TrainedTinyModelPicksTheEndingItWasTaught) {
  const auto examples = fixture_examples();
  ASSERT_EQ(examples.size(), 3u);
  const std::array<int, 3> taught{examples[0].label, examples[1].label,
                                  (examples[2].label + 1) % 4};

  trainkit::model::gpt2_config cfg;
  cfg.max_seq_len = 64;
  cfg.num_layers = 1;
  cfg.num_heads = 2;
  cfg.channels = 32;
  trainkit::model::gpt2_cpu m(cfg, 3);
  trainkit::optim::adamw_config ocfg;
  ocfg.weight_decay = 0.0f;
  trainkit::optim::adamw_cpu opt(m, ocfg);
  trainkit::optim::clip_then_update<trainkit::host_memory> clipped_update(1.0);
  // One micro-batch per example (B=1, T = its length - 1): context and taught ending.
  std::vector<trainkit::host_batch> batches;
  for (std::size_t i = 0; i < examples.size(); ++i) {
    std::vector<std::int32_t> seq = examples[i].context;
    const auto& end = examples[i].endings[std::size_t(taught[i])];
    seq.insert(seq.end(), end.begin(), end.end());
    ASSERT_LE(seq.size(), std::size_t(cfg.max_seq_len) + 1);
    trainkit::host_batch b(1, int(seq.size()) - 1);
    std::copy(seq.begin(), seq.end() - 1, b.inputs.begin());
    std::copy(seq.begin() + 1, seq.end(), b.targets.begin());
    batches.push_back(std::move(b));
  }
  float loss = 0;
  for (int step = 0; step < 60; ++step) {
    m.zero_grad();
    loss = 0;
    for (const auto& b : batches) loss += m.forward_backward(trainkit::view_of(b), 1.0f / 3) / 3;
    (void)clipped_update(opt, m, 1e-2f);
  }
  EXPECT_LT(loss, 0.5f) << "the tiny model did not learn the fixture";

  trainkit::eval::hellaswag_result r;
  for (std::size_t i = 0; i < examples.size(); ++i) {
    const auto s = score_with(m, examples[i]);
    EXPECT_EQ(s.pred, taught[i]) << "example " << i;
    EXPECT_EQ(s.pred_norm, taught[i]) << "example " << i;
    trainkit::eval::accumulate(r, examples[i], s);
  }
  EXPECT_EQ(r.correct, 2);
  EXPECT_EQ(r.correct_norm, 2);
}

}  // namespace
