// train/sampler.hpp — text sampled from a trained model: `--sample N` alone (commands/sample.hpp)
// and every K steps of training (--sample-every, train/driver.hpp). It works with any model that
// has logits (model::logit_model) and names no model type, so it stays free of Eigen.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <trainkit/model/sampling.hpp>
#include <trainkit/tokenizer/gpt2_tokenizer.hpp>
#include <trainkit/tokenizer/vocab_files.hpp>

#include "options.hpp"

namespace gpt_fineweb {

/// The tokenizer, the prompt's tokens and the settings of --sample, --prompt, --temperature,
/// --top-k and --seed.
struct sampler {
  trainkit::tokenizer::gpt2_tokenizer tokenizer;
  std::vector<std::int32_t>
      prompt;  // <|endoftext|> then the --prompt text, as GPT-2 starts a document
  trainkit::model::sampling_config settings;
  int length = 0;

  static sampler from_options(const train_options& o) {
    namespace tk = trainkit;
    sampler s{
        tk::tokenizer::gpt2_tokenizer::from_directory(tk::tokenizer::resolve_vocab_dir(o.vocab)),
        {},
        {float(o.temperature), o.top_k, o.seed},
        o.sample};
    s.settings.validate();
    s.prompt.push_back(std::int32_t(s.tokenizer.eot_token()));
    for (auto id : s.tokenizer.encode(o.prompt)) s.prompt.push_back(std::int32_t(id));
    return s;
  }

  /// The prompt and its sampled continuation, decoded (a seed per call keeps samples different).
  template <trainkit::model::logit_model Model>
  std::string operator()(Model& model, std::uint64_t seed_offset = 0) const {
    auto cfg = settings;
    cfg.seed += seed_offset;
    const auto out = trainkit::model::generate(model, prompt, length, cfg);
    std::vector<std::uint32_t> ids(prompt.begin() + 1, prompt.end());
    for (auto t : out) ids.push_back(std::uint32_t(t));
    return tokenizer.decode(std::span<const std::uint32_t>(ids));
  }
};

}  // namespace gpt_fineweb
