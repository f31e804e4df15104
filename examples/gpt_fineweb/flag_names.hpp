// flag_names.hpp — gpt_fineweb speaks its flags, the library speaks its config fields.
//
// Library errors name the field that is out of range by its path, `struct_name.field`
// ("trainer_config.steps must be >= 0: -1", "trainer_config.schedule.max_lr ..."); a user who
// typed `--steps -1` must read the flag. This table maps every config field the program fills
// from a flag to that flag, in that one spelling, and `name_flags` rewrites a library message
// with it before the program prints it. Headers that still write "struct_name: field"
// (adamw_config, lr_schedule) are read through the same rows: name_flags also matches a row's
// path with ": " for its last ".". tests/examples/test_flag_names.cpp provokes the real library
// errors and tests/examples/gpt_fineweb_cli_test.cmake checks the program's lines, so a library
// message that changes its wording fails there, not in front of a user.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>

namespace gpt_fineweb {

struct field_flag {
  std::string_view field;  // as library messages name it
  std::string_view flag;   // as the user types it
};

inline constexpr std::array<field_flag, 30> field_flags{{
    // trainer_config (trainer/config.hpp), filled by make_trainer_config and checked by
    // trainkit::check
    {"trainer_config.steps", "--steps"},
    {"trainer_config.total_batch_tokens", "--total-batch-tokens"},
    {"trainer_config.batch_ramp.start_tokens", "--batch-ramp-tokens"},
    {"trainer_config.batch_ramp.steps", "--batch-ramp-steps"},
    {"adamw_config.lr_scales.embedding", "--lr-embedding-scale"},
    {"adamw_config.lr_scales.head", "--lr-head-scale"},
    {"adamw_config.lr_scales.norm", "--lr-scalar-scale"},
    {"adamw_config.lr_scales.bias", "--lr-scalar-scale"},
    {"trainer_config.eval_every", "--eval-every"},
    {"trainer_config.eval_batches", "--eval-batches"},
    {"trainer_config.ckpt_every", "--ckpt-every"},
    {"trainer_config.resume", "--resume"},
    {"trainer_config.grad_clip", "--grad-clip"},
    {"trainer_config.schedule.max_lr", "--lr"},
    {"trainer_config.schedule.warmup_steps", "--warmup"},
    {"trainer_config.schedule.final_lr_frac", "--final-lr-frac"},
    // the batch a run is checked against (run_shape): --batch, --seq
    {"the training source's batch_size x seq_len", "--batch x --seq"},
    {"run_shape.batch_size", "--batch"},
    {"run_shape.seq_len", "--seq"},
    // lr_schedule (optim/schedule.hpp), filled from the same flags
    {"lr_schedule.max_lr", "--lr"},
    {"lr_schedule.warmup_steps", "--warmup"},
    {"lr_schedule.final_lr_frac", "--final-lr-frac"},
    // adamw_config (optim/adamw_config.hpp), filled by families/adamw.hpp
    {"adamw_config.beta1", "--beta1"},
    {"adamw_config.beta2", "--beta2"},
    {"adamw_config.eps", "--eps"},
    {"adamw_config.weight_decay", "--weight-decay"},
    // sampling_config (model/sampling.hpp), filled from --temperature / --top-k
    {"sampling_config.temperature", "--temperature"},
    {"sampling_config.top_k", "--top-k"},
    // mmap_source_config (data/mmap_token_source.hpp), data::parse_order
    {"mmap_source_config.order", "--order"},
    // tokenizer::resolve_vocab_dir's directory argument (tokenizer/vocab_files.hpp)
    {"vocab_dir", "--vocab"},
}};

/// The fields the registered families' own flags fill (families/llama.hpp, families/muon.hpp),
/// kept apart from the table above so that a family's rows come and go with the family.
inline constexpr std::array<field_flag, 22> family_field_flags{{
    // llama_config (model/llama/config.hpp), filled by families/llama.hpp
    {"llama_config.num_kv_heads", "--kv-heads"},
    {"llama_config.mlp", "--mlp"},
    {"llama_config.qk_norm", "--qk-norm"},
    {"llama_config.recipe.value_embeddings", "--value-embeds"},
    {"llama_config.recipe.unet_skips", "--unet"},
    {"llama_config.recipe.logit_cap", "--logit-cap"},
    {"llama_config.recipe.windows.short_window", "--window-short"},
    {"llama_config.recipe.windows.long_window", "--window-long"},
    {"llama_config.recipe.windows.pattern", "--window-pattern"},
    {"llama_config.recipe.windows.start", "--window-schedule START"},
    {"llama_config.recipe.windows.grow_steps", "--window-schedule STEPS"},
    {"llama_config.recipe.windows", "--window-short"},  // export-hf's refusal; after its fields
    // muon_config (optim/muon_config.hpp), filled by families/muon.hpp (its AdamW half as
    // adamw_config above, checked there first)
    {"muon_config.lr_ratio", "--muon-lr"},                            // --muon-lr / --lr
    {"muon_config.momentum_warmup_steps", "--muon-momentum-warmup"},  // before their prefix
    {"muon_config.momentum_warmup_start", "--muon-momentum-start"},
    {"muon_config.momentum", "--muon-momentum"},
    {"muon_config.ns_steps", "--muon-ns-steps"},
    {"muon_config.orthogonalizer", "--muon-ns"},
    {"muon_config.normuon_beta2", "--muon-normuon-beta2"},  // before its prefix below
    {"muon_config.normuon", "--muon-normuon"},
    {"muon_config.cautious_weight_decay", "--muon-cautious-wd"},
    {"muon_config.weight_decay", "--muon-weight-decay"},
}};

/// Every row names a field: an empty one (a table declared longer than its rows, the rest
/// value-initialised) would match everywhere and never let replace_all finish.
constexpr bool every_field_named(std::span<const field_flag> rows) {
  for (const field_flag& f : rows)
    if (f.field.empty() || f.flag.empty()) return false;
  return true;
}
static_assert(every_field_named(field_flags), "flag_names.hpp: field_flags has an empty row");
static_assert(every_field_named(family_field_flags),
              "flag_names.hpp: family_field_flags has an empty row");

/// `message` with every occurrence of `field` replaced by `flag`.
inline void replace_all(std::string& message, std::string_view field, std::string_view flag) {
  if (field.empty()) return;
  for (auto at = message.find(field); at != std::string::npos;
       at = message.find(field, at + flag.size()))
    message.replace(at, field.size(), flag);
}

/// `message` with every config field of the table replaced by its flag (a path's last "." also
/// matched as ": ", the spelling some headers still write).
inline std::string name_flags(std::string message) {
  using table = std::span<const field_flag>;
  for (const table rows : {table(field_flags), table(family_field_flags)}) {
    for (const field_flag& f : rows) {
      replace_all(message, f.field, f.flag);
      if (const auto dot = f.field.rfind('.'); dot != std::string_view::npos) {
        const std::string colon =
            std::string(f.field.substr(0, dot)) + ": " + std::string(f.field.substr(dot + 1));
        replace_all(message, colon, f.flag);
      }
    }
  }
  return message;
}

}  // namespace gpt_fineweb
