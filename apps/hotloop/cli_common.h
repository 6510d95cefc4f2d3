#pragma once
// Shared by the subcommands: how each one registers itself, and terminal
// helpers.

#include <functional>
#include <initializer_list>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "hotloop/data/loader.h"
#include "hotloop/errors.h"

namespace hotloop::cli {

// The subcommand chosen on the command line; it returns the process exit code
// (0 success, 1 failure, 2 bad usage) or throws a hotloop::Error.
using Action = std::function<int()>;

// Each subcommand adds itself to `app` and, when it is the one parsed, sets
// `action`.
void add_doctor_command(CLI::App& app, Action& action);
void add_run_command(CLI::App& app, Action& action);
void add_smoke_command(CLI::App& app, Action& action);
void add_audit_command(CLI::App& app, Action& action);
void add_pack_command(CLI::App& app, Action& action);
void add_data_command(CLI::App& app, Action& action);
void add_bench_command(CLI::App& app, Action& action);
void add_predict_command(CLI::App& app, Action& action);
void add_generate_command(CLI::App& app, Action& action);
void add_weights_command(CLI::App& app, Action& action);
void add_train_command(CLI::App& app, Action& action);
void add_tune_command(CLI::App& app, Action& action);
void add_monitor_command(CLI::App& app, Action& action);
void add_watch_command(CLI::App& app, Action& action);
void add_launch_command(CLI::App& app, Action& action);
void add_inspect_command(CLI::App& app, Action& action);

// The value named `value` among `choices` for the flag --`key`; a UsageError
// listing the choices otherwise.
template <typename T>
T pick(
    const std::string& key,
    const std::string& value,
    std::initializer_list<std::pair<const char*, T>> choices) {
  std::string names;
  for (const auto& [name, v] : choices) {
    if (value == name) {
      return v;
    }
    names += names.empty() ? name : std::string(", ") + name;
  }
  throw UsageError(
      fmt::format("--{} {}: expected one of {}", key, value, names));
}

// The loader flags that train, tune and bench share: --resident auto|on|off,
// --augment default|none, --augment-device cpu|gpu (true: gpu).
data::Resident parse_resident(const std::string& value);
data::Augment parse_augment(const std::string& value);
bool parse_augment_device(const std::string& value);

// True when standard output is a terminal that should get colours (NO_COLOR
// unset, TERM not "dumb").
bool stdout_wants_color();

} // namespace hotloop::cli
