// tests/tokenizer/test_gpt2_tokenizer.cpp — GPT-2 BPE: golden ids, round trips, errors.
//
// Three layers. A tiny hand-made vocabulary (no files needed) pins the merge rule: lowest rank
// first, leftmost on ties, concatenations ranked by id, the long-piece heap path equal to the
// short-piece scan. The full GPT-2 vocabulary (skipped, saying so, when absent) must give
// tiktoken's ids on every fixture case, decode back to the exact bytes, reject or repair
// invalid UTF-8 as asked, and decode the embedded default corpus to its source text. Loading
// must refuse malformed or altered vocabulary files with a message naming the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tokenizer_test_support.hpp"
#include "../../examples/gpt_fineweb/data/default_corpus.hpp"
#include "trainkit/tokenizer/gpt2_tokenizer.hpp"

namespace {

using trainkit::format_error;
using trainkit::tokenizer::encode_options;
using trainkit::tokenizer::gpt2_tokenizer;
using trainkit::tokenizer::invalid_utf8;
using trainkit::tokenizer::special_tokens;
namespace detail = trainkit::tokenizer::detail;
using ids = std::vector<std::uint32_t>;

// JSON string literal for a token's bytes, spelled through GPT-2's byte map.
std::string spell(const std::string& bytes) {
  std::string s = "\"";
  for (unsigned char b : bytes) {
    const char32_t cp = detail::byte_to_unicode[b];
    if (cp == '"' || cp == '\\') {
      s += '\\';
      s += char(cp);
    } else if (cp < 0x80) {
      s += char(cp);
    } else {  // all images above 0x7F are < 0x800: two UTF-8 bytes
      s += char(0xC0 | (cp >> 6));
      s += char(0x80 | (cp & 0x3F));
    }
  }
  return s + "\"";
}

std::string spell_bare(const std::string& bytes) {
  const std::string s = spell(bytes);
  std::string out;
  for (std::size_t i = 1; i + 1 < s.size(); ++i)
    if (s[i] != '\\') out += s[i];
  return out;
}

// A byte-level vocabulary in GPT-2's file format: the 256 bytes in tiktoken's order, then the
// given merges (ids 256...), then <|endoftext|>.
struct tiny_vocab {
  std::string encoder_json;
  std::string vocab_bpe;
};

tiny_vocab make_tiny_vocab(const std::vector<std::pair<std::string, std::string>>& merges) {
  std::vector<std::string> tokens;
  for (int pass = 0; pass < 2; ++pass)
    for (unsigned b = 0; b < 256; ++b)
      if (detail::byte_is_self_printed(b) == (pass == 0)) tokens.emplace_back(1, char(b));
  tiny_vocab v;
  v.vocab_bpe = "#version: 0.2\n";
  for (const auto& [l, r] : merges) {
    tokens.push_back(l + r);
    v.vocab_bpe += spell_bare(l) + " " + spell_bare(r) + "\n";
  }
  v.encoder_json = "{";
  for (std::size_t id = 0; id < tokens.size(); ++id)
    v.encoder_json += spell(tokens[id]) + ": " + std::to_string(id) + ", ";
  v.encoder_json += "\"<|endoftext|>\": " + std::to_string(tokens.size()) + "}";
  return v;
}

gpt2_tokenizer tiny(const std::vector<std::pair<std::string, std::string>>& merges) {
  const tiny_vocab v = make_tiny_vocab(merges);
  return gpt2_tokenizer(v.encoder_json, v.vocab_bpe);
}

// Obviously-correct BPE for comparison: a list of byte strings, merge the leftmost lowest-rank
// adjacent pair until none forms a token.
ids reference_bpe(const gpt2_tokenizer& t, const std::string& piece) {
  std::vector<std::string> parts;
  for (char c : piece) parts.emplace_back(1, c);
  for (;;) {
    std::uint32_t best = UINT32_MAX;
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i)
      if (auto r = t.token_id(parts[i] + parts[i + 1]); r && *r < best) {
        best = *r;
        at = i;
      }
    if (best == UINT32_MAX) break;
    parts[at] += parts[at + 1];
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  ids out;
  for (const auto& p : parts) out.push_back(*t.token_id(p));
  return out;
}

}  // namespace

// ---- tiny vocabulary: the merge rule itself ----------------------------------------------------

TEST(Gpt2TokenizerTiny, MergesLowestRankFirst) {
  // ranks: "bc" (256) before "ab" (257), so "abc" -> a + bc, not ab + c.
  const gpt2_tokenizer t = tiny({{"b", "c"}, {"a", "b"}});
  const ids got = t.encode("abc");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], *t.token_id("a"));
  EXPECT_EQ(got[1], *t.token_id("bc"));
  EXPECT_EQ(t.decode(got), "abc");
}

TEST(Gpt2TokenizerTiny, LeftmostPairWinsTies) {
  // "aaa": pairs (a,a) at 0 and 1 have the same rank; the leftmost merges -> "aa" + "a".
  const gpt2_tokenizer t = tiny({{"a", "a"}});
  EXPECT_EQ(t.encode("aaa"), (ids{*t.token_id("aa"), *t.token_id("a")}));
  EXPECT_EQ(t.encode("aaaa"), (ids{*t.token_id("aa"), *t.token_id("aa")}));
}

TEST(Gpt2TokenizerTiny, SpecialTokenOnlyWhenAsked) {
  const gpt2_tokenizer t = tiny({{"a", "b"}});
  const std::uint32_t eot = t.eot_token();
  EXPECT_EQ(eot, static_cast<std::uint32_t>(t.vocab_size() - 1));
  const ids plain = t.encode("ab<|endoftext|>ab");
  EXPECT_EQ(std::count(plain.begin(), plain.end(), eot), 0);
  const ids special =
      t.encode("ab<|endoftext|>ab", encode_options{.special = special_tokens::recognised});
  EXPECT_EQ(special, (ids{256, eot, 256}));
  EXPECT_EQ(t.decode(plain), t.decode(special));
}

TEST(Gpt2TokenizerTiny, LinearAndHeapMergesEqualReference) {
  // Pieces longer than bpe_linear_max_bytes take the heap path. Run both paths on the same
  // random strings over a vocabulary with overlapping merges and compare them with the naive
  // reference (and, through encode, the dispatch between them).
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"a", "b"},  {"b", "a"},   {"ab", "a"}, {"a", "a"},  {"ba", "b"},
      {"aa", "b"}, {"ab", "ab"}, {"c", "a"},  {"ca", "b"}, {"b", "b"}};
  const gpt2_tokenizer t = tiny(merges);
  detail::token_table table;
  for (unsigned b = 0; b < 256; ++b) {
    const std::string one(1, char(b));
    table.insert(one, *t.token_id(one));
  }
  for (const auto& [l, r] : merges) table.insert(l + r, *t.token_id(l + r));
  std::mt19937 rng(42);
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t n = trial < 150 ? 2 + rng() % 40 : 200 + rng() % 800;
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s += "abc"[rng() % 3];
    const ids expected = reference_bpe(t, s);
    ids linear, heap;
    detail::bpe_scratch scratch;
    detail::bpe_impl::merge_linear(s, table, scratch, linear);
    detail::bpe_impl::merge_heap(s, table, heap);
    ASSERT_EQ(linear, expected) << s;
    ASSERT_EQ(heap, expected) << s;
    ASSERT_EQ(t.encode(s), expected) << s;
  }
}

TEST(Gpt2TokenizerTiny, RejectsMalformedFiles) {
  const tiny_vocab good = make_tiny_vocab({{"a", "b"}, {"ab", "c"}});
  EXPECT_NO_THROW(gpt2_tokenizer(good.encoder_json, good.vocab_bpe));

  auto message = [](const std::string& enc, const std::string& bpe) -> std::string {
    try {
      gpt2_tokenizer t(enc, bpe, "E.json", "V.bpe");
    } catch (const format_error& e) {
      return e.what();
    }
    return "(no error)";
  };
  // truncated JSON
  EXPECT_NE(message(good.encoder_json.substr(0, 100), good.vocab_bpe).find("E.json:"),
            std::string::npos);
  // merges in a different order than the ids
  const std::string swapped = "#version: 0.2\nab c\na b\n";
  EXPECT_NE(message(good.encoder_json, swapped).find("V.bpe:2"), std::string::npos);
  // one merge missing
  EXPECT_NE(message(good.encoder_json, "#version: 0.2\na b\n").find("V.bpe"), std::string::npos);
  // a merge line that is not two tokens
  EXPECT_NE(message(good.encoder_json, "#version: 0.2\na b\nabc\n").find("V.bpe:3"),
            std::string::npos);
  // no <|endoftext|>
  std::string no_eot = good.encoder_json;
  no_eot.replace(no_eot.find("<|endoftext|>"), 13, "<|other|>");
  EXPECT_NE(message(no_eot, good.vocab_bpe).find("E.json"), std::string::npos);
}

// ---- the full GPT-2 vocabulary -----------------------------------------------------------------

TEST(Gpt2Tokenizer, LoadsStandardVocabulary) {
  REQUIRE_FULL_VOCAB();
  const gpt2_tokenizer& t = *tokenizer_test::full_tokenizer();
  EXPECT_EQ(t.vocab_size(), 50257);
  EXPECT_EQ(t.eot_token(), 50256u);
  EXPECT_EQ(t.token_bytes(50256), "<|endoftext|>");
  EXPECT_EQ(t.token_id(" the"), std::optional<std::uint32_t>(262));  // GPT-2's " the"
}

TEST(Gpt2Tokenizer, GoldenIdsFromTiktoken) {
  REQUIRE_FULL_VOCAB();
  const gpt2_tokenizer& t = *tokenizer_test::full_tokenizer();
  int checked = 0;
  for (const auto& c : tokenizer_test::golden()["cases"]) {
    const std::string text = c["text"];
    const auto expected = c["ids"].get<ids>();
    encode_options opt;
    if (c["special"].get<bool>()) opt.special = special_tokens::recognised;
    EXPECT_EQ(t.encode(text, opt), expected) << "case " << c["name"];
    EXPECT_EQ(t.decode(expected), text) << "case " << c["name"];
    ++checked;
  }
  EXPECT_GT(checked, 40);
}

TEST(Gpt2Tokenizer, RoundTripsRandomUnicode) {
  REQUIRE_FULL_VOCAB();
  const gpt2_tokenizer& t = *tokenizer_test::full_tokenizer();
  std::mt19937 rng(1234);
  const char32_t pools[][2] = {{0x20, 0x7E},       {0x09, 0x0D},     {0xA0, 0x24F},
                               {0x300, 0x36F},     {0x400, 0x4FF},   {0x3040, 0x30FF},
                               {0x4E00, 0x9FFF},   {0xAC00, 0xD7A3}, {0x1F300, 0x1FAFF},
                               {0x10000, 0x10FFFF}};
  for (int trial = 0; trial < 300; ++trial) {
    std::string s;
    const int len = 1 + static_cast<int>(rng() % 200);
    for (int i = 0; i < len; ++i) {
      const auto& pool = pools[rng() % std::size(pools)];
      char32_t cp = pool[0] + rng() % (pool[1] - pool[0] + 1);
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
      std::string one;
      if (cp < 0x80)
        one = char(cp);
      else if (cp < 0x800)
        one = {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
      else if (cp < 0x10000)
        one = {char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
      else
        one = {char(0xF0 | (cp >> 18)), char(0x80 | ((cp >> 12) & 0x3F)),
               char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
      s += one;
    }
    const ids got = t.encode(s);
    for (std::uint32_t id : got) ASSERT_LT(id, 50256u);  // ordinary text never yields EOT
    ASSERT_EQ(t.decode(got), s);
  }
}

TEST(Gpt2Tokenizer, EveryPieceMatchesReferenceBpe) {
  REQUIRE_FULL_VOCAB();
  const gpt2_tokenizer& t = *tokenizer_test::full_tokenizer();
  // Independent of tiktoken: each piece's ids equal the naive merge loop's.
  const std::string text =
      tokenizer_test::read_file(tokenizer_test::fixtures_dir() / "default_corpus_head.txt");
  for (const auto& piece : trainkit::tokenizer::gpt2_pieces(text))
    ASSERT_EQ(t.encode(piece), reference_bpe(t, piece)) << piece;
}

TEST(Gpt2Tokenizer, InvalidUtf8IsAnErrorOrReplaced) {
  REQUIRE_FULL_VOCAB();
  const gpt2_tokenizer& t = *tokenizer_test::full_tokenizer();
  const std::string bad = "caf\xC3\xA9 ok \xFF\xFE tail \xE2\x82";
  try {
    (void)t.encode(bad);
    FAIL() << "expected format_error";
  } catch (const format_error& e) {
    EXPECT_NE(std::string(e.what()).find("byte offset 9"), std::string::npos) << e.what();
  }
  // With special tokens recognised the offset still counts from the start of the text.
  try {
    (void)t.encode("a<|endoftext|>b\x80", encode_options{.special = special_tokens::recognised});
    FAIL() << "expected format_error";
  } catch (const format_error& e) {
    EXPECT_NE(std::string(e.what()).find("byte offset 15"), std::string::npos) << e.what();
  }
  const ids replaced = t.encode(bad, encode_options{.on_invalid = invalid_utf8::replace});
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(t.decode(replaced), "caf\xC3\xA9 ok " + r + r + " tail " + r);
  EXPECT_EQ(replaced, t.encode("caf\xC3\xA9 ok " + r + r + " tail " + r));
}

TEST(Gpt2Tokenizer, InvalidUtf8FixturesMatchPythonReplacement) {
  REQUIRE_FULL_VOCAB();
  const gpt2_tokenizer& t = *tokenizer_test::full_tokenizer();
  for (const auto& c : tokenizer_test::golden()["invalid_utf8"]) {
    std::string raw;
    for (int b : c["bytes"]) raw += static_cast<char>(b);
    const auto expected = c["replaced_ids"].get<ids>();
    EXPECT_EQ(t.encode(raw, encode_options{.on_invalid = invalid_utf8::replace}), expected)
        << "case " << c["name"];
    const std::string offset = "byte offset " + std::to_string(c["first_bad_offset"].get<int>());
    try {
      (void)t.encode(raw);
      ADD_FAILURE() << "case " << c["name"] << ": expected format_error";
    } catch (const format_error& e) {
      EXPECT_NE(std::string(e.what()).find(offset), std::string::npos) << e.what();
    }
  }
}

TEST(Gpt2Tokenizer, DecodeRejectsOutOfRangeIds) {
  REQUIRE_FULL_VOCAB();
  const gpt2_tokenizer& t = *tokenizer_test::full_tokenizer();
  const ids bad{464, 50257};
  EXPECT_THROW((void)t.decode(bad), format_error);
}

TEST(Gpt2Tokenizer, RefusesAlteredVocabularyFiles) {
  REQUIRE_FULL_VOCAB();
  const auto dir = tokenizer_test::full_vocab_dir();
  const auto tmp = std::filesystem::temp_directory_path() / "trainkit_tok_altered_vocab";
  std::filesystem::create_directories(tmp);
  std::string enc = tokenizer_test::read_file(dir / "encoder.json");
  enc[enc.size() / 2] = enc[enc.size() / 2] == '1' ? '2' : '1';  // one digit changed
  std::ofstream(tmp / "encoder.json", std::ios::binary) << enc;
  std::filesystem::copy_file(dir / "vocab.bpe", tmp / "vocab.bpe",
                             std::filesystem::copy_options::overwrite_existing);
  try {
    (void)gpt2_tokenizer::from_directory(tmp);
    FAIL() << "expected format_error";
  } catch (const format_error& e) {
    EXPECT_NE(std::string(e.what()).find("encoder.json: SHA-256"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)gpt2_tokenizer::from_directory(tmp / "missing"), trainkit::io_error);
  std::filesystem::remove_all(tmp);
}

TEST(Gpt2Tokenizer, VocabDirFromFlagOrEnvironment) {
  EXPECT_THROW((void)trainkit::tokenizer::resolve_vocab_dir("/nonexistent/trainkit/vocab"),
               trainkit::config_error);
  const auto tmp = std::filesystem::temp_directory_path();
  EXPECT_EQ(trainkit::tokenizer::resolve_vocab_dir(tmp.string()), tmp);
  // Restore the caller's variable afterwards: other tests in this process may rely on it.
  const char* saved = std::getenv("TRAINKIT_GPT2_VOCAB");
  const std::optional<std::string> original =
      saved ? std::optional<std::string>(saved) : std::nullopt;
  ::setenv("TRAINKIT_GPT2_VOCAB", tmp.c_str(), 1);
  EXPECT_EQ(trainkit::tokenizer::resolve_vocab_dir(""), tmp);
  ::setenv("TRAINKIT_GPT2_VOCAB", "/nonexistent/trainkit/vocab", 1);
  try {
    (void)trainkit::tokenizer::resolve_vocab_dir("");
    ADD_FAILURE() << "expected config_error for a missing $TRAINKIT_GPT2_VOCAB";
  } catch (const trainkit::config_error& e) {
    EXPECT_NE(std::string(e.what()).find("TRAINKIT_GPT2_VOCAB=/nonexistent"), std::string::npos)
        << e.what();
  }
  // Neither flag nor variable: the vocabulary bundled in the repository.
  ::unsetenv("TRAINKIT_GPT2_VOCAB");
  const auto bundled = std::filesystem::path(TRAINKIT_SOURCE_DIR) / "vocab" / "gpt2";
  ASSERT_TRUE(trainkit::tokenizer::bundled_vocab_dir().has_value());
  EXPECT_TRUE(std::filesystem::equivalent(*trainkit::tokenizer::bundled_vocab_dir(), bundled));
  EXPECT_TRUE(std::filesystem::equivalent(trainkit::tokenizer::resolve_vocab_dir(""), bundled));
  if (original) ::setenv("TRAINKIT_GPT2_VOCAB", original->c_str(), 1);
}

TEST(Gpt2Tokenizer, BundledVocabularyIsOpenAisFiles) {
  // from_directory verifies the SHA-256 of both files; the ids are GPT-2's.
  const auto dir = std::filesystem::path(TRAINKIT_SOURCE_DIR) / "vocab" / "gpt2";
  const gpt2_tokenizer t = gpt2_tokenizer::from_directory(dir);
  EXPECT_EQ(t.vocab_size(), 50257);
  EXPECT_EQ(t.encode("Hello world"), (std::vector<std::uint32_t>{15496, 995}));
  EXPECT_TRUE(std::filesystem::exists(dir / "LICENSE"));
}

// ---- the embedded default corpus ---------------------------------------------------------------

TEST(DefaultCorpus, TokensAreGpt2IdsWithDocumentsAfterEot) {
  const auto& train = gpt_fineweb::default_corpus_tokens;
  const auto& val = gpt_fineweb::default_corpus_val_tokens;
  EXPECT_GT(std::size(train), 50000u);
  EXPECT_GT(std::size(val), std::size(train) / 20);
  for (std::uint16_t tok : train) ASSERT_LT(tok, 50257);
  for (std::uint16_t tok : val) ASSERT_LT(tok, 50257);
  EXPECT_EQ(train[0], 50256);  // EOT before the first document
  EXPECT_GT(std::count(std::begin(train), std::end(train), std::uint16_t{50256}), 10);
}

TEST(DefaultCorpus, DecodesToItsSourceText) {
  REQUIRE_FULL_VOCAB();
  const gpt2_tokenizer& t = *tokenizer_test::full_tokenizer();
  // The fixture is the generator's source text of the first documents, each preceded by the
  // spelling of <|endoftext|>: what the first tokens must decode to.
  const std::string head =
      tokenizer_test::read_file(tokenizer_test::fixtures_dir() / "default_corpus_head.txt");
  const auto& train = gpt_fineweb::default_corpus_tokens;
  const std::span<const std::uint16_t> first400(std::begin(train), 400);
  const std::string text = t.decode(first400);
  ASSERT_LT(text.size(), head.size());
  EXPECT_EQ(head.substr(0, text.size()), text);
  // The first document re-encodes (with trainkit's encoder) to exactly the embedded ids.
  const auto* second = std::find(std::begin(train) + 1, std::end(train), std::uint16_t{50256});
  const std::span<const std::uint16_t> first_doc(std::begin(train) + 1, second);
  const std::string doc = head.substr(13, head.find("<|endoftext|>", 13) - 13);
  const ids again = t.encode(doc);
  EXPECT_TRUE(std::equal(first_doc.begin(), first_doc.end(), again.begin(), again.end()));
}
