// tests/io/python_support.hpp — running a Python check script from a GoogleTest test.
//
// The scripts check trainkit's files with the reference Python packages. safetensors, numpy and
// pyarrow are required (scripts/install-deps.sh installs them into the repository's .venv, which
// CMake hands the tests as Python3_EXECUTABLE): a script without them fails, printing the
// pip command. Only transformers + torch are optional: a script exits 77 without them and the
// test skips.
#pragma once

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace python_test {

/// Exit status of `python3 tests/<script> args...` (stdout/stderr to the test's log).
inline int run(const std::string& script, const std::string& args) {
  const std::string python = TRAINKIT_PYTHON;
  if (python.empty() || python.find("NOTFOUND") != std::string::npos) return 77;
  const std::string cmd =
      "'" + python + "' '" + std::string(TRAINKIT_SOURCE_DIR) + "/tests/" + script + "' " + args;
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

}  // namespace python_test

/// Runs the script; skips the test when it reports a missing optional package (exit 77), fails it
/// on any other error.
#define RUN_PYTHON_CHECK(script, args)                                                  \
  do {                                                                                  \
    const int rc_ = python_test::run(script, args);                                     \
    if (rc_ == 77) GTEST_SKIP() << script << ": an optional Python package is missing"; \
    ASSERT_EQ(rc_, 0) << script << " " << args << " failed";                            \
  } while (0)
