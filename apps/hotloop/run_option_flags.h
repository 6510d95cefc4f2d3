#pragma once
// The run's options (train/run_options.h) as a command's flags: one flag per
// table entry, with the entry's help, section and default; booleans also
// take a bare --name (true) and, when on by default, --no-name.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "hotloop/train/run_options.h"

namespace hotloop::cli {

// --config FILE.toml (expanded into flags before parsing: config_file.h),
// the hidden --config-keys that expansion fills, and --print-config.
struct ConfigFlags {
  std::string file;
  std::string keys; // the file's keys, comma-separated
  bool print = false;
};
void add_config_flags(CLI::App* cmd, ConfigFlags& c);

// Adds the table's options to `cmd`, each parsing into `run` (whose values
// now are the defaults --help shows): all of them, or the ones named in
// `only` (in that order).
void add_run_flags(
    CLI::App* cmd,
    train::RunOptions& run,
    const std::vector<std::string>& only = {});

// The options of `hotloop train` that change a training step's memory and
// speed: the flags of the commands that measure a step (tune batch, plan).
std::vector<std::string> step_option_names();

} // namespace hotloop::cli
