// trainkit/core/error.hpp — the exception types library code throws.
//
// Library code never exits or prints: it throws one of these with the file, flag or value that
// was wrong in the message, and programs (examples/) turn them into one line on stderr and an
// exit code. `config_error` and `format_error` are the user's mistakes (exit 2 in programs);
// `io_error` is the environment failing (disk full, permission denied).
#pragma once

#include <stdexcept>
#include <string>

namespace trainkit {

/// Base of every trainkit exception.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An impossible or inconsistent configuration (flag values, shapes, compositions).
class config_error : public error {
 public:
  using error::error;
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
