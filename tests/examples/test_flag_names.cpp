// tests/examples/test_flag_names.cpp — gpt_fineweb's messages name the flag, not the config field.
//
// Each case provokes the real library error (not a copied string), so a library message that
// renames its field, or a field the table does not map, fails here: the program's message
// (name_flags of what the library threw) must name the flag and no longer contain the field.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "flag_names.hpp"
#include "trainkit/core/error.hpp"
#include "trainkit/data/order.hpp"
#include "trainkit/model/sampling.hpp"
#include "trainkit/optim/adamw_config.hpp"
#include "trainkit/tokenizer/vocab_files.hpp"

namespace {

namespace tk = trainkit;

// What the library throws for `provoke`.
std::string library_message(const std::function<void()>& provoke) {
  try {
    provoke();
  } catch (const tk::config_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no config_error";
  return {};
}

void expect_flag_named(const std::function<void()>& provoke, const std::string& field,
                       const std::string& flag) {
  const std::string library = library_message(provoke);
  EXPECT_NE(library.find(field), std::string::npos)
      << "the library no longer says " << field << ": " << library;
  const std::string program = gpt_fineweb::name_flags(library);
  EXPECT_NE(program.find(flag), std::string::npos) << program;
  EXPECT_EQ(program.find(field), std::string::npos) << program;
}

TEST(FlagNames, SamplingFieldsAreTheirFlags) {
  expect_flag_named([] { tk::model::sampling_config{.temperature = -1}.validate(); },
                    "sampling_config.temperature", "--temperature must be >= 0");
  expect_flag_named([] { tk::model::sampling_config{.top_k = -2}.validate(); },
                    "sampling_config.top_k", "--top-k must be >= 0: -2");
}

TEST(FlagNames, DataOrderIsTheOrderFlag) {
  expect_flag_named([] { (void)tk::data::parse_order("shuffled"); }, "mmap_source_config.order",
                    "--order 'shuffled' is not a data order");
}

TEST(FlagNames, VocabularyDirectoryIsTheVocabFlag) {
  expect_flag_named([] { (void)tk::tokenizer::resolve_vocab_dir("/nonexistent/trainkit/vocab"); },
                    std::string(tk::tokenizer::vocab_dir_field) + " /nonexistent",
                    "--vocab /nonexistent/trainkit/vocab: not a directory");
}

TEST(FlagNames, AdamwFieldsAreTheirFlags) {
  expect_flag_named(
      [] {
        tk::optim::adamw_config c;
        c.grad_clip = -1;
        c.validate();
      },
      "adamw_config: grad_clip", "--grad-clip must be finite and >= 0");
}

}  // namespace
