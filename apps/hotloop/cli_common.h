#pragma once
// Shared by the subcommands: how each one registers itself, and terminal
// helpers.

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

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
// `hotloop data batch` (data_command.cpp), under `data`.
void add_data_batch_command(CLI::App& data_cmd, Action& action);
void add_data_show_command(CLI::App& data_cmd, Action& action);
void add_bench_command(CLI::App& app, Action& action);
void add_predict_command(CLI::App& app, Action& action);
void add_generate_command(CLI::App& app, Action& action);
void add_weights_command(CLI::App& app, Action& action);
void add_train_command(CLI::App& app, Action& action);
void add_tune_command(CLI::App& app, Action& action);
void add_plan_command(CLI::App& app, Action& action);
void add_monitor_command(CLI::App& app, Action& action);
void add_watch_command(CLI::App& app, Action& action);
void add_launch_command(CLI::App& app, Action& action);
void add_inspect_command(CLI::App& app, Action& action);

// --json (`what`: what the one JSON object holds, for the help) and
// --no-color, as every command that prints a report takes them.
void add_json_flag(
    CLI::App* cmd,
    bool& json,
    const char* what = "one JSON object instead of text");
void add_no_color_flag(CLI::App* cmd, bool& no_color);

// True when standard output is a terminal that should get colours (NO_COLOR
// unset, TERM not "dumb").
bool stdout_wants_color();

} // namespace hotloop::cli
