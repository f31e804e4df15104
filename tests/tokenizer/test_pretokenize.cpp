// tests/tokenizer/test_pretokenize.cpp — GPT-2 pre-tokenization against the reference pattern.
//
// The golden pieces come from Python's `regex` module running tiktoken's own pattern on the
// fixture texts (tools/make_tokenizer_fixtures.py), so these tests need no vocabulary: they pin
// the scanner to the regular expression, including Unicode classes, on every fixture case.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer_test_support.hpp"
#include "trainkit/tokenizer/pretokenize.hpp"

using trainkit::tokenizer::char_class;
using trainkit::tokenizer::classify;
using trainkit::tokenizer::gpt2_pieces;

TEST(Pretokenize, MatchesReferencePatternOnEveryFixture) {
  int checked = 0;
  for (const auto& c : tokenizer_test::golden()["cases"]) {
    if (!c.contains("pieces")) continue;
    const std::string text = c["text"];
    const auto expected = c["pieces"].get<std::vector<std::string>>();
    EXPECT_EQ(gpt2_pieces(text), expected) << "case " << c["name"];
    ++checked;
  }
  EXPECT_GT(checked, 30);
}

TEST(Pretokenize, PiecesConcatenateToInput) {
  const std::string text = "  Hello,\tworld!!  It's 2024...\n\n  \xE4\xBD\xA0\xE5\xA5\xBD  ";
  std::string joined;
  for (const auto& p : gpt2_pieces(text)) {
    EXPECT_FALSE(p.empty());
    joined += p;
  }
  EXPECT_EQ(joined, text);
}

TEST(Pretokenize, WhitespaceRules) {
  using v = std::vector<std::string>;
  EXPECT_EQ(gpt2_pieces("a   b"), (v{"a", "  ", " b"}));        // \s+(?!\S) then " ?\p{L}+"
  EXPECT_EQ(gpt2_pieces("a\n\nb"), (v{"a", "\n", "\n", "b"}));  // last \n alone (\s)
  EXPECT_EQ(gpt2_pieces("a  "), (v{"a", "  "}));                // trailing run (\s++$)
  EXPECT_EQ(gpt2_pieces(" \t x"), (v{" \t", " x"}));
  EXPECT_EQ(gpt2_pieces("don't"), (v{"don", "'t"}));
  EXPECT_EQ(gpt2_pieces("DON'T"), (v{"DON", "'", "T"}));  // contractions: lower case
}

TEST(Pretokenize, ClassesFollowUnicode) {
  EXPECT_EQ(classify(U'a'), char_class::letter);
  EXPECT_EQ(classify(U'\u00E9'), char_class::letter);  // é
  EXPECT_EQ(classify(U'\u4F60'), char_class::letter);  // 你 (Lo)
  EXPECT_EQ(classify(U'\u0301'), char_class::other);   // combining acute (Mn)
  EXPECT_EQ(classify(U'7'), char_class::number);
  EXPECT_EQ(classify(U'\u00BD'), char_class::number);     // ½ (No)
  EXPECT_EQ(classify(U'\u2167'), char_class::number);     // Ⅷ (Nl)
  EXPECT_EQ(classify(U'\u00A0'), char_class::space);      // no-break space (Zs)
  EXPECT_EQ(classify(U'\u2028'), char_class::space);      // line separator (Zl)
  EXPECT_EQ(classify(U'\u0085'), char_class::space);      // NEL (Cc but White_Space)
  EXPECT_EQ(classify(U'\u200B'), char_class::other);      // zero width space is not White_Space
  EXPECT_EQ(classify(U'\U0001F600'), char_class::other);  // emoji (So)
}

TEST(Pretokenize, InvalidUtf8NamesOffset) {
  try {
    gpt2_pieces("hello \xE4\xBD wor");
    FAIL() << "expected format_error";
  } catch (const trainkit::format_error& e) {
    EXPECT_NE(std::string(e.what()).find("byte offset 6"), std::string::npos) << e.what();
  }
}
