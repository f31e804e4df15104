// commands/prepare.hpp — `gpt_fineweb prepare`: text (files, FineWeb JSONL, stdin) -> llm.c token
// shards.
//
// Each input document becomes <|endoftext|> (50256) followed by its GPT-2 ids (the text's own
// "<|endoftext|>" spelling stays text, as in llm.c's and modded-nanogpt's fineweb.py). The token
// stream is cut into llm.c shards: the first --val-tokens go to <prefix>_val_000000.bin, the rest
// to <prefix>_train_000001.bin, _000002, ... of --shard-tokens each (documents may straddle two
// shards, as in llm.c). Shards are cut by data::shard_writer and go through data::write_shard
// (temporary name, fsync, rename), so an interrupted run leaves at most a *.tmp file, never a
// short shard under a final name.
//
// Parallelism: the main thread reads inputs into ~1 MiB chunks of whole documents, a pool of
// --threads workers parses and tokenizes chunks, and the main thread appends finished chunks in
// input order. Chunk boundaries depend only on the input, and results are consumed in order, so
// the shards are byte-identical whatever the thread count (and so are skip counts and errors).
//
// Bad input: an unreadable file, a malformed JSON line, a line without a string "text" field or
// (unless --invalid-utf8 replace) ill-formed UTF-8 is reported as FILE:LINE. With --on-bad-input
// stop (default) the first one ends the run with a trainkit::format_error (io_error for an
// unreadable file); with skip the document is dropped, counted and the first few are logged.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iomanip>
#include <iostream>
#include <istream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "trainkit/core/error.hpp"
#include "trainkit/data/shard_format.hpp"
#include "trainkit/data/shard_writer.hpp"
#include "trainkit/data/worker_pool.hpp"
#include "trainkit/core/utf8.hpp"
#include "trainkit/tokenizer/gpt2_tokenizer.hpp"
#include "trainkit/tokenizer/vocab_files.hpp"

#include "../command.hpp"

namespace gpt_fineweb {

/// How an input's bytes are split into documents.
enum class input_format {
  automatic,  // by extension: .jsonl/.json/.ndjson -> jsonl, else text; stdin: '{' first -> jsonl
  text,       // the whole file (or stdin) is one document
  jsonl       // one JSON object per line, the document in a string field ("text")
};

/// What to do with a bad document or unreadable input.
enum class bad_input_policy { stop, skip };

struct prepare_options {
  std::string vocab;  // directory with encoder.json + vocab.bpe; empty: $TRAINKIT_GPT2_VOCAB
  std::string out;    // output directory (created when missing)
  std::int64_t shard_tokens = 100'000'000;  // tokens per training shard (llm.c: 100M)
  std::int64_t val_tokens = -1;             // first tokens to the val shard; -1: one shard's worth
  int threads = 0;                          // tokenizer threads; 0: every core
  std::string name_prefix = "fineweb";      // shards are <prefix>_{val,train}_NNNNNN.bin
  input_format format = input_format::automatic;
  std::string text_field = "text";  // JSONL field holding the document
  bad_input_policy on_bad_input = bad_input_policy::stop;
  trainkit::tokenizer::invalid_utf8 invalid_utf8 = trainkit::tokenizer::invalid_utf8::error;
  bool overwrite = false;             // replace existing <prefix>_* shards in --out
  double progress_seconds = 2.0;      // progress line interval on the log; <= 0: none
  std::size_t chunk_bytes = 1 << 20;  // documents are batched into chunks of about this size
  std::vector<std::string> inputs;    // files, or "-" for stdin
  bool operator==(const prepare_options&) const = default;
};

/// Registers prepare's flags on the `prepare` subcommand, writing into `o`.
inline void add_prepare_options(CLI::App& sub, prepare_options& o) {
  sub.add_option("--vocab", o.vocab,
                 "Directory with GPT-2 encoder.json + vocab.bpe (default: $TRAINKIT_GPT2_VOCAB, "
                 "else the bundled one)");
  sub.add_option("--out", o.out, "Output directory for the shards")->required();
  sub.add_option("--shard-tokens", o.shard_tokens, "Tokens per training shard")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{2'147'483'647}));
  sub.add_option("--val-tokens", o.val_tokens,
                 "Tokens of the validation shard, taken first (default: --shard-tokens)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{2'147'483'647}));
  sub.add_option("--threads", o.threads, "Tokenizer threads (default: every core)")
      ->check(CLI::Range(0, 4096));
  sub.add_option("--name-prefix", o.name_prefix, "Shard name prefix")->capture_default_str();
  sub.add_option("--format", o.format, "Input format: auto, text (file = document) or jsonl")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, input_format>{{"auto", input_format::automatic},
                                              {"text", input_format::text},
                                              {"jsonl", input_format::jsonl}},
          CLI::ignore_case));
  sub.add_option("--text-field", o.text_field, "JSONL field holding the document")
      ->capture_default_str();
  sub.add_option("--on-bad-input", o.on_bad_input,
                 "stop at the first bad document/file, or skip it and count")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, bad_input_policy>{{"stop", bad_input_policy::stop},
                                                  {"skip", bad_input_policy::skip}},
          CLI::ignore_case));
  sub.add_option("--invalid-utf8", o.invalid_utf8,
                 "error: ill-formed UTF-8 is bad input; replace: encode it as U+FFFD")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, trainkit::tokenizer::invalid_utf8>{
              {"error", trainkit::tokenizer::invalid_utf8::error},
              {"replace", trainkit::tokenizer::invalid_utf8::replace}},
          CLI::ignore_case));
  sub.add_flag("--overwrite", o.overwrite, "Replace existing shards with the same prefix");
  sub.add_option("--progress-seconds", o.progress_seconds, "Seconds between progress lines")
      ->capture_default_str();
  sub.add_option("inputs", o.inputs, "Text or JSONL files; - for stdin")->required();
}

namespace prepare_detail {

/// A batch of documents from one input, handed to a worker.
struct chunk {
  std::string source;  // file name (or "<stdin>") for messages
  bool jsonl = false;
  std::vector<std::string> docs{};            // raw document text, or raw JSON lines
  std::vector<std::uint64_t> line_numbers{};  // line of each doc in its input (1-based)
  std::uint64_t bytes = 0;
};

/// A tokenized chunk: what the writer appends, and what went wrong in it (in input order).
struct chunk_result {
  std::vector<std::uint16_t> tokens;
  std::uint64_t docs = 0;
  std::uint64_t bytes = 0;
  std::vector<std::string> bad;  // "file:line: reason" for each bad document
};

inline std::string line_of_offset(std::string_view text, std::size_t offset) {
  return std::to_string(1 + std::count(text.begin(), text.begin() + offset, '\n'));
}

inline chunk_result tokenize_chunk(const chunk& c, const trainkit::tokenizer::gpt2_tokenizer& tok,
                                   const prepare_options& o) {
  chunk_result r;
  r.bytes = c.bytes;
  std::vector<std::uint32_t> ids;
  const trainkit::tokenizer::encode_options enc{.on_invalid = o.invalid_utf8};
  for (std::size_t d = 0; d < c.docs.size(); ++d) {
    const std::string where = c.source + ":" + std::to_string(c.line_numbers[d]);
    std::string_view text = c.docs[d];
    std::string field;
    if (c.jsonl) {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(c.docs[d]);
      } catch (const nlohmann::json::exception& e) {
        r.bad.push_back(where + ": malformed JSON line (" + e.what() + ")");
        if (o.on_bad_input == bad_input_policy::stop) return r;
        continue;
      }
      const auto it = j.is_object() ? j.find(o.text_field) : j.end();
      if (!j.is_object() || it == j.end() || !it->is_string()) {
        r.bad.push_back(where + ": no string field \"" + o.text_field + "\"");
        if (o.on_bad_input == bad_input_policy::stop) return r;
        continue;
      }
      field = it->get<std::string>();
      text = field;
    }
    ids.clear();
    try {
      tok.encode_into(text, ids, enc);
    } catch (const trainkit::format_error& e) {
      // Ill-formed UTF-8 (JSON strings are validated by the parser, so this is a text input).
      const auto at = trainkit::find_invalid_utf8(text);
      std::string line = where;
      if (!c.jsonl && at) line = c.source + ":" + line_of_offset(text, *at);
      r.bad.push_back(line + ": " + e.what() + " (--invalid-utf8 replace encodes it as U+FFFD)");
      if (o.on_bad_input == bad_input_policy::stop) return r;
      continue;
    }
    r.tokens.push_back(static_cast<std::uint16_t>(tok.eot_token()));
    for (const std::uint32_t id : ids) r.tokens.push_back(static_cast<std::uint16_t>(id));
    ++r.docs;
  }
  return r;
}

inline bool looks_like_jsonl_name(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext == ".jsonl" || ext == ".json" || ext == ".ndjson";
}

inline std::string human_count(double v) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1);
  if (v >= 1e9)
    s << v / 1e9 << "G";
  else if (v >= 1e6)
    s << v / 1e6 << "M";
  else if (v >= 1e3)
    s << v / 1e3 << "k";
  else
    s << std::setprecision(0) << v;
  return s.str();
}

}  // namespace prepare_detail

/// Tokenizes `o.inputs` into shards under `o.out`, logging progress and a summary to `log`.
/// Throws config_error (bad options), format_error (bad input, in stop mode) or io_error.
inline int run_prepare(const prepare_options& o, std::ostream& log) {
  namespace fs = std::filesystem;
  namespace pd = prepare_detail;
  using trainkit::config_error;

  // ---- options -------------------------------------------------------------------------------
  if (o.inputs.empty()) throw config_error("prepare: no INPUT given (files, or - for stdin)");
  if (o.out.empty()) throw config_error("prepare: --out DIR is required");
  if (o.shard_tokens < 1 || o.shard_tokens > 2'147'483'647)
    throw config_error("--shard-tokens " + std::to_string(o.shard_tokens) +
                       ": must be in [1, 2147483647] (the shard header count is an int32)");
  const std::int64_t val_tokens = o.val_tokens < 0 ? o.shard_tokens : o.val_tokens;
  if (val_tokens > 2'147'483'647)
    throw config_error("--val-tokens " + std::to_string(val_tokens) + ": must fit an int32");
  if (o.name_prefix.empty() || o.name_prefix.find('/') != std::string::npos)
    throw config_error("--name-prefix '" + o.name_prefix + "': must be a non-empty file name");
  if (std::count(o.inputs.begin(), o.inputs.end(), std::string("-")) > 1)
    throw config_error("prepare: stdin (-) given more than once");
  const int threads = o.threads > 0
                          ? o.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));

  // Every input must be readable before any work starts (in stop mode): a typo in the last file
  // name should not cost hours of tokenization first.
  for (const std::string& in : o.inputs) {
    if (in == "-") continue;
    std::error_code ec;
    const bool ok = fs::is_regular_file(in, ec) && std::ifstream(in, std::ios::binary).good();
    if (!ok && o.on_bad_input == bad_input_policy::stop)
      throw trainkit::io_error("input " + in + ": cannot read (" +
                               (fs::exists(in, ec) ? "not a readable file" : "no such file") + ")");
  }

  const fs::path vocab_dir = trainkit::tokenizer::resolve_vocab_dir(o.vocab);
  const auto tok = trainkit::tokenizer::gpt2_tokenizer::from_directory(vocab_dir);
  if (tok.vocab_size() > 65536)
    throw config_error("--vocab " + vocab_dir.string() + ": " + std::to_string(tok.vocab_size()) +
                       " tokens do not fit the uint16 shard format");

  // ---- output directory ------------------------------------------------------------------------
  const fs::path out_dir(o.out);
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (!fs::is_directory(out_dir))
    throw trainkit::io_error("--out " + o.out + ": cannot create directory (" + ec.message() + ")");
  std::vector<fs::path> existing;
  for (const auto& e : fs::directory_iterator(out_dir)) {
    const std::string name = e.path().filename().string();
    if ((name.starts_with(o.name_prefix + "_val_") ||
         name.starts_with(o.name_prefix + "_train_")) &&
        (name.ends_with(".bin") || name.ends_with(".bin.tmp")))
      existing.push_back(e.path());
  }
  if (!existing.empty() && !o.overwrite)
    throw config_error("--out " + o.out + ": already holds " + std::to_string(existing.size()) +
                       " " + o.name_prefix + "_* shard(s), e.g. " +
                       existing.front().filename().string() +
                       "; pass --overwrite to replace them (stale shards would mix with new ones)");
  for (const auto& p : existing) fs::remove(p);

  log << "prepare: " << o.inputs.size() << " input(s), " << threads << " thread(s), val "
      << val_tokens << " tokens then shards of " << o.shard_tokens << " tokens -> "
      << (out_dir / (o.name_prefix + "_*.bin")).string() << "\n";

  // ---- pipeline --------------------------------------------------------------------------------
  trainkit::data::shard_writer writer(out_dir, o.name_prefix, val_tokens, o.shard_tokens);
  std::uint64_t docs = 0, bytes = 0, tokens = 0, skipped = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto last_progress = t0;
  auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  auto progress_line = [&] {
    const double s = std::max(seconds_since(t0), 1e-9);
    std::ostringstream line;
    line << std::fixed << std::setprecision(1) << "prepare: " << bytes / 1e6 << " MB, " << docs
         << " docs, " << pd::human_count(double(tokens)) << " tokens, " << bytes / 1e6 / s
         << " MB/s, " << writer.written().size() << " shard(s) written";
    return line.str();
  };
  auto report_bad = [&](const std::vector<std::string>& bad) {
    if (bad.empty()) return;
    if (o.on_bad_input == bad_input_policy::stop)
      throw trainkit::format_error(bad.front() + " (--on-bad-input skip skips such documents)");
    for (const std::string& b : bad) {
      if (skipped < 5) log << "prepare: skipped " << b << "\n";
      ++skipped;
    }
  };

  trainkit::data::worker_pool<pd::chunk_result> pool(threads);
  std::deque<std::future<pd::chunk_result>> in_flight;
  const std::size_t max_in_flight = 2 * static_cast<std::size_t>(threads) + 2;
  auto drain_one = [&] {
    pd::chunk_result r = in_flight.front().get();
    in_flight.pop_front();
    report_bad(r.bad);
    writer.append(r.tokens);
    docs += r.docs;
    bytes += r.bytes;
    tokens += r.tokens.size();
    if (o.progress_seconds > 0 && seconds_since(last_progress) >= o.progress_seconds) {
      log << progress_line() << "\n" << std::flush;
      last_progress = std::chrono::steady_clock::now();
    }
  };
  auto submit = [&](pd::chunk&& c) {
    if (c.docs.empty()) return;
    while (in_flight.size() >= max_in_flight) drain_one();
    auto shared = std::make_shared<pd::chunk>(std::move(c));
    in_flight.push_back(
        pool.submit([shared, &tok, &o] { return pd::tokenize_chunk(*shared, tok, o); }));
  };

  try {
    for (const std::string& in : o.inputs) {
      const bool is_stdin = in == "-";
      const std::string source = is_stdin ? "<stdin>" : in;
      std::ifstream file;
      if (!is_stdin) {
        file.open(in, std::ios::binary);
        if (!file) {
          report_bad({"input " + in + ": cannot read"});  // stop mode threw before; skip counts
          continue;
        }
      }
      std::istream& stream = is_stdin ? static_cast<std::istream&>(std::cin) : file;
      bool jsonl = o.format == input_format::jsonl;
      if (o.format == input_format::automatic) {
        if (is_stdin) {
          // Sniff: FineWeb exports piped in start with '{'; anything else is one text document.
          while (stream.peek() == ' ' || stream.peek() == '\n' || stream.peek() == '\r' ||
                 stream.peek() == '\t')
            stream.get();
          jsonl = stream.peek() == '{';
        } else {
          jsonl = pd::looks_like_jsonl_name(in);
        }
      }
      if (!jsonl) {
        std::ostringstream ss;
        ss << stream.rdbuf();
        if (stream.bad()) throw trainkit::io_error("input " + source + ": read failed");
        pd::chunk c{.source = source, .jsonl = false};
        c.docs.push_back(std::move(ss).str());
        c.line_numbers.push_back(1);
        c.bytes = c.docs.back().size();
        submit(std::move(c));
        continue;
      }
      pd::chunk c{.source = source, .jsonl = true};
      std::string line;
      std::uint64_t line_no = 0;
      while (std::getline(stream, line)) {
        ++line_no;
        c.bytes += line.size() + 1;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank line
        c.docs.push_back(std::move(line));
        c.line_numbers.push_back(line_no);
        line.clear();
        if (c.bytes >= o.chunk_bytes) {
          submit(std::move(c));
          c = pd::chunk{.source = source, .jsonl = true};
        }
      }
      if (stream.bad()) throw trainkit::io_error("input " + source + ": read failed");
      submit(std::move(c));
    }
    while (!in_flight.empty()) drain_one();
  } catch (...) {
    // Let the workers finish what they hold before the pool (and the chunks) go away.
    for (auto& f : in_flight) f.wait();
    throw;
  }
  writer.finish();

  const double s = std::max(seconds_since(t0), 1e-9);
  log << progress_line() << "\n";
  log << std::fixed << std::setprecision(1) << "prepare: done: " << docs << " documents, " << tokens
      << " tokens (" << writer.val_written() << " val, " << writer.train_written() << " train) in "
      << writer.written().size() << " shard(s), " << bytes / 1e6 << " MB in " << s << " s ("
      << bytes / 1e6 / s << " MB/s)";
  if (skipped > 0) log << ", skipped " << skipped << " bad document(s)";
  log << "\n";
  if (writer.train_written() == 0)
    log << "prepare: note: all " << tokens << " tokens went to the validation shard "
        << "(fewer than --val-tokens " << val_tokens << "); no training shard written\n";
  return 0;
}

class prepare_command final : public command {
 public:
  std::string_view name() const override { return "prepare"; }
  std::string_view summary() const override {
    return "Tokenize text / JSONL into llm.c token shards";
  }
  void add_options(CLI::App& app) override { add_prepare_options(app, o_); }
  int run(std::ostream& out) override { return run_prepare(o_, out); }

 private:
  prepare_options o_;
};

}  // namespace gpt_fineweb
