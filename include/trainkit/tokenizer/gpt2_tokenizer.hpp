// trainkit/tokenizer/gpt2_tokenizer.hpp — GPT-2 byte-level BPE, id-for-id equal to tiktoken.
//
// Encoding: the text is cut into pieces by GPT-2's pattern (pretokenize.hpp) and each piece's
// UTF-8 bytes are merged by rank (detail/bpe_merge.hpp); ids are exactly those of tiktoken's
// `gpt2` encoding for any valid UTF-8 text. Decoding concatenates each id's bytes, so
// decode(encode(x)) == x byte for byte. <|endoftext|> (50256) is recognised in text only when
// asked; by default its spelling is encoded as ordinary text, as tiktoken's encode_ordinary does
// and as data preparation wants (a web page that mentions it must not split a document).
//
// The vocabulary is the standard encoder.json + vocab.bpe: encoder.json gives every token's bytes
// (spelled through GPT-2's byte map) and id; an id is also the token's merge rank. vocab.bpe is
// checked to list the merges in exactly that order, the same consistency check tiktoken makes, so
// ranking concatenations by id is the merge order GPT-2 intends. The object is immutable after
// loading; every const member is safe to call from several threads at once.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainkit/core/error.hpp"
#include "trainkit/core/utf8.hpp"
#include "trainkit/tokenizer/concepts.hpp"
#include "trainkit/tokenizer/detail/bpe_merge.hpp"
#include "trainkit/tokenizer/detail/byte_unicode.hpp"
#include "trainkit/tokenizer/detail/token_table.hpp"
#include "trainkit/tokenizer/pretokenize.hpp"
#include "trainkit/tokenizer/vocab_files.hpp"

namespace trainkit::tokenizer {

/// What to do with bytes that are not well-formed UTF-8.
enum class invalid_utf8 {
  error,   // throw format_error naming the byte offset (the default: never guess silently)
  replace  // encode as if each ill-formed subpart were U+FFFD, like bytes.decode(errors="replace")
};

/// Whether the spelling "<|endoftext|>" in text becomes the special id or stays text.
enum class special_tokens {
  as_text,    // tiktoken's encode_ordinary (the default)
  recognised  // tiktoken's encode(allowed_special={"<|endoftext|>"})
};

struct encode_options {
  invalid_utf8 on_invalid = invalid_utf8::error;
  special_tokens special = special_tokens::as_text;
  bool operator==(const encode_options&) const = default;
};

struct tokenizer_options {
  /// Refuse files whose SHA-256 differs from the standard GPT-2 files (turn off only to load a
  /// deliberately different vocabulary in the same format).
  bool verify_sha256 = true;
  bool operator==(const tokenizer_options&) const = default;
};

class gpt2_tokenizer {
 public:
  static constexpr std::string_view eot_text = "<|endoftext|>";

  /// Builds the tokenizer from the contents of encoder.json and vocab.bpe (names for messages).
  /// Throws format_error naming the file and line when they are malformed or inconsistent.
  gpt2_tokenizer(std::string_view encoder_json, std::string_view vocab_bpe,
                 const std::string& encoder_name = "encoder.json",
                 const std::string& vocab_name = "vocab.bpe") {
    load_encoder(encoder_json, encoder_name);
    check_merges(vocab_bpe, vocab_name);
  }

  /// Loads DIR/encoder.json and DIR/vocab.bpe (verifying their SHA-256 unless told not to).
  static gpt2_tokenizer from_directory(const std::filesystem::path& dir,
                                       const tokenizer_options& options = {}) {
    const vocab_files f = read_vocab_files(dir, options.verify_sha256);
    return gpt2_tokenizer(f.encoder_json, f.vocab_bpe, f.encoder_json_path.string(),
                          f.vocab_bpe_path.string());
  }

  /// Number of ids (50257 for GPT-2): every id encode returns is below it.
  int vocab_size() const noexcept { return static_cast<int>(id_offsets_.size() - 1); }
  /// Id of <|endoftext|> (50256 for GPT-2).
  std::uint32_t eot_token() const noexcept { return eot_; }

  /// Appends the ids of `text` to `out`.
  void encode_into(std::string_view text, std::vector<std::uint32_t>& out,
                   const encode_options& options = {}) const {
    std::string repaired;
    if (options.on_invalid == invalid_utf8::replace && find_invalid_utf8(text)) {
      repaired = replace_invalid_utf8(text);
      text = repaired;
    }
    detail::bpe_scratch scratch;
    if (options.special == special_tokens::as_text) {
      encode_ordinary(text, 0, out, scratch);
      return;
    }
    std::size_t from = 0;
    for (;;) {
      const std::size_t at = text.find(eot_text, from);
      const std::size_t end = at == std::string_view::npos ? text.size() : at;
      encode_ordinary(text.substr(from, end - from), from, out, scratch);
      if (at == std::string_view::npos) break;
      out.push_back(eot_);
      from = at + eot_text.size();
    }
  }

  /// The ids of `text`.
  std::vector<std::uint32_t> encode(std::string_view text,
                                    const encode_options& options = {}) const {
    std::vector<std::uint32_t> ids;
    ids.reserve(text.size() / 4 + 8);
    encode_into(text, ids, options);
    return ids;
  }

  /// The bytes token `id` stands for ("<|endoftext|>" for the special id). Throws format_error
  /// when `id` is out of range.
  std::string_view token_bytes(std::uint64_t id) const {
    if (id >= id_offsets_.size() - 1)
      throw format_error("token id " + std::to_string(id) + " is out of range [0, " +
                         std::to_string(vocab_size()) + ")");
    return std::string_view(id_bytes_).substr(id_offsets_[id],
                                              id_offsets_[id + 1] - id_offsets_[id]);
  }

  /// Id of the (ordinary) token whose bytes are exactly `bytes`, if there is one.
  std::optional<std::uint32_t> token_id(std::string_view bytes) const noexcept {
    const std::uint32_t id = table_.find(bytes);
    if (id == detail::token_table::not_found) return std::nullopt;
    return id;
  }

  /// Appends the bytes of `ids` to `out`; throws format_error for an id out of range.
  template <std::integral T>
  void decode_into(std::span<const T> ids, std::string& out) const {
    for (const T id : ids) {
      if constexpr (std::is_signed_v<T>)
        if (id < 0) throw format_error("token id " + std::to_string(id) + " is negative");
      out.append(token_bytes(static_cast<std::uint64_t>(id)));
    }
  }

  /// The bytes `ids` stand for. A prefix of a sequence may end inside a UTF-8 character.
  std::string decode(std::span<const std::uint32_t> ids) const {
    std::string s;
    decode_into(ids, s);
    return s;
  }
  std::string decode(std::span<const std::uint16_t> ids) const {
    std::string s;
    decode_into(ids, s);
    return s;
  }

 private:
  void encode_ordinary(std::string_view text, std::size_t base_offset,
                       std::vector<std::uint32_t>& out, detail::bpe_scratch& scratch) const {
    for_each_gpt2_piece(
        text,
        [&](std::string_view piece) {
          detail::bpe_encode_piece(piece, table_, byte_ids_, scratch, out);
        },
        base_offset);
  }

  void load_encoder(std::string_view json, const std::string& name) {
    std::vector<std::string> bytes_of;  // by id
    std::vector<bool> seen;
    std::optional<std::uint32_t> eot;
    std::size_t entries = 0;
    table_ = detail::token_table(60000);
    // One object of token spelling -> id; nlohmann_json checks the JSON (and that its strings are
    // UTF-8), we check the shape. Members come in key order, not file order: no check here
    // depends on the order.
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(json);
    } catch (const nlohmann::json::exception& e) {
      throw format_error(name + ": not valid JSON: " + e.what());
    }
    if (!doc.is_object()) throw format_error(name + ": not a JSON object of token -> id");
    for (const auto& [key, id_value] : doc.items()) {
      if (!id_value.is_number_unsigned())
        throw format_error(name + ": the id of \"" + key + "\" is not a non-negative integer");
      const auto value = id_value.get<std::uint64_t>();
      if (value >= (std::uint64_t{1} << 24))
        throw format_error(name + ": id " + std::to_string(value) + " of \"" + key +
                           "\" is implausibly large");
      const auto id = static_cast<std::uint32_t>(value);
      if (id >= seen.size()) {
        seen.resize(id + 1, false);
        bytes_of.resize(id + 1);
      }
      if (seen[id]) throw format_error(name + ": id " + std::to_string(id) + " appears twice");
      seen[id] = true;
      ++entries;
      if (key == eot_text) {
        eot = id;
        bytes_of[id] = key;
        continue;
      }
      std::string raw = spelled_to_bytes(key, name);
      if (!table_.insert(raw, id))
        throw format_error(name + ": token \"" + key + "\" (id " + std::to_string(id) +
                           ") is listed twice or is empty");
      bytes_of[id] = std::move(raw);
    }
    for (std::size_t id = 0; id < seen.size(); ++id)
      if (!seen[id])
        throw format_error(name + ": ids are not contiguous: id " + std::to_string(id) +
                           " is missing (" + std::to_string(entries) + " entries)");
    if (!eot) throw format_error(name + ": no \"<|endoftext|>\" entry");
    eot_ = *eot;
    for (unsigned b = 0; b < 256; ++b) {
      const std::uint32_t id = table_.find(std::string(1, static_cast<char>(b)));
      if (id == detail::token_table::not_found)
        throw format_error(name + ": no token for the single byte " + std::to_string(b) +
                           " (a byte-level vocabulary needs all 256)");
      byte_ids_[b] = id;
    }
    id_offsets_.assign(1, 0);
    id_offsets_.reserve(bytes_of.size() + 1);
    id_bytes_.clear();
    for (const std::string& s : bytes_of) {
      id_bytes_ += s;
      id_offsets_.push_back(static_cast<std::uint32_t>(id_bytes_.size()));
    }
  }

  /// A token's bytes from its spelling in the vocabulary files (each code point is one byte).
  static std::string spelled_to_bytes(std::string_view spelled, const std::string& name) {
    std::string raw;
    const auto* p = reinterpret_cast<const unsigned char*>(spelled.data());
    const auto* end = p + spelled.size();
    while (p < end) {
      const utf8_char c = decode_utf8(p, end);
      const int b = c.length > 0 ? detail::unicode_to_byte(c.code_point) : -1;
      if (b < 0)
        throw format_error(name + ": token \"" + std::string(spelled) +
                           "\" contains a character outside GPT-2's byte alphabet");
      raw += static_cast<char>(b);
      p += c.length;
    }
    return raw;
  }

  /// vocab.bpe must list, after its "#version" line, merge k producing the token of id 256 + k,
  /// with the single bytes ranked in tiktoken's order (bytes GPT-2 prints as themselves first):
  /// only then is "lowest id first" the merge order the files define.
  void check_merges(std::string_view bpe, const std::string& name) {
    std::uint32_t rank = 0;
    for (unsigned b = 0; b < 256; ++b)
      if (detail::byte_is_self_printed(b) && byte_ids_[b] != rank++)
        return fail_byte_order(name, b);
    for (unsigned b = 0; b < 256; ++b)
      if (!detail::byte_is_self_printed(b) && byte_ids_[b] != rank++)
        return fail_byte_order(name, b);
    std::size_t line_no = 0, pos = 0;
    std::uint32_t merges = 0;
    while (pos < bpe.size()) {
      std::size_t eol = bpe.find('\n', pos);
      if (eol == std::string_view::npos) eol = bpe.size();
      std::string_view line = bpe.substr(pos, eol - pos);
      pos = eol + 1;
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty() || (line_no == 1 && line.starts_with("#"))) continue;
      const std::size_t sp = line.find(' ');
      if (sp == std::string_view::npos || sp == 0 || sp + 1 == line.size() ||
          line.find(' ', sp + 1) != std::string_view::npos)
        throw format_error(name + ":" + std::to_string(line_no) +
                           ": expected two space-separated tokens");
      const std::string whole =
          spelled_to_bytes(line.substr(0, sp), name) + spelled_to_bytes(line.substr(sp + 1), name);
      const std::uint32_t expected = 256 + merges;
      const std::uint32_t id = table_.find(whole);
      if (id != expected)
        throw format_error(
            name + ":" + std::to_string(line_no) + ": merge \"" + std::string(line) +
            "\" should produce token id " + std::to_string(expected) + " but encoder.json gives " +
            (id == detail::token_table::not_found ? "no such token" : "id " + std::to_string(id)));
      ++merges;
    }
    if (256 + merges != table_.size())
      throw format_error(name + ": " + std::to_string(merges) + " merges for " +
                         std::to_string(table_.size()) +
                         " ordinary tokens (expected tokens = 256 + merges)");
  }

  [[noreturn]] static void fail_byte_order(const std::string& name, unsigned b) {
    throw format_error(name + ": the single-byte token for byte " + std::to_string(b) +
                       " does not have the id GPT-2's byte order gives it");
  }

  detail::token_table table_;                 // ordinary tokens: bytes -> id (= merge rank)
  std::uint32_t byte_ids_[256] = {};          // id of each single byte
  std::vector<std::uint32_t> id_offsets_{0};  // id -> [offset, next offset) in id_bytes_
  std::string id_bytes_;
  std::uint32_t eot_ = 0;
};

static_assert(text_tokenizer<gpt2_tokenizer>);

}  // namespace trainkit::tokenizer
