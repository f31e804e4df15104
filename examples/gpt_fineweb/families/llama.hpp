// families/llama.hpp — the Llama model family of gpt_fineweb (`--arch llama`).
//
// Its config and presets (model/llama/config.hpp: d2, d6, d12, d20, d24) with the family's own
// flags: --kv-heads (grouped-query attention), --mlp swiglu|relu2, --qk-norm, --tie-embeddings,
// and the speedrun recipe's model parts (llama_config::recipe, docs/recipes.md; each off by
// default): --value-embeds N, --unet, --logit-cap X, --zero-init-proj, and the sliding windows
// --window-short N, --window-long N (default: the preset's maxT, i.e. full attention in long
// layers), --window-pattern (S/L per layer, cyclic; default every fourth layer from the last is
// long) and --window-schedule START:STEPS (the long window grows from START to --window-long over
// the first STEPS steps, short windows in proportion).
// Each flag sets one llama_config field, and the config is validated there, so a bad value is
// named by the library's field path, which flag_names.hpp turns back into the flag. On the CPU the
// model is llama_cpu, started from a preset or from --init-from-hf (a Hugging Face
// LlamaForCausalLM folder, model/llama/hf.hpp) and written with --export-hf. llm.c model files
// hold GPT-2 only, so --init-from FILE and --export FILE are refused naming the flag, and so is
// an --export-hf of a variant transformers' Llama cannot compute (ReLU², QK-norm), before the run.
// On CUDA the model is llama_cuda (bf16, cuBLASLt, flash or cuDNN attention with GQA), started from
// a preset; --attention naive and --cuda-graph are refused naming the flag (llama_cuda has
// neither), and so are the llm.c files, as on the CPU (Hugging Face folders go through --device cpu
// or the import-hf / export-hf commands, as for GPT-2).
#pragma once

#include <CLI/CLI.hpp>

#include <array>
#include <exception>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include <trainkit/core/error.hpp>
#include <trainkit/model/llama/config.hpp>

#include "../train/options.hpp"
#include "family.hpp"

namespace gpt_fineweb {

struct llama_family {
  static constexpr std::string_view name = "llama";
  static constexpr std::string_view summary =
      "Llama (RMSNorm, RoPE, grouped-query attention, SwiGLU or ReLU^2, no biases, untied head "
      "unless --tie-embeddings)";
  using config_type = trainkit::model::llama_config;
  static constexpr std::array<std::string_view, 5> presets{"d2", "d6", "d12", "d20", "d24"};

  /// The shape flags; an unset one leaves the preset's value.
  struct flags {
    std::optional<int> kv_heads;  // --kv-heads: llama_config::num_kv_heads
    std::string mlp;              // --mlp: llama_config::mlp (empty: the preset's, SwiGLU)
    bool qk_norm = false;         // --qk-norm: llama_config::qk_norm
    bool tie_embeddings = false;  // --tie-embeddings: llama_config::tied_embeddings
    // The speedrun recipe's parts (llama_config::recipe); --recipe speedrun fills the ones not
    // given (train/recipes.hpp).
    int value_embeds = 0;         // --value-embeds: recipe.value_embeddings
    bool unet = false;            // --unet: recipe.unet_skips
    double logit_cap = 0.0;       // --logit-cap: recipe.logit_cap
    bool zero_init_proj = false;  // --zero-init-proj: recipe.zero_init_projections
    int window_short = 0;         // --window-short: recipe.windows.short_window
    int window_long = 0;          // --window-long: recipe.windows.long_window (0: maxT)
    std::string window_pattern;   // --window-pattern: recipe.windows.pattern
    std::string window_schedule;  // --window-schedule START:STEPS: .start, .grow_steps

    /// The first shape flag given, or empty.
    std::string_view first_given() const noexcept {
      if (kv_heads) return "--kv-heads";
      if (!mlp.empty()) return "--mlp";
      if (qk_norm) return "--qk-norm";
      if (tie_embeddings) return "--tie-embeddings";
      if (value_embeds != 0) return "--value-embeds";
      if (unet) return "--unet";
      if (logit_cap != 0.0) return "--logit-cap";
      if (zero_init_proj) return "--zero-init-proj";
      if (window_short != 0) return "--window-short";
      if (window_long != 0) return "--window-long";
      if (!window_pattern.empty()) return "--window-pattern";
      if (!window_schedule.empty()) return "--window-schedule";
      return {};
    }
  };

  static void add_flags(CLI::App& app, flags& f) {
    app.add_option("--kv-heads", f.kv_heads,
                   "--arch llama: key/value heads of grouped-query attention, dividing the query "
                   "heads (default: the preset's, half of them; = heads: multi-head attention)");
    app.add_option("--mlp", f.mlp,
                   "--arch llama: the MLP, swiglu (Llama; width 8C/3 rounded up to 64, the "
                   "default) or relu2 (ReLU^2 of width 4C, nanochat / modded-nanogpt)")
        ->check(CLI::IsMember({"swiglu", "relu2"}));
    app.add_flag("--qk-norm", f.qk_norm,
                 "--arch llama: parameter-free RMSNorm of each query and key head before RoPE "
                 "(nanochat)");
    app.add_flag("--tie-embeddings", f.tie_embeddings,
                 "--arch llama: the output head is the token embedding (no lm_head)");
    app.add_option("--value-embeds", f.value_embeds,
                   "--arch llama: value-embedding tables (0 = none), added into the attention "
                   "values of the first and last layers in the U-net pattern (modded-nanogpt)");
    app.add_flag("--unet", f.unet,
                 "--arch llama: U-net skips, encoder block outputs added with learned weights "
                 "into the mirrored decoder blocks (modded-nanogpt)");
    app.add_option("--logit-cap", f.logit_cap,
                   "--arch llama: soft-cap the logits at cap*tanh(logits/cap) in the loss and in "
                   "sampling (0 = off; Gemma 2, modded-nanogpt)");
    app.add_flag("--zero-init-proj", f.zero_init_proj,
                 "--arch llama: start the attention and MLP output projections (and an untied "
                 "head) at zero");
    app.add_option("--window-short", f.window_short,
                   "--arch llama: sliding-window attention, the short layers' window in tokens "
                   "(0 = full causal attention everywhere)");
    app.add_option("--window-long", f.window_long,
                   "--arch llama --window-short: the long layers' window (default: the "
                   "preset's longest sequence, i.e. full attention)");
    app.add_option("--window-pattern", f.window_pattern,
                   "--arch llama --window-short: S and L per layer, repeated over the layers "
                   "(default: every fourth layer from the last is long)");
    app.add_option("--window-schedule", f.window_schedule,
                   "--arch llama --window-short: START:STEPS, the long window grows from START "
                   "tokens to --window-long over the first STEPS steps (short ones in proportion)");
  }

  /// --window-schedule START:STEPS into the window schedule; config_error naming the flag.
  static void parse_window_schedule(const std::string& text,
                                    trainkit::model::recipe::window_schedule& w) {
    const auto colon = text.find(':');
    auto number = [&](const std::string& part) {
      std::size_t used = 0;
      int v = -1;
      try {
        v = std::stoi(part, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (part.empty() || used != part.size() || v < 0)
        throw trainkit::config_error(
            "--window-schedule must be START:STEPS (tokens:steps, "
            "both >= 0): " +
            text);
      return v;
    };
    if (colon == std::string::npos)
      throw trainkit::config_error(
          "--window-schedule must be START:STEPS (tokens:steps, both "
          ">= 0): " +
          text);
    w.start = number(text.substr(0, colon));
    w.grow_steps = number(text.substr(colon + 1));
  }

  /// The preset with the flags' fields, validated: config_error naming --model for a preset the
  /// family lacks, and the llama_config field (flag_names.hpp: the flag) for an impossible shape.
  static config_type config(const std::string& preset, const flags& f) {
    require_preset<llama_family>(preset);
    config_type c = config_type::preset(preset);
    if (f.kv_heads) c.num_kv_heads = *f.kv_heads;
    if (f.mlp == "relu2") {
      c.mlp = trainkit::model::llama_mlp::relu_squared;
      c.hidden_size = 4 * c.channels;  // nanochat's ReLU² width: GPT-2's 4C
    }
    c.qk_norm = f.qk_norm;
    c.tied_embeddings = f.tie_embeddings;
    auto& r = c.recipe;
    r.value_embeddings = f.value_embeds;
    r.unet_skips = f.unet;
    r.logit_cap = float(f.logit_cap);
    r.zero_init_projections = f.zero_init_proj;
    const bool windowed = f.window_short != 0;
    if (!windowed &&
        (f.window_long != 0 || !f.window_pattern.empty() || !f.window_schedule.empty()))
      throw trainkit::config_error(
          std::string(f.window_long != 0          ? "--window-long"
                      : !f.window_pattern.empty() ? "--window-pattern"
                                                  : "--window-schedule") +
          " needs --window-short N (the sliding windows are off without it)");
    if (windowed) {
      r.windows.short_window = f.window_short;
      r.windows.long_window = f.window_long != 0 ? f.window_long : c.max_seq_len;
      r.windows.pattern = f.window_pattern;
      if (!f.window_schedule.empty()) parse_window_schedule(f.window_schedule, r.windows);
    }
    c.validate();
    return c;
  }
};
static_assert(model_family<llama_family>);

}  // namespace gpt_fineweb

// Its devices' halves: not in the front end (main.cpp), and in a family's own unit only for
// that family (families/llama_cpu.cpp, llama_cuda.cu), so an edit here rebuilds this family's
// units.
#if !defined(__CUDACC__) && !defined(GPT_FINEWEB_FRONT_END) && \
    (!defined(GPT_FINEWEB_FAMILY_UNIT) || defined(GPT_FINEWEB_UNIT_llama))
#include <trainkit/model/llama/cpu.hpp>
#include <trainkit/model/llama/hf.hpp>

#include "../commands/hf.hpp"

namespace gpt_fineweb {

/// --device cpu: llama_cpu.
template <>
struct host_policies<llama_family> {
  using model_type = trainkit::model::llama_cpu;

  explicit host_policies(const llama_family::flags& flags) : flags_(flags) {}

  /// The shape the flags name: --init-from-hf's model (read now, kept for make_model) or the
  /// --model preset with the shape flags. Also refuses, before anything runs, the model files
  /// this family cannot read or write.
  trainkit::model::llama_config model_config(const train_options& o) {
    namespace tk = trainkit;
    if (!o.init_from.empty())
      throw tk::config_error("--init-from " + o.init_from +
                             ": llm.c model files hold GPT-2 only; start --arch llama from a "
                             "Hugging Face folder with --init-from-hf DIR");
    if (!o.export_path.empty())
      throw tk::config_error("--export " + o.export_path +
                             ": llm.c model files hold GPT-2 only; write --arch llama with "
                             "--export-hf DIR");
    if (!o.init_from_hf.empty()) {
      if (const std::string_view flag = flags_.first_given(); !flag.empty())
        throw tk::config_error(std::string(flag) + ": the shape of an --init-from-hf model is " +
                               o.init_from_hf + "/config.json's; leave the shape flags out");
      from_file_ = tk::model::load_hf_llama_cpu(o.init_from_hf);
    }
    const auto cfg = from_file_ ? from_file_->config() : llama_family::config(o.model, flags_);
    if (!o.export_hf.empty()) {
      try {
        tk::model::check_hf_llama_exportable(cfg);
      } catch (const tk::config_error& e) {
        throw tk::config_error("--export-hf " + o.export_hf + ": " + e.what());
      }
    }
    return cfg;
  }
  model_type make_model(const train_options& o, const trainkit::model::llama_config& cfg) {
    if (!from_file_) return model_type(cfg, o.seed);
    model_type m = std::move(*from_file_);
    from_file_.reset();
    return m;
  }
  void export_model(const train_options& o, const model_type& model, std::ostream& out) const {
    if (o.export_hf.empty()) return;  // --export FILE was refused by model_config
    trainkit::model::save_hf_llama(o.export_hf, model,
                                   hf_export_options_of(o.export_hf_dtype, o.vocab));
    out << "exported Hugging Face folder " << o.export_hf << " (LlamaForCausalLM "
        << model.config().to_string() << ", " << o.export_hf_dtype << ")\n";
  }

 private:
  llama_family::flags flags_;
  std::optional<model_type> from_file_;
};

}  // namespace gpt_fineweb
#endif  // !__CUDACC__

#if defined(__CUDACC__) && !defined(GPT_FINEWEB_FRONT_END) && \
    (!defined(GPT_FINEWEB_FAMILY_UNIT) || defined(GPT_FINEWEB_UNIT_llama))
#include <trainkit/model/llama/cuda.hpp>

namespace gpt_fineweb {

/// --device cuda: llama_cuda. Its options are checked when it is made (phase 1, no device).
template <>
struct cuda_policies<llama_family> {
  using is_defined = void;
  using model_type = trainkit::model::llama_cuda;

  trainkit::model::llama_cuda_options options;

  cuda_policies(const train_options& o, const llama_family::flags& f)
      : options(cuda_model_options(o)), flags_(f) {}

  /// The --model preset with the shape flags; refuses the llm.c files (GPT-2 only).
  trainkit::model::llama_config model_config(const train_options& o) const {
    namespace tk = trainkit;
    if (!o.init_from.empty())
      throw tk::config_error("--init-from " + o.init_from +
                             ": llm.c model files hold GPT-2 only; start --arch llama from a "
                             "preset, or from a Hugging Face folder with --device cpu");
    if (!o.export_path.empty())
      throw tk::config_error("--export " + o.export_path +
                             ": llm.c model files hold GPT-2 only; write --arch llama with "
                             "--export-hf DIR (--device cpu)");
    const auto cfg = llama_family::config(o.model, flags_);
    // llama_cuda computes the recipe's model parts, but that code has not run on a GPU yet: an
    // unverified CUDA path must not train silently wrong, so they stay refused (never ignored)
    // until bench/gpu_check.sh's LlamaCuda.RecipeMatchesCpu row has passed on a device.
    const auto& r = cfg.recipe;
    // (--zero-init-proj is only the family's host initialisation, which both devices share.)
    const char* part = r.value_embeddings > 0 ? "--value-embeds"
                       : r.unet_skips         ? "--unet"
                       : r.logit_cap > 0.0f   ? "--logit-cap"
                       : r.windows.on()       ? "--window-short"
                                              : nullptr;
    if (part)
      throw tk::config_error(
          std::string(part) +
          ": --arch llama's CUDA model computes the recipe's parts, compiled but "
          "not yet verified on a GPU (bench/gpu_check.sh's "
          "LlamaCuda.RecipeMatchesCpu row); until then use --device cpu");
    return cfg;
  }
  model_type make_model(const train_options& o, const trainkit::model::llama_config& cfg) const {
    return model_type(cfg, o.seed, options);
  }
  std::string describe(const model_type& m) const {
    const char* attention[] = {"naive", "flash", "cudnn"};
    return " | " + m.device_name() + " | attention " + attention[int(options.attention)] + " | " +
           m.memory_report().to_string();
  }
  void after_run(const model_type& m, std::ostream& out) const {
    if (m.matmul_fallbacks() > 0)
      out << "note: " << m.matmul_fallbacks()
          << " GEMM epilogues ran through fallback kernels (no fused cuBLASLt algorithm)\n";
  }
  void export_model(const train_options&, const model_type&, std::ostream&) const {
    // --export is refused by model_config, --export-hf by train_options::validate.
  }

 private:
  /// The model's options from the flags, checked without touching the device. --attention auto:
  /// cuDNN where this program links it (deterministic), else trainkit's flash kernels.
  static trainkit::model::llama_cuda_options cuda_model_options(const train_options& o) {
    namespace tk = trainkit;
    if (o.cuda_graph)
      throw tk::config_error("--cuda-graph: --arch llama's CUDA model has no CUDA graphs yet");
    std::string attention = o.attention;
    if (attention == "auto") {
#if defined(TRAINKIT_HAS_CUDNN_FRONTEND)
      attention = "cudnn";
#else
      attention = "flash";
#endif
    }
    tk::model::llama_cuda_options mo;
    if (attention == "naive")
      throw tk::config_error(
          "--attention naive: --arch llama's CUDA model runs grouped-query attention with flash or "
          "cudnn only");
    if (attention == "cudnn") {
#if !defined(TRAINKIT_HAS_CUDNN_FRONTEND)
      throw tk::config_error(
          "--attention cudnn: this gpt_fineweb was built without cuDNN attention (configure "
          "with -DTRAINKIT_GPT_FINEWEB_CUDNN=ON after pip install nvidia-cudnn-frontend)");
#endif
      mo.attention = tk::model::gpt2_attention::cudnn;
      mo.deterministic = true;
    } else {  // flash: its dQ atomics are not bit-reproducible
      mo.attention = tk::model::gpt2_attention::flash;
      mo.deterministic = false;
    }
    mo.batch_size = o.batch;  // size the activation arena once, up front
    mo.seq_len = o.seq;
    return mo;
  }

  llama_family::flags flags_;
};

}  // namespace gpt_fineweb
#endif  // __CUDACC__
