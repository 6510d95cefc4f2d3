#pragma once
// Reading a TOML file for the CLI (--config, --matrix): a syntax error is a
// ConfigError with the file, line and column.

#include <string>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "hotloop/errors.h"

namespace hotloop::cli {

inline toml::table parse_toml_file(
    const std::string& path,
    const std::string& what, // "config file", "matrix file"
    const std::string& hint) {
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw ConfigError(
        fmt::format(
            "{}:{}:{}: {}",
            path,
            e.source().begin.line,
            e.source().begin.column,
            e.description()),
        hint);
  } catch (const std::exception& e) {
    throw ConfigError(
        fmt::format("cannot read the {} {}: {}", what, path, e.what()));
  }
}

} // namespace hotloop::cli
