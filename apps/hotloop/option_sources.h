#pragma once
// Where each option's value came from: a flag on the command line, the
// --config file, the model's recipe (train/recipe.h), or the default. The
// start of `hotloop train` prints it; config.json keeps it.

#include <map>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace hotloop::cli {

// The options the user set, on the command line or in the config file
// (`config_keys`: the hidden --config-keys list), by flag name.
std::set<std::string> given_options(const CLI::App& cmd);

// Every option of `cmd` -> "flag" | "config file" | "recipe" | "default".
std::map<std::string, std::string> option_sources(
    const CLI::App& cmd,
    const std::string& config_keys,
    const std::vector<std::string>& recipe_keys);

// "set by flags: --model cnn-small --epochs 3; by the recipe for cnn-small:
// optimizer adamw, lr 3e-3, ...; by the config file: ...; the rest: defaults"
// (`recipe_values`: the recipe's key -> value).
std::string describe_sources(
    const CLI::App& cmd,
    const std::map<std::string, std::string>& sources,
    const std::string& model,
    const std::map<std::string, std::string>& recipe_values);

} // namespace hotloop::cli
