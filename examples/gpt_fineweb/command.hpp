// command.hpp — how every gpt_fineweb command is wired: one small interface and one error path.
//
// A command adds its options to a CLI11 app (the root app for `train`, which runs when no command
// word is given; a subcommand for the others) and runs, returning an exit code. Library code
// throws; `run_program` is the one place that turns an exception into one line on stderr and an
// exit code (2 for a bad flag, file or configuration, naming the flag through flag_names.hpp; 1
// for anything unexpected), so every command reports errors the same way.
#pragma once

#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <trainkit/core/error.hpp>
#include <trainkit/data/shard_format.hpp>
#include <trainkit/trainer/stop_flag.hpp>

#include "flag_names.hpp"

namespace gpt_fineweb {

class command {
 public:
  virtual ~command() = default;
  /// The command word (`prepare`, `report`, ...); empty for the default command (`train`).
  virtual std::string_view name() const = 0;
  /// One line for --help.
  virtual std::string_view summary() const = 0;
  /// Adds the command's options (and positionals) to `app`, bound to the command's members.
  virtual void add_options(CLI::App& app) = 0;
  /// Runs with the parsed options; returns the exit code. Throws trainkit errors.
  virtual int run(std::ostream& out) = 0;
};

/// What the program says about an exception that reached its top: the line after
/// "gpt_fineweb: " (its kind, then the message with library field names replaced by flags) and
/// the exit code (2 for a bad flag, file or configuration; 1 for anything unexpected). An MPI
/// rank says the same after naming itself (train/mpi_launch.hpp).
struct failure {
  std::string line;
  int exit_code;
};

inline failure describe_failure(const std::exception& e) {
  if (dynamic_cast<const trainkit::data::shard_magic_error*>(&e))
    return {std::string("error: ") + e.what() +
                "; for headerless uint16 files pass --data-format headerless_uint16",
            2};
  if (dynamic_cast<const trainkit::config_error*>(&e) ||
      dynamic_cast<const trainkit::format_error*>(&e))
    return {"error: " + name_flags(e.what()), 2};
  if (dynamic_cast<const trainkit::io_error*>(&e))
    return {std::string("I/O error: ") + e.what(), 2};
  return {std::string("fatal: ") + e.what(), 1};
}

/// Parses the command line for `commands` (exactly one with an empty name: the default) and runs
/// the one it names.
inline int run_program(int argc, char** argv, CLI::App& app,
                       std::span<const std::unique_ptr<command>> commands) {
  command* fallback = nullptr;
  std::vector<std::pair<CLI::App*, command*>> subs;
  for (const auto& c : commands) {
    if (c->name().empty()) {
      fallback = c.get();
      c->add_options(app);
    } else {
      CLI::App* sub = app.add_subcommand(std::string(c->name()), std::string(c->summary()));
      c->add_options(*sub);
      subs.emplace_back(sub, c.get());
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "gpt_fineweb: " << e.what() << " (see --help)\n";
    return 2;
  }
  try {
    trainkit::install_stop_handlers();
    for (const auto& [sub, c] : subs)
      if (*sub) return c->run(std::cout);
    if (!fallback) throw trainkit::config_error("no command given (see --help)");
    return fallback->run(std::cout);
  } catch (const std::exception& e) {
    const failure f = describe_failure(e);
    std::cerr << "gpt_fineweb: " << f.line << "\n";
    return f.exit_code;
  }
}

}  // namespace gpt_fineweb
