// trainkit/model/transformer/hf_common.hpp — the Hugging Face folder plumbing every family shares:
// export options, the tensor map entry, writing and reading model.safetensors through a family's
// map, config.json reading with field-naming errors, and GPT-2's tokenizer files.
//
// A family's HF header (model/gpt2/hf.hpp, model/llama/hf.hpp) supplies only what is its own: the
// map from its flat parameter buffer to HF's tensor names (hf_tensor: a block of the buffer, HF's
// shape, and whether HF stores it transposed), its config.json in both directions, and which extra
// tensors an import may ignore. Everything here is independent of the family: a map entry is a
// contiguous block of the flat buffer (row-major, trainkit's (out, in)); a transposed entry is HF's
// (in, out) Conv1D view of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/io/safetensors_read.hpp"
#include "trainkit/io/safetensors_write.hpp"
#include "trainkit/model/zero_parameters.hpp"
#include "trainkit/tokenizer/vocab_files.hpp"

namespace trainkit::model {

/// How to export a Hugging Face folder.
struct hf_export_options {
  io::safetensors_dtype dtype = io::safetensors_dtype::f32;  // F32 or BF16
  /// Directory with encoder.json + vocab.bpe copied as vocab.json + merges.txt (SHA-256
  /// checked); empty: no tokenizer files.
  std::filesystem::path vocab_dir;
  bool operator==(const hf_export_options&) const = default;
};

/// One parameter of a Hugging Face layout and where it lives in trainkit's flat buffer.
struct hf_tensor {
  std::string name;                 // "transformer.h.3.attn.c_attn.weight"
  std::vector<std::int64_t> shape;  // HF's shape (rows, cols) or (n)
  std::size_t offset = 0;           // of trainkit's (untransposed) block in the flat buffer
  bool transposed = false;          // Conv1D: HF (rows, cols) is trainkit's (cols, rows)

  std::size_t numel() const noexcept {
    std::size_t n = 1;
    for (auto d : shape) n *= std::size_t(d);
    return n;
  }
};

namespace detail {

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  if (!out) throw io_error("'" + path.string() + "': cannot be written");
}

inline nlohmann::json read_json_file(const std::filesystem::path& path) {
  const std::string text = tokenizer::read_text_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range (number overflow)
    throw format_error("'" + path.string() + "' is not valid JSON (" + e.what() + ")");
  }
}

/// A config.json being read, with errors that name the file and the field. `family` completes
/// "trainkit's <family> computes ..." in refusals ("GPT-2", "Llama").
class hf_config_reader {
 public:
  hf_config_reader(const std::filesystem::path& dir, std::string family)
      : path_(dir / "config.json"),
        where_(std::string(1, '\'').append(path_.string()).append(1, '\'')),
        json_(read_json_file(path_)),
        family_(std::move(family)) {}

  const nlohmann::json& json() const noexcept { return json_; }
  /// "'<dir>/config.json'", the prefix of every message.
  const std::string& where() const noexcept { return where_; }

  /// model_type must be `type`; format_error otherwise.
  void require_model_type(const char* type) const {
    if (json_.value("model_type", std::string()) != type)
      throw format_error(where() + ": model_type is " +
                         (json_.contains("model_type") ? json_["model_type"].dump() : "missing") +
                         ", not \"" + type + "\"");
  }
  int need_int(const char* field) const {
    if (!json_.contains(field) || !json_[field].is_number_integer())
      throw format_error(where() + ": needs integer field \"" + field + "\"");
    return json_[field].get<int>();
  }
  double number(const nlohmann::json& v, const char* field) const {
    if (!v.is_number()) throw format_error(where() + ": \"" + field + "\" is not a number");
    return v.get<double>();
  }
  /// format_error "<field> is <value>; trainkit's <family> computes <want>" unless `ok`.
  void refuse_unless(bool ok, const char* field, const std::string& want) const {
    if (!ok)
      throw format_error(where() + ": \"" + field + "\" is " + json_[field].dump() +
                         "; trainkit's " + family_ + " computes " + want);
  }
  /// cfg.validate(), its config_error turned into a format_error naming the file.
  template <class Config>
  Config validated(const Config& cfg) const {
    try {
      cfg.validate();
    } catch (const config_error& e) {
      throw format_error(where() + " gives an impossible shape: " + e.what());
    }
    return cfg;
  }

 private:
  std::filesystem::path path_;
  std::string where_;
  nlohmann::json json_;
  std::string family_;
};

/// The checks every export makes before it writes: `params` fits `cfg`, the dtype is F32 or BF16;
/// then `dir` is created. `who` names the function in messages ("write_hf_gpt2").
template <class Config>
void prepare_hf_export(const std::filesystem::path& dir, const Config& cfg, std::size_t params,
                       io::safetensors_dtype dtype, const std::string& who) {
  if (params != cfg.num_parameters())
    throw config_error(who + ": " + std::to_string(params) + " parameters given, shape " +
                       cfg.to_string() + " has " + std::to_string(cfg.num_parameters()));
  if (dtype == io::safetensors_dtype::f16) throw config_error(who + ": dtype must be F32 or BF16");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw io_error("'" + dir.string() + "': cannot create the directory: " + ec.message());
}

/// The destination of an import fits `cfg`; config_error naming `who` otherwise.
template <class Config>
void check_hf_import_size(const Config& cfg, std::size_t params, const std::string& who) {
  if (params != cfg.num_parameters())
    throw config_error(who + ": destination holds " + std::to_string(params) +
                       " parameters, shape " + cfg.to_string() + " has " +
                       std::to_string(cfg.num_parameters()));
}

}  // namespace detail

/// Writes `dir`/model.safetensors: each tensor of `map` from its block of `params`.
template <class Scalar>
void write_hf_tensors(const std::filesystem::path& dir, std::span<const hf_tensor> map,
                      std::span<const Scalar> params, io::safetensors_dtype dtype) {
  std::vector<io::safetensors_entry> entries;
  for (const hf_tensor& t : map) {
    const Scalar* base = params.data() + t.offset;
    const std::size_t cols = std::size_t(t.shape.back());
    const std::size_t rows = t.shape.size() == 2 ? std::size_t(t.shape[0]) : 1;
    if (!t.transposed) {
      entries.push_back({t.name, dtype, t.shape, [base](std::size_t first, std::span<float> out) {
                           for (std::size_t i = 0; i < out.size(); ++i)
                             out[i] = float(base[first + i]);
                         }});
    } else {
      // HF element (r, c) of (rows=in, cols=out) is trainkit's (c, r) of (out, in).
      entries.push_back(
          {t.name, dtype, t.shape, [base, rows, cols](std::size_t first, std::span<float> out) {
             for (std::size_t i = 0; i < out.size(); ++i) {
               const std::size_t r = (first + i) / cols, c = (first + i) % cols;
               out[i] = float(base[c * rows + r]);
             }
           }});
    }
  }
  io::write_safetensors(dir / "model.safetensors", entries, {{"format", "pt"}});
}

/// GPT-2's tokenizer files (trainkit's only tokenizer) from `vocab_dir` into `dir`: vocab.json,
/// merges.txt and a tokenizer_config.json for GPT2Tokenizer.
inline void write_hf_gpt2_tokenizer(const std::filesystem::path& dir,
                                    const std::filesystem::path& vocab_dir, int max_seq_len) {
  const tokenizer::vocab_files v = tokenizer::read_vocab_files(vocab_dir);
  detail::write_text(dir / "vocab.json", v.encoder_json);
  detail::write_text(dir / "merges.txt", v.vocab_bpe);
  const nlohmann::json tc = {
      {"tokenizer_class", "GPT2Tokenizer"}, {"model_max_length", max_seq_len},
      {"bos_token", "<|endoftext|>"},       {"eos_token", "<|endoftext|>"},
      {"unk_token", "<|endoftext|>"},       {"add_prefix_space", false}};
  detail::write_text(dir / "tokenizer_config.json", tc.dump(2) + "\n");
}

/// "safetensors file '<dir>/model.safetensors'", as import messages name it.
inline std::string hf_safetensors_name(const std::filesystem::path& dir) {
  return "safetensors file '" + (dir / "model.safetensors").string() + "'";
}

/// `dir`/model.safetensors, opened; format_error for a sharded checkpoint (trainkit reads one
/// file).
inline io::safetensors_file open_hf_safetensors(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "model.safetensors";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) &&
      std::filesystem::exists(dir / "model.safetensors.index.json", ec))
    throw format_error("'" + dir.string() +
                       "' holds a sharded checkpoint (model.safetensors.index.json); trainkit "
                       "reads a single model.safetensors");
  return io::safetensors_file(path);
}

/// Reads every tensor of `map` from `file` into its block of `params` (zeroed first, so rows HF
/// does not store, such as the vocabulary's padding, stay zero). `find(name)` looks a map name up
/// in the file (a family may accept aliases). format_error naming the file (`where`) and the
/// tensor that is missing or misshapen.
template <class Scalar, class Find>
void read_hf_tensors(io::safetensors_file& file, const std::string& where,
                     std::span<const hf_tensor> map, std::span<Scalar> params, Find&& find) {
  std::vector<float> buf;
  std::fill(params.begin(), params.end(), Scalar(0));
  for (const hf_tensor& t : map) {
    const io::safetensors_tensor* s = find(t.name);
    if (s == nullptr) throw format_error(where + " has no tensor '" + t.name + "'");
    if (s->shape != t.shape) {
      std::string want, got;
      for (auto d : t.shape) want += (want.empty() ? "" : ", ") + std::to_string(d);
      for (auto d : s->shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
      throw format_error(where + ": tensor '" + s->name + "' has shape (" + got +
                         "), config.json's shape needs (" + want + ")");
    }
    buf.resize(s->numel());
    file.read(*s, buf);
    Scalar* base = params.data() + t.offset;
    if (!t.transposed) {
      for (std::size_t i = 0; i < buf.size(); ++i) base[i] = Scalar(buf[i]);
    } else {
      const std::size_t rows = std::size_t(t.shape[0]), cols = std::size_t(t.shape[1]);
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c) base[c * rows + r] = Scalar(buf[r * cols + c]);
    }
  }
}

/// Whether a stored lm_head.weight equals the V·C leading elements of the embedding at
/// `wte_offset` (a tied head that was stored anyway).
template <class Scalar>
bool hf_head_matches(io::safetensors_file& file, std::span<const Scalar> params,
                     std::size_t wte_offset, std::size_t wte_elems) {
  const std::vector<float> head = file.read("lm_head.weight");
  bool tied = head.size() == wte_elems;
  for (std::size_t i = 0; tied && i < wte_elems; ++i)
    tied = float(params[wte_offset + i]) == head[i];
  return tied;
}

/// A model of the shape and weights of the Hugging Face folder `dir`: `read_config(dir)` gives the
/// shape, `read_parameters(dir, cfg, params)` the weights (a family's pair).
template <class Model, class ReadConfig, class ReadParameters>
Model load_hf_model(const std::filesystem::path& dir, ReadConfig&& read_config,
                    ReadParameters&& read_parameters) {
  Model model(read_config(dir), zero_parameters);
  read_parameters(dir, model.config(), model.parameters());
  return model;
}

}  // namespace trainkit::model
