// tests/examples/test_prepare.cpp — the `prepare` tool: text/JSONL/stdin -> llm.c shards.
//
// Runs run_prepare on small generated inputs and reads the shards back with the data library:
// the token stream must be EOT + encode(doc) for each document in order, split into the val
// shard then training shards of the requested sizes, byte-identical for any thread count; bad
// input must be reported as FILE:LINE (stop) or skipped and counted (skip) with the same output
// as clean input; no file under a final shard name may appear when a run stops early.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "commands/prepare.hpp"
#include "tokenizer_test_support.hpp"
#include "trainkit/data/mmap_token_source.hpp"
#include "trainkit/data/shard_format.hpp"

namespace {

namespace fs = std::filesystem;
using gpt_fineweb::bad_input_policy;
using gpt_fineweb::prepare_options;
using gpt_fineweb::run_prepare;

class Prepare : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_FULL_VOCAB();
    dir_ = fs::temp_directory_path() /
           ("trainkit_prepare_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "in");
  }
  void TearDown() override { fs::remove_all(dir_); }

  const trainkit::tokenizer::gpt2_tokenizer& tok() { return *tokenizer_test::full_tokenizer(); }

  std::string write_input(const std::string& name, const std::string& contents) {
    const fs::path p = dir_ / "in" / name;
    std::ofstream(p, std::ios::binary) << contents;
    return p.string();
  }

  prepare_options options(const std::string& out, std::vector<std::string> inputs) {
    prepare_options o;
    o.vocab = tokenizer_test::full_vocab_dir().string();
    o.out = (dir_ / out).string();
    o.inputs = std::move(inputs);
    o.progress_seconds = 0;
    return o;
  }

  // EOT + ids of each document, in order: what the shards must hold.
  std::vector<std::uint16_t> expected_stream(const std::vector<std::string>& docs) {
    std::vector<std::uint16_t> s;
    for (const auto& d : docs) {
      s.push_back(50256);
      for (auto id : tok().encode(d)) s.push_back(static_cast<std::uint16_t>(id));
    }
    return s;
  }

  std::vector<std::string> shard_names(const std::string& out) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_ / out)) names.push_back(e.path().filename());
    // The val shard first, then training shards in index order (as a loader would read them).
    std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
      const bool va = a.find("_val_") != std::string::npos,
                 vb = b.find("_val_") != std::string::npos;
      return va != vb ? va : a < b;
    });
    return names;
  }

  // All tokens of the shards in `out`, in shard_names order.
  std::vector<std::uint16_t> read_all(const std::string& out) {
    std::vector<std::uint16_t> all;
    for (const auto& name : shard_names(out)) {
      const auto t = trainkit::data::read_shard((dir_ / out / name).string(), 50257);
      all.insert(all.end(), t.begin(), t.end());
    }
    return all;
  }

  std::string file_bytes(const fs::path& p) { return tokenizer_test::read_file(p); }

  fs::path dir_;
};

std::vector<std::string> sample_docs(int n, unsigned seed) {
  std::mt19937 rng(seed);
  const std::vector<std::string> words = {"the",    "model",       "It's",
                                          "tokens", " ",           "\n\n",
                                          "42",     "caf\xC3\xA9", "\xE4\xBD\xA0\xE5\xA5\xBD",
                                          "  ",     "!",           "<|endoftext|>",
                                          "\t",     "don't",       "3.14"};
  std::vector<std::string> docs;
  for (int i = 0; i < n; ++i) {
    std::string d;
    const int len = 5 + static_cast<int>(rng() % 200);
    for (int k = 0; k < len; ++k) d += words[rng() % words.size()] + (rng() % 3 ? " " : "");
    docs.push_back(d);
  }
  return docs;
}

std::string to_jsonl(const std::vector<std::string>& docs) {
  std::string s;
  for (const auto& d : docs) s += nlohmann::json{{"id", 1}, {"text", d}}.dump() + "\n";
  return s;
}

}  // namespace

TEST_F(Prepare, TextFilesBecomeEotPlusIdsSplitIntoValAndTrainShards) {
  const auto docs = sample_docs(3, 1);
  std::vector<std::string> inputs;
  for (std::size_t i = 0; i < docs.size(); ++i)
    inputs.push_back(write_input("doc" + std::to_string(i) + ".txt", docs[i]));
  auto o = options("out", inputs);
  const auto expected = expected_stream(docs);
  ASSERT_GT(expected.size(), 300u);
  o.val_tokens = 100;
  o.shard_tokens = 64;
  std::ostringstream log;
  EXPECT_EQ(run_prepare(o, log), 0);

  const auto names = shard_names("out");
  const std::size_t train_tokens = expected.size() - 100;
  const std::size_t train_shards = (train_tokens + 63) / 64;
  ASSERT_EQ(names.size(), 1 + train_shards);
  EXPECT_EQ(names.front(), "fineweb_val_000000.bin");
  EXPECT_EQ(names[1], "fineweb_train_000001.bin");
  EXPECT_EQ(trainkit::data::read_shard((dir_ / "out" / "fineweb_val_000000.bin").string()).size(),
            100u);
  std::vector<std::uint16_t> stream =
      trainkit::data::read_shard((dir_ / "out" / "fineweb_val_000000.bin").string());
  for (std::size_t i = 1; i <= train_shards; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "fineweb_train_%06zu.bin", i);
    const auto t = trainkit::data::read_shard((dir_ / "out" / name).string(), 50257);
    EXPECT_EQ(t.size(), i < train_shards ? 64u : train_tokens - 64 * (train_shards - 1)) << name;
    stream.insert(stream.end(), t.begin(), t.end());
  }
  EXPECT_EQ(stream, expected);
  EXPECT_NE(log.str().find("MB/s"), std::string::npos);
  EXPECT_NE(log.str().find("3 documents"), std::string::npos) << log.str();
}

TEST_F(Prepare, JsonlGivesSameTokensAsTextAndSkipsBlankLines) {
  const auto docs = sample_docs(20, 2);
  std::string jsonl = to_jsonl(docs);
  jsonl.insert(jsonl.find('\n') + 1, "\n   \n");  // blank lines are not documents
  auto o = options("out", {write_input("part.jsonl", jsonl)});
  o.val_tokens = 0;
  std::ostringstream log;
  run_prepare(o, log);
  EXPECT_EQ(shard_names("out"), std::vector<std::string>{"fineweb_train_000001.bin"});
  EXPECT_EQ(read_all("out"), expected_stream(docs));
}

TEST_F(Prepare, ShardsAreByteIdenticalForAnyThreadCount) {
  const auto docs = sample_docs(300, 3);
  const std::string in = write_input("many.jsonl", to_jsonl(docs));
  std::vector<std::string> outs = {"t1", "t3", "t8"};
  const int threads[] = {1, 3, 8};
  for (int k = 0; k < 3; ++k) {
    auto o = options(outs[k], {in, write_input("extra.txt", "one more document")});
    o.threads = threads[k];
    o.chunk_bytes = 2048;  // many chunks, so workers really interleave
    o.shard_tokens = 5000;
    o.val_tokens = 3000;
    o.name_prefix = "x";
    std::ostringstream log;
    run_prepare(o, log);
  }
  const auto names = shard_names("t1");
  ASSERT_GT(names.size(), 3u);
  EXPECT_EQ(shard_names("t3"), names);
  EXPECT_EQ(shard_names("t8"), names);
  for (const auto& n : names) {
    EXPECT_EQ(file_bytes(dir_ / "t3" / n), file_bytes(dir_ / "t1" / n)) << n;
    EXPECT_EQ(file_bytes(dir_ / "t8" / n), file_bytes(dir_ / "t1" / n)) << n;
  }
  auto all_docs = docs;
  all_docs.push_back("one more document");
  EXPECT_EQ(read_all("t1"), expected_stream(all_docs));
}

TEST_F(Prepare, TrainingShardsFeedMmapTokenSource) {
  const auto docs = sample_docs(30, 7);
  auto o = options("out", {write_input("d.jsonl", to_jsonl(docs))});
  o.val_tokens = 50;
  o.shard_tokens = 400;
  std::ostringstream log;
  run_prepare(o, log);
  const auto stream = expected_stream(docs);
  trainkit::data::mmap_token_source src(trainkit::data::mmap_source_config{
      .pattern = (dir_ / "out" / "fineweb_train_*.bin").string(), .batch_size = 2, .seq_len = 16});
  trainkit::host_batch b;
  src.next(b);
  // llm.c order: row r of batch 0 reads the first training tokens from offset r*T.
  for (int r = 0; r < 2; ++r)
    for (int t = 0; t < 16; ++t) {
      EXPECT_EQ(b.inputs[r * 16 + t], stream[50 + r * 16 + t]);
      EXPECT_EQ(b.targets[r * 16 + t], stream[50 + r * 16 + t + 1]);
    }
}

TEST_F(Prepare, BadJsonLineStopsNamingFileAndLine) {
  const auto docs = sample_docs(4, 4);
  std::string jsonl =
      to_jsonl({docs[0], docs[1]}) + "{\"text\": \"unterminated\n" + to_jsonl({docs[2], docs[3]});
  const std::string in = write_input("bad.jsonl", jsonl);
  auto o = options("out", {in});
  std::ostringstream log;
  try {
    run_prepare(o, log);
    FAIL() << "expected format_error";
  } catch (const trainkit::format_error& e) {
    EXPECT_NE(std::string(e.what()).find(in + ":3: malformed JSON"), std::string::npos) << e.what();
  }
  // Stopped before the val shard filled: nothing under a final shard name.
  for (const auto& n : shard_names("out")) EXPECT_FALSE(n.ends_with(".bin")) << n;
}

TEST_F(Prepare, MissingTextFieldStopsNamingLine) {
  const std::string in =
      write_input("nofield.jsonl", to_jsonl({"a"}) + "{\"body\": \"x\"}\n" + to_jsonl({"b"}));
  auto o = options("out", {in});
  o.val_tokens = 0;
  std::ostringstream log;
  try {
    run_prepare(o, log);
    FAIL() << "expected format_error";
  } catch (const trainkit::format_error& e) {
    EXPECT_NE(std::string(e.what()).find(in + ":2: no string field \"text\""), std::string::npos)
        << e.what();
  }
}

TEST_F(Prepare, SkipModeCountsBadDocumentsAndKeepsTheRest) {
  const auto docs = sample_docs(6, 5);
  const std::string jsonl = to_jsonl({docs[0], docs[1]}) + "not json\n" + to_jsonl({docs[2]}) +
                            "{\"text\": 7}\n" + to_jsonl({docs[3]});
  auto o =
      options("out", {write_input("mixed.jsonl", jsonl),
                      write_input("bad.txt", std::string("ok\n\xFF\xFE") + "x"),
                      (dir_ / "in" / "missing.txt").string(), write_input("good.txt", docs[4])});
  o.on_bad_input = bad_input_policy::skip;
  o.val_tokens = 0;
  std::ostringstream log;
  run_prepare(o, log);
  EXPECT_EQ(read_all("out"), expected_stream({docs[0], docs[1], docs[2], docs[3], docs[4]}));
  EXPECT_NE(log.str().find("skipped 4 bad document(s)"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("bad.txt:2: invalid UTF-8"), std::string::npos) << log.str();
}

TEST_F(Prepare, InvalidUtf8CanBeReplaced) {
  auto o = options("out", {write_input("latin1.txt",
                                       "Gr\xFC\xDF"
                                       "e")});
  o.invalid_utf8 = trainkit::tokenizer::invalid_utf8::replace;
  o.val_tokens = 0;
  std::ostringstream log;
  run_prepare(o, log);
  EXPECT_EQ(read_all("out"), expected_stream({"Gr\xEF\xBF\xBD\xEF\xBF\xBD"
                                              "e"}));
}

TEST_F(Prepare, MissingInputFailsBeforeAnyWork) {
  auto o = options("out", {write_input("a.txt", "fine"), (dir_ / "in" / "nope.txt").string()});
  std::ostringstream log;
  try {
    run_prepare(o, log);
    FAIL() << "expected io_error";
  } catch (const trainkit::io_error& e) {
    EXPECT_NE(std::string(e.what()).find("nope.txt"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir_ / "out" / "fineweb_val_000000.bin"));
}

TEST_F(Prepare, RefusesToMixWithExistingShardsUnlessOverwrite) {
  const std::string in = write_input("a.txt", "some text");
  auto o = options("out", {in});
  std::ostringstream log;
  run_prepare(o, log);
  EXPECT_THROW(run_prepare(o, log), trainkit::config_error);
  o.overwrite = true;
  EXPECT_EQ(run_prepare(o, log), 0);
  EXPECT_EQ(shard_names("out"), std::vector<std::string>{"fineweb_val_000000.bin"});
}

TEST_F(Prepare, ReadsStdinAsJsonlOrText) {
  const auto docs = sample_docs(3, 6);
  for (const bool jsonl : {true, false}) {
    std::istringstream fake(jsonl ? to_jsonl(docs) : docs[0]);
    auto* saved = std::cin.rdbuf(fake.rdbuf());
    auto o = options(jsonl ? "j" : "t", {"-"});
    o.val_tokens = 0;
    std::ostringstream log;
    run_prepare(o, log);
    std::cin.rdbuf(saved);
    EXPECT_EQ(read_all(jsonl ? "j" : "t"), expected_stream(jsonl ? docs : std::vector{docs[0]}));
  }
}

TEST(PrepareCli, FlagsFillOptions) {
  CLI::App app;
  auto* sub = app.add_subcommand("prepare");
  prepare_options o;
  gpt_fineweb::add_prepare_options(*sub, o);
  app.parse(
      "prepare --vocab v --out o --shard-tokens 1000 --val-tokens 10 --threads 3 "
      "--name-prefix edu --format jsonl --on-bad-input skip in1.txt in2.jsonl",
      false);
  EXPECT_EQ(o.inputs, (std::vector<std::string>{"in1.txt", "in2.jsonl"}));
  EXPECT_EQ(o.vocab, "v");
  EXPECT_EQ(o.out, "o");
  EXPECT_EQ(o.on_bad_input, bad_input_policy::skip);
  EXPECT_EQ(o.threads, 3);
  EXPECT_EQ(o.val_tokens, 10);
  EXPECT_EQ(o.shard_tokens, 1000);
  EXPECT_EQ(o.name_prefix, "edu");
  EXPECT_EQ(o.format, gpt_fineweb::input_format::jsonl);

  prepare_options o2;
  CLI::App app2;
  gpt_fineweb::add_prepare_options(*app2.add_subcommand("prepare"), o2);
  EXPECT_THROW(app2.parse("prepare --out o --on-bad-input ignore x.txt", false), CLI::ParseError);
}
