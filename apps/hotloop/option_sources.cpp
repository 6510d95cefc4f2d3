#include "option_sources.h"

#include <fmt/format.h>

namespace hotloop::cli {

namespace {

std::string key_of(const CLI::Option* opt) {
  std::string name = opt->get_name(false, true);
  while (name.starts_with("-")) {
    name.erase(0, 1);
  }
  return name;
}

bool bookkeeping(const std::string& key) {
  return key == "config" || key == "config-keys" || key == "help" ||
      key.empty();
}

std::set<std::string> split(const std::string& list) {
  std::set<std::string> out;
  std::size_t at = 0;
  while (at < list.size()) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    out.insert(list.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

std::string last_value(const CLI::Option* opt) {
  const auto& r = opt->results();
  return r.empty() ? std::string() : r.back();
}

} // namespace

std::set<std::string> given_options(const CLI::App& cmd) {
  std::set<std::string> out;
  for (const CLI::Option* opt : cmd.get_options()) {
    const std::string key = key_of(opt);
    if (!bookkeeping(key) && opt->count() > 0) {
      out.insert(key);
    }
  }
  return out;
}

std::map<std::string, std::string> option_sources(
    const CLI::App& cmd,
    const std::string& config_keys,
    const std::vector<std::string>& recipe_keys) {
  const std::set<std::string> from_file = split(config_keys);
  const std::set<std::string> from_recipe(
      recipe_keys.begin(), recipe_keys.end());
  std::map<std::string, std::string> out;
  for (const CLI::Option* opt : cmd.get_options()) {
    const std::string key = key_of(opt);
    if (bookkeeping(key)) {
      continue;
    }
    // A key in the file and again on the command line counts twice: the
    // flag (placed after the file's keys) won.
    if (opt->count() > 0) {
      out[key] =
          from_file.contains(key) && opt->count() == 1 ? "config file" : "flag";
    } else {
      out[key] = from_recipe.contains(key) ? "recipe" : "default";
    }
  }
  return out;
}

std::string describe_sources(
    const CLI::App& cmd,
    const std::map<std::string, std::string>& sources,
    const std::string& model,
    const std::map<std::string, std::string>& recipe_values) {
  std::string flags;
  std::string file;
  std::string recipe;
  for (const CLI::Option* opt : cmd.get_options()) {
    const std::string key = key_of(opt);
    const auto it = sources.find(key);
    if (it == sources.end()) {
      continue;
    }
    std::string& list = it->second == "flag" ? flags
        : it->second == "config file"        ? file
                                             : recipe;
    if (it->second == "default") {
      continue;
    }
    const std::string value =
        it->second == "recipe" ? recipe_values.at(key) : last_value(opt);
    list += fmt::format(
        "{}{}{}",
        list.empty() ? "" : " ",
        key,
        value.empty() ? "" : "=" + value);
  }
  std::string out = "options: ";
  out += flags.empty() ? "no flags" : "flags: " + flags;
  if (!file.empty()) {
    out += "; config file: " + file;
  }
  if (!recipe.empty()) {
    out += fmt::format("; recipe for {}: {}", model, recipe);
  }
  out += "; everything else: defaults (config.json lists each option's source)";
  return out;
}

} // namespace hotloop::cli
