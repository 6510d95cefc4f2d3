#pragma once
// Where each option's value came from: a flag on the command line, the
// --config file, the model's recipe (train/recipe.h), or the default. The
// start of `hotloop train` prints it; config.json keeps it.

#include <set>
#include <string>

#include <CLI/CLI.hpp>

#include "hotloop/train/run_options.h"

namespace hotloop::cli {

// The options the user set, on the command line or in the config file, by
// flag name (a --no-NAME flag counts as NAME).
std::set<std::string> given_options(const CLI::App& cmd);

// Records in run.sources which of the table's options the user set, and
// where: "config file" for the keys of `config_keys` (the hidden
// --config-keys list: config_file.h) not given again on the command line,
// "flag" for the rest.
void record_sources(
    const CLI::App& cmd,
    const std::string& config_keys,
    train::RunOptions& run);

// "options: flags: model=cnn-small epochs=3; recipe for cnn-small:
// optimizer=adamw lr=0.003 ...; config file: ...; everything else: defaults".
std::string describe_sources(const train::RunOptions& run);

} // namespace hotloop::cli
