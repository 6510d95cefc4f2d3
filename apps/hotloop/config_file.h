#pragma once
// `--config FILE.toml` for any subcommand: the file's keys become flags placed
// before the command line's own, so flags given on the command line win (each
// option keeps its last value). Keys are the flags' names without dashes
// (`micro-batch = 16`); an unknown key, a table or an array is a ConfigError
// naming the key and the file. A command with a hidden --config-keys option
// (train, tune batch) also gets the list of the file's keys there, to say
// where each value came from (option_sources.h).

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace hotloop::cli {

// Returns `args` (argv without the program name) with the config file of
// `command` expanded in place. Unchanged when there is no --config.
std::vector<std::string> expand_config_file(
    const CLI::App& app,
    std::vector<std::string> args);

} // namespace hotloop::cli
