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
#include "trainkit/model/llama/config.hpp"
#include "trainkit/model/sampling.hpp"
#include "trainkit/optim/adamw_config.hpp"
#include "trainkit/optim/muon_config.hpp"
#include "trainkit/tokenizer/vocab_files.hpp"
#include "trainkit/trainer/config.hpp"

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
        c.lr_scales.head = 0;
        c.validate();
      },
      "adamw_config.lr_scales.head", "--lr-head-scale must be finite and > 0");
  expect_flag_named(
      [] {
        tk::optim::adamw_config c;
        c.lr_scales.norm = -1;
        c.validate();
      },
      "adamw_config.lr_scales.norm", "--lr-scalar-scale must be finite and > 0");
  expect_flag_named(
      [] {
        tk::optim::adamw_config c;
        c.weight_decay = -1;
        c.validate();
      },
      "adamw_config: weight_decay", "--weight-decay must be finite and >= 0");
}

// The Llama family's shape flags (families/llama.hpp) fill llama_config; the fields its checks
// name are the flags. check_hf_llama_exportable (model/llama/hf.hpp) is declared in a header with
// Eigen, so its two messages are checked through the program in gpt_fineweb_families.py.
TEST(FlagNames, LlamaFieldsAreTheirFlags) {
  expect_flag_named(
      [] {
        auto c = tk::model::llama_config::preset("d2");
        c.num_kv_heads = 3;
        c.validate();
      },
      "llama_config.num_kv_heads", "--kv-heads 3 must divide num_heads 2");
  EXPECT_EQ(gpt_fineweb::name_flags("llama_config.mlp is relu2: x"), "--mlp is relu2: x");
  EXPECT_EQ(gpt_fineweb::name_flags("llama_config.qk_norm is on: x"), "--qk-norm is on: x");
}

// The Muon family's flags (families/muon.hpp) fill muon_config; --lr is its schedule's peak.
TEST(FlagNames, MuonFieldsAreTheirFlags) {
  auto muon = [](auto mutate) {
    return [=] {
      tk::optim::muon_config c;
      mutate(c);
      c.validate();
    };
  };
  expect_flag_named(muon([](tk::optim::muon_config& c) { c.lr_ratio = -1; }),
                    "muon_config.lr_ratio", "--muon-lr must be finite and > 0");
  expect_flag_named(muon([](tk::optim::muon_config& c) { c.momentum = 1; }), "muon_config.momentum",
                    "--muon-momentum must be in [0,1)");
  expect_flag_named(muon([](tk::optim::muon_config& c) { c.ns_steps = 0; }), "muon_config.ns_steps",
                    "--muon-ns-steps must be in [1,100]: 0");
  // The variants' fields (issue 38), longer names before their prefixes in the table.
  expect_flag_named(muon([](tk::optim::muon_config& c) {
                      c.orthogonalizer = tk::optim::muon_orthogonalizer::polar_express;
                      c.ns_steps = 6;
                    }),
                    "muon_config.orthogonalizer",
                    "--muon-ns-steps must be in [1,5] with --muon-ns polar: 6");
  expect_flag_named(muon([](tk::optim::muon_config& c) { c.normuon_beta2 = 1; }),
                    "muon_config.normuon_beta2", "--muon-normuon-beta2 must be in [0,1): 1");
  expect_flag_named(muon([](tk::optim::muon_config& c) { c.momentum_warmup_start = 1; }),
                    "muon_config.momentum_warmup_start", "--muon-momentum-start must be in [0,1)");
  expect_flag_named(muon([](tk::optim::muon_config& c) { c.momentum_warmup_steps = -1; }),
                    "muon_config.momentum_warmup_steps", "--muon-momentum-warmup must be >= 0");
  expect_flag_named(muon([](tk::optim::muon_config& c) { c.weight_decay = -1; }),
                    "muon_config.weight_decay", "--muon-weight-decay must be finite and >= 0");
}

// The trainer's one check (trainer/config.hpp) names fields by their full path; every problem of
// a configuration at once, each named by its flag.
TEST(FlagNames, TrainerCheckFieldsAreTheirFlags) {
  const tk::run_shape shape{.batch_size = 8, .seq_len = 64};
  auto check = [&](auto mutate) {
    return [=] {
      tk::trainer_config c;
      mutate(c);
      tk::require_valid(c, shape);
    };
  };
  expect_flag_named(check([](tk::trainer_config& c) { c.steps = -1; }), "trainer_config.steps",
                    "--steps must be >= 0: -1");
  expect_flag_named(check([](tk::trainer_config& c) { c.schedule.warmup_steps = -2; }),
                    "trainer_config.schedule.warmup_steps", "--warmup must be >= 0: -2");
  expect_flag_named(check([](tk::trainer_config& c) { c.schedule.final_lr_frac = 2; }),
                    "trainer_config.schedule.final_lr_frac", "--final-lr-frac must be in [0,1]");
  expect_flag_named(check([](tk::trainer_config& c) { c.schedule.max_lr = -1; }),
                    "trainer_config.schedule.max_lr", "--lr must be finite and >= 0");
  expect_flag_named(check([](tk::trainer_config& c) { c.ckpt_every = -3; }),
                    "trainer_config.ckpt_every", "--ckpt-every must be >= 0: -3");
  // The batch ramp (issue 38).
  expect_flag_named(check([](tk::trainer_config& c) { c.batch_ramp.steps = -1; }),
                    "trainer_config.batch_ramp.steps", "--batch-ramp-steps must be >= 0");
  expect_flag_named(check([](tk::trainer_config& c) { c.grad_clip = -1; }),
                    "trainer_config.grad_clip",
                    "--grad-clip must be finite and >= 0 (0 = off): -1");
  expect_flag_named(check([](tk::trainer_config& c) { c.mfu.peak_tflops = -5; }),
                    "trainer_config.mfu.peak_tflops", "--peak-tflops must be finite and >= 0");
  expect_flag_named(check([](tk::trainer_config& c) { c.total_batch_tokens = 100; }),
                    "the training source's batch_size x seq_len",
                    "--total-batch-tokens 100 is not a multiple of --batch x --seq = 512");
  // Two problems: both named, in one line.
  const std::string both = gpt_fineweb::name_flags(library_message(check([](tk::trainer_config& c) {
    c.steps = -1;
    c.ckpt_every = -3;
  })));
  EXPECT_NE(both.find("--steps must be >= 0: -1; --ckpt-every must be >= 0: -3"), std::string::npos)
      << both;
}

// A header that still writes "struct_name: field" is read through the same row.
TEST(FlagNames, ColonSpellingIsReadThroughTheDottedRow) {
  EXPECT_EQ(gpt_fineweb::name_flags("adamw_config: eps must be finite and > 0: 0"),
            "--eps must be finite and > 0: 0");
  EXPECT_EQ(gpt_fineweb::name_flags("adamw_config.eps must be finite and > 0: 0"),
            "--eps must be finite and > 0: 0");
}

}  // namespace
