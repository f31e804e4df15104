// flag_names.hpp — gpt_fineweb speaks its flags, the library speaks its config fields.
//
// Library errors name the field that is out of range ("adamw_config: grad_clip must be ...",
// "trainer_config.steps must be >= 0"); a user who typed `--grad-clip -1` must read the flag.
// This table maps every config field the program fills from a flag to that flag, and
// `name_flags` rewrites a library message with it before the program prints it. AdamW's fields
// have a row in both spellings ("struct: field" as its validate() writes them today, and the
// trainer's "struct.field"). tests/examples/gpt_fineweb_cli_test.cmake checks the messages of
// bad flags, so a library message that changes its wording fails there, not in front of a user.
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace gpt_fineweb {

struct field_flag {
  std::string_view field;  // as library messages name it
  std::string_view flag;   // as the user types it
};

inline constexpr std::array<field_flag, 25> field_flags{{
    // trainer_config (trainer/trainer.hpp), filled by make_trainer_config
    {"trainer_config.steps", "--steps"},
    {"trainer_config.total_batch_tokens", "--total-batch-tokens"},
    {"trainer_config.eval_every", "--eval-every"},
    {"trainer_config.eval_batches", "--eval-batches"},
    {"trainer_config.ckpt_every", "--ckpt-every"},
    {"trainer_config.resume", "--resume"},
    {"the training source's batch_size x seq_len", "--batch x --seq"},
    // lr_schedule (optim/schedule.hpp)
    {"lr_schedule: max_lr", "--lr"},
    {"lr_schedule: warmup_steps", "--warmup"},
    {"lr_schedule: final_lr_frac", "--final-lr-frac"},
    {"lr_schedule: total_steps", "--steps"},
    // adamw_config (optim/adamw_config.hpp), filled by make_adamw_config
    {"adamw_config: beta1", "--beta1"},
    {"adamw_config: beta2", "--beta2"},
    {"adamw_config: eps", "--eps"},
    {"adamw_config: weight_decay", "--weight-decay"},
    {"adamw_config: grad_clip", "--grad-clip"},
    {"adamw_config.beta1", "--beta1"},
    {"adamw_config.beta2", "--beta2"},
    {"adamw_config.eps", "--eps"},
    {"adamw_config.weight_decay", "--weight-decay"},
    {"adamw_config.grad_clip", "--grad-clip"},
    // sampling_config (model/sampling.hpp), filled from --temperature / --top-k
    {"sampling_config.temperature", "--temperature"},
    {"sampling_config.top_k", "--top-k"},
    // mmap_source_config (data/mmap_token_source.hpp), data::parse_order
    {"mmap_source_config.order", "--order"},
    // tokenizer::resolve_vocab_dir's directory argument (tokenizer/vocab_files.hpp)
    {"vocab_dir", "--vocab"},
}};

/// `message` with every config field of the table replaced by its flag.
inline std::string name_flags(std::string message) {
  for (const field_flag& f : field_flags) {
    for (auto at = message.find(f.field); at != std::string::npos;
         at = message.find(f.field, at + f.flag.size()))
      message.replace(at, f.field.size(), f.flag);
  }
  return message;
}

}  // namespace gpt_fineweb
