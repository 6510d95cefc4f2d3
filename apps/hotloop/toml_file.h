#pragma once
// Reading a TOML file for the CLI (--config, --matrix): a syntax error is a
// ConfigError with the file, line and column.

#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "hotloop/errors.h"

namespace hotloop::cli {

inline toml::table parse_toml_file(
    const std::string& path,
    const std::string& what, // "config file", "matrix file"
    const std::string& hint) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw ConfigError(
        fmt::format(
            "cannot read the {} {}: {}",
            what,
            path,
            std::filesystem::exists(path, ec) ? "not a file" : "no such file"),
        fmt::format(
            "check the path (a relative one starts from {})",
            std::filesystem::current_path(ec).string()));
  }
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    if (e.source().begin.line == 0) { // opening or reading it failed
      throw ConfigError(fmt::format(
          "cannot read the {} {}: {}", what, path, e.description()));
    }
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
