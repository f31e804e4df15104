// tests/tokenizer/test_sha256.cpp — SHA-256 against the FIPS 180-4 / NIST example vectors.
//
// The vocabulary check is only as good as the hash, so the hash is tested on the published
// vectors (including the multi-block and million-'a' ones) and on incremental updates split at
// every position, which exercises the buffering paths.
#include <gtest/gtest.h>

#include <string>

#include "trainkit/tokenizer/detail/sha256.hpp"

using trainkit::tokenizer::detail::sha256;
using trainkit::tokenizer::detail::sha256_hex;

TEST(Sha256, NistVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(
      sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmn"
                 "opqklmnopqrlmnopqrsmnopqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, MillionAs) {
  sha256 h;
  const std::string chunk(1000, 'a');
  for (int i = 0; i < 1000; ++i) h.update(chunk);
  EXPECT_EQ(h.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, SplitUpdatesEqualOneUpdate) {
  std::string msg;
  for (int i = 0; i < 300; ++i) msg += static_cast<char>(i * 7 + 3);
  const std::string whole = sha256_hex(msg);
  for (std::size_t cut = 0; cut <= msg.size(); ++cut) {
    sha256 h;
    h.update(msg.data(), cut);
    h.update(msg.data() + cut, msg.size() - cut);
    ASSERT_EQ(h.hex_digest(), whole) << "split at " << cut;
  }
}

TEST(Sha256, PaddingBoundaryLengthsDiffer) {
  // Lengths 55, 56 and 64 straddle the one-block / two-block padding boundary.
  EXPECT_NE(sha256_hex(std::string(55, 'x')), sha256_hex(std::string(56, 'x')));
  EXPECT_EQ(sha256_hex(std::string(64, 'a')),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}
