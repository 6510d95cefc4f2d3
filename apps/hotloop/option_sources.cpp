#include "option_sources.h"

#include <fmt/format.h>

namespace hotloop::cli {

namespace {

std::string key_of(const CLI::Option* opt) {
  std::string name = opt->get_name(false, true);
  while (name.starts_with("-")) {
    name.erase(0, 1);
  }
  return name.starts_with("no-") && opt->get_group().empty() ? name.substr(3)
                                                             : name;
}

bool bookkeeping(const std::string& key) {
  return key == "config" || key == "config-keys" || key == "help" ||
      key == "print-config" || key.empty();
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

void record_sources(
    const CLI::App& cmd,
    const std::string& config_keys,
    train::RunOptions& run) {
  const std::set<std::string> from_file = split(config_keys);
  for (const CLI::Option* opt : cmd.get_options()) {
    const std::string key = key_of(opt);
    if (bookkeeping(key) || opt->count() == 0) {
      continue;
    }
    // A key in the file and again on the command line counts twice: the
    // flag (placed after the file's keys) won.
    run.sources[key] = from_file.contains(key) && opt->count() == 1
        ? train::kFromConfigFile
        : train::kFromFlag;
  }
}

std::string describe_sources(const train::RunOptions& run) {
  std::string flags;
  std::string file;
  std::string recipe;
  for (const train::RunOption& o : train::run_options()) {
    const std::string source = run.source(o.name);
    std::string* list = source == train::kFromFlag ? &flags
        : source == train::kFromConfigFile         ? &file
        : source == train::kFromRecipe             ? &recipe
                                                   : nullptr;
    if (list != nullptr) {
      *list +=
          fmt::format("{}{}={}", list->empty() ? "" : " ", o.name, o.text(run));
    }
  }
  std::string out = "options: ";
  out += flags.empty() ? "no flags" : "flags: " + flags;
  if (!file.empty()) {
    out += "; config file: " + file;
  }
  if (!recipe.empty()) {
    out += fmt::format("; recipe for {}: {}", run.trainer.model.name, recipe);
  }
  out += "; everything else: defaults (config.json lists each option's source)";
  return out;
}

} // namespace hotloop::cli
