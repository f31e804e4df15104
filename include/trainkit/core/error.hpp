// trainkit/core/error.hpp — the exception types library code throws.
//
// Library code never exits or prints: it throws one of these with the file, config field or
// value that was wrong in the message, and programs (examples/) turn them into one line on stderr
// and an exit code. `config_error` and `format_error` are the user's mistakes (exit 2 in
// programs); `io_error` is the environment failing (disk full, permission denied).
//
// Config fields are named by their path, `struct_name.field` ("trainer_config.steps",
// "adamw_config.eps"); a program that fills them from flags maps the paths to its flag names. A
// check that finds several problems at once (the trainer's `check()`) throws one config_error
// carrying all of them as {field, message} pairs, so a program can map each field exactly.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace trainkit {

/// Base of every trainkit exception.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One thing wrong with a configuration: the field's path and a sentence that starts with it
/// ("trainer_config.steps" / "trainer_config.steps must be >= 0: -1").
struct config_problem {
  std::string field;
  std::string message;

  friend bool operator==(const config_problem&, const config_problem&) = default;
};

/// An impossible or inconsistent configuration (field values, shapes, compositions).
class config_error : public error {
 public:
  using error::error;

  /// Every problem a check found; what() is their messages joined by "; ". `problems` must not
  /// be empty.
  explicit config_error(std::vector<config_problem> problems)
      : error(joined(problems)),
        problems_(std::make_shared<const std::vector<config_problem>>(std::move(problems))) {}

  /// The problems of a check that reported them one by one; empty for a single message.
  const std::vector<config_problem>& problems() const noexcept {
    static const std::vector<config_problem> none;
    return problems_ ? *problems_ : none;
  }

 private:
  static std::string joined(const std::vector<config_problem>& problems) {
    std::string s;
    for (const config_problem& p : problems) s += (s.empty() ? "" : "; ") + p.message;
    return s;
  }

  // Shared so that copying the exception cannot throw (exceptions are copied when rethrown).
  std::shared_ptr<const std::vector<config_problem>> problems_;
};

/// A file whose contents are not what its format requires (magic, version, size, CRC, range).
class format_error : public error {
 public:
  using error::error;
};

/// The operating system refused an operation (open, write, fsync, rename, mmap).
class io_error : public error {
 public:
  using error::error;
};

}  // namespace trainkit
