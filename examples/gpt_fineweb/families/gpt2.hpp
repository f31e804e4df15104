// families/gpt2.hpp — the GPT-2 model family of gpt_fineweb (`--arch gpt2`, the default).
//
// Its config and presets (model/gpt2/config.hpp: d2 ... d48), then its device policies: on the
// CPU gpt2_cpu (Eigen), started from --init-from (an llm.c model file) or --init-from-hf (a
// Hugging Face GPT2LMHeadModel folder, model/gpt2/hf.hpp) and written with --export /
// --export-hf; on CUDA gpt2_cuda (bf16, cuBLASLt), options from --attention and --cuda-graph,
// llm.c files through llmc_file.hpp's span functions (HF folders: convert with export-hf /
// import-hf). The host part is compiled outside nvcc only, the CUDA part under nvcc only
// (families/family.hpp says why). GPT-2 has no flags of its own.
#pragma once

#include <CLI/CLI.hpp>

#include <array>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <trainkit/core/error.hpp>
#include <trainkit/model/gpt2/config.hpp>
#include <trainkit/model/gpt2/llmc_file.hpp>

#include "../train/options.hpp"
#include "family.hpp"

namespace gpt_fineweb {

struct gpt2_family {
  static constexpr std::string_view name = "gpt2";
  static constexpr std::string_view summary =
      "GPT-2 (LayerNorm, GELU, learned positions, tied head; llm.c's layout)";
  using config_type = trainkit::model::gpt2_config;
  static constexpr std::array<std::string_view, 6> presets{"d2", "d6", "d12", "d24", "d36", "d48"};

  struct flags {};
  static void add_flags(CLI::App&, flags&) {}

  static config_type config(const std::string& preset, const flags&) {
    require_preset<gpt2_family>(preset);
    return config_type::preset(preset);
  }
};
static_assert(model_family<gpt2_family>);

}  // namespace gpt_fineweb

// Its devices' halves: not in the front end (main.cpp), and in a family's own unit only for
// that family (families/gpt2_cpu.cpp, gpt2_cuda.cu), so an edit here rebuilds this family's units.
#if !defined(__CUDACC__) && !defined(GPT_FINEWEB_FRONT_END) && \
    (!defined(GPT_FINEWEB_FAMILY_UNIT) || defined(GPT_FINEWEB_UNIT_gpt2))
#include <trainkit/model/gpt2/cpu.hpp>
#include <trainkit/model/gpt2/hf.hpp>

#include "../commands/hf.hpp"

namespace gpt_fineweb {

/// --device cpu: gpt2_cpu.
template <>
struct host_policies<gpt2_family> {
  using model_type = trainkit::model::gpt2_cpu;

  explicit host_policies(const gpt2_family::flags&) {}

  /// The shape the flags name: --init-from's or --init-from-hf's model (read now, and kept for
  /// make_model), else the --model preset.
  trainkit::model::gpt2_config model_config(const train_options& o) {
    if (!o.init_from.empty()) from_file_ = trainkit::model::load_llmc_gpt2_cpu<float>(o.init_from);
    if (!o.init_from_hf.empty()) from_file_ = trainkit::model::load_hf_gpt2_cpu(o.init_from_hf);
    return from_file_ ? from_file_->config() : gpt2_family::config(o.model, {});
  }
  model_type make_model(const train_options& o, const trainkit::model::gpt2_config& cfg) {
    if (!from_file_) return model_type(cfg, o.seed);
    model_type m = std::move(*from_file_);
    from_file_.reset();
    return m;
  }
  void export_model(const train_options& o, const model_type& model, std::ostream& out) const {
    if (!o.export_hf.empty())
      export_hf_after_training(o.export_hf, o.export_hf_dtype, o.vocab, model, out);
    if (!o.export_path.empty()) {
      trainkit::model::save_llmc_model(o.export_path, model);
      out << "exported llm.c model file " << o.export_path << "\n";
    }
  }

 private:
  std::optional<model_type> from_file_;
};

}  // namespace gpt_fineweb
#endif  // !__CUDACC__

#if defined(__CUDACC__) && !defined(GPT_FINEWEB_FRONT_END) && \
    (!defined(GPT_FINEWEB_FAMILY_UNIT) || defined(GPT_FINEWEB_UNIT_gpt2))
#include <trainkit/model/gpt2/cuda.hpp>

namespace gpt_fineweb {

/// --device cuda: gpt2_cuda. Its options are checked when it is made (phase 1, no device).
template <>
struct cuda_policies<gpt2_family> {
  using is_defined = void;
  using model_type = trainkit::model::gpt2_cuda;

  trainkit::model::gpt2_cuda_options options;

  cuda_policies(const train_options& o, const gpt2_family::flags&)
      : options(cuda_model_options(o)) {}

  /// A preset, or the header of the --init-from file (its parameters are read by make_model).
  trainkit::model::gpt2_config model_config(const train_options& o) const {
    if (!o.init_from.empty()) return trainkit::model::read_llmc_header(o.init_from);
    return gpt2_family::config(o.model, {});
  }
  model_type make_model(const train_options& o, const trainkit::model::gpt2_config& cfg) const {
    if (o.init_from.empty()) return model_type(cfg, o.seed, options);
    std::vector<float> params(cfg.num_parameters());
    trainkit::model::read_llmc_parameters<float>(o.init_from, cfg, std::span<float>(params));
    return model_type(cfg, std::span<const float>(params), options);
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
  void export_model(const train_options& o, const model_type& m, std::ostream& out) const {
    // --export-hf is refused for --device cuda by train_options::validate.
    if (o.export_path.empty()) return;
    std::vector<float> params(m.num_parameters());
    m.copy_parameters_to_host(params);
    trainkit::model::write_llmc_parameters<float>(o.export_path, m.config(),
                                                  std::span<const float>(params));
    out << "exported llm.c model file " << o.export_path << "\n";
  }

 private:
  /// --attention auto: cuDNN's fused attention where this program links it, else trainkit's
  /// flash kernels; neither materialises the T x T scores.
  static std::string resolved_attention(const std::string& flag) {
    if (flag != "auto") return flag;
#if defined(TRAINKIT_HAS_CUDNN_FRONTEND)
    return "cudnn";
#else
    return "flash";
#endif
  }

  /// The model's options from the flags, checked without touching the device.
  static trainkit::model::gpt2_cuda_options cuda_model_options(const train_options& o) {
    trainkit::model::gpt2_cuda_options mo;
    const std::string attention = resolved_attention(o.attention);
    // Bit-reproducible kernels everywhere except flash attention, whose backward adds dQ with
    // fp32 atomics (the model refuses flash with deterministic set).
    if (attention == "flash") {
      mo.attention = trainkit::model::gpt2_attention::flash;
      mo.deterministic = false;
    } else {
#if !defined(TRAINKIT_HAS_CUDNN_FRONTEND)
      if (attention == "cudnn")
        throw trainkit::config_error(
            "--attention cudnn: this gpt_fineweb was built without cuDNN attention (configure "
            "with -DTRAINKIT_GPT_FINEWEB_CUDNN=ON after pip install nvidia-cudnn-frontend)");
#endif
      mo.attention = attention == "cudnn" ? trainkit::model::gpt2_attention::cudnn
                                          : trainkit::model::gpt2_attention::naive;
      mo.deterministic = true;
    }
    mo.cuda_graph = o.cuda_graph;
    mo.batch_size = o.batch;  // size the activation arena once, up front
    mo.seq_len = o.seq;
    return mo;
  }
};

}  // namespace gpt_fineweb
#endif  // __CUDACC__
