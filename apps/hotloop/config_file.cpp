#include "config_file.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include "hotloop/errors.h"
#include "toml_file.h"

namespace hotloop::cli {

namespace {

std::string scalar(
    const toml::node& node,
    const std::string& key,
    const std::string& file) {
  if (const auto* s = node.as_string()) {
    return s->get();
  }
  if (const auto* i = node.as_integer()) {
    return std::to_string(i->get());
  }
  if (const auto* f = node.as_floating_point()) {
    return fmt::format("{}", f->get());
  }
  if (const auto* b = node.as_boolean()) {
    return b->get() ? "true" : "false";
  }
  throw ConfigError(fmt::format(
      "{}: key '{}' has type {}; it must be a string, number or boolean",
      file,
      key,
      toml::impl::node_type_friendly_names[static_cast<int>(node.type())]));
}

} // namespace

std::vector<std::string> expand_config_file(
    const CLI::App& app,
    std::vector<std::string> args) {
  // The subcommand is the first argument that names one.
  std::size_t command_at = args.size();
  const CLI::App* command = nullptr;
  for (std::size_t i = 0; i < args.size() && command == nullptr; ++i) {
    for (const CLI::App* sub :
         app.get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->get_name() == args[i]) {
        command = sub;
        command_at = i;
        break;
      }
    }
  }
  if (command == nullptr) {
    return args;
  }
  std::string file;
  std::size_t config_at = 0;
  std::size_t config_len = 0;
  for (std::size_t i = command_at + 1; i < args.size(); ++i) {
    if (args[i] == "--") {
      break; // what follows is another program's (launch, watch)
    }
    if (args[i] == "--config" && i + 1 < args.size()) {
      file = args[i + 1];
      config_at = i;
      config_len = 2;
    } else if (args[i].starts_with("--config=")) {
      file = args[i].substr(9);
      config_at = i;
      config_len = 1;
    }
  }
  if (file.empty()) {
    return args;
  }
  const toml::table table = parse_toml_file(
      file, "config file", "the file must be TOML: key = value, one per line");
  std::vector<std::string> from_file;
  for (const auto& [k, node] : table) {
    const std::string key(k.str());
    const CLI::Option* opt = nullptr;
    try {
      opt = command->get_option("--" + key);
    } catch (const CLI::OptionNotFound&) {
    }
    if (opt == nullptr || key == "config" || key == "config-keys") {
      throw ConfigError(
          fmt::format(
              "{}: unknown key '{}' for `hotloop {}`",
              file,
              key,
              command->get_name()),
          fmt::format(
              "`hotloop {} --help` lists the keys (the flags without their dashes)",
              command->get_name()));
    }
    // An empty value as its own argument: CLI11 reads "--key=" as the flag
    // without a value and would take the next argument for it.
    const std::string value = scalar(node, key, file);
    if (value.empty()) {
      from_file.push_back("--" + key);
      from_file.push_back(value);
    } else {
      from_file.push_back(fmt::format("--{}={}", key, value));
    }
  }
  // Commands that say where each value came from learn which keys the file
  // set through a hidden option (config_file.h).
  if (command->get_option_no_throw("--config-keys") != nullptr) {
    std::string keys;
    for (const auto& [k, node] : table) {
      keys += (keys.empty() ? "" : ",") + std::string(k.str());
    }
    from_file.push_back("--config-keys=" + keys);
  }
  args.erase(
      args.begin() + static_cast<std::ptrdiff_t>(config_at),
      args.begin() + static_cast<std::ptrdiff_t>(config_at + config_len));
  args.insert(
      args.begin() + static_cast<std::ptrdiff_t>(command_at + 1),
      from_file.begin(),
      from_file.end());
  return args;
}

} // namespace hotloop::cli
