// tests/model/llama_recipe_config.hpp — the small Llama shape the recipe tests share
// (test_llama_recipe.cpp: the model against PyTorch; test_llama_recipe_training.cpp: through the
// trainer): 4 layers (two U-net pairs), GQA, a padded vocabulary.
#pragma once

#include "trainkit/model/llama/config.hpp"

namespace llama_recipe_test {

inline trainkit::model::llama_config small_config() {
  trainkit::model::llama_config c;
  c.max_seq_len = 16;
  c.vocab_size = 100;
  c.padded_vocab_size = 128;
  c.num_layers = 4;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.channels = 32;
  c.hidden_size = 64;
  return c;
}

}  // namespace llama_recipe_test
