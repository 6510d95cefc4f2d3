#include "run_option_flags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace hotloop::cli {

namespace {

// "INT", "NUMBER", "TEXT", "[true|false]", the choices ("sgd|adamw"), and
// the words a value kind also takes ("INT|auto").
std::string type_name(const train::RunOption& o) {
  std::vector<std::string> words;
  switch (o.kind) {
    case train::OptionKind::Integer:
      words.emplace_back("INT");
      break;
    case train::OptionKind::Real:
      words.emplace_back("NUMBER");
      break;
    case train::OptionKind::Boolean:
      return "[true|false]";
    case train::OptionKind::Choice:
      break;
    case train::OptionKind::Text:
      words.emplace_back("TEXT");
      break;
  }
  words.insert(words.end(), o.choices.begin(), o.choices.end());
  return fmt::format("{}", fmt::join(words, "|"));
}

void add_flag(
    CLI::App* cmd,
    train::RunOptions& run,
    const train::RunOption& o) {
  const std::string shown = o.text(run);
  CLI::Option* flag = cmd->add_option_function<std::string>(
      "--" + o.name,
      [&run, &o](const std::string& text) { o.set(run, text); },
      fmt::format(
          "{}{} [default: {}]",
          o.help,
          o.recipe ? " (a built-in model's recipe sets it)" : "",
          shown.empty() ? std::string("\"\"") : shown));
  flag->type_name(type_name(o))
      ->group(o.section)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  if (o.kind == train::OptionKind::Boolean) {
    flag->expected(0, 1);
    if (o.get(run) == true) {
      cmd->add_flag_callback(
             "--no-" + o.name,
             [&run, &o] { o.set(run, "false"); },
             "--" + o.name + " false")
          ->group("");
    }
  }
}

} // namespace

void add_config_flags(CLI::App* cmd, ConfigFlags& c) {
  cmd->add_option(
      "--config",
      c.file,
      "A TOML file with the same keys as the flags (micro-batch = 32; --print-config writes one); flags override it");
  cmd->add_flag(
      "--print-config",
      c.print,
      "Resolve the options (recipe, data, auto batch), print them as TOML with each one's source, and exit without training");
  cmd->add_option("--config-keys", c.keys)->group("");
}

std::vector<std::string> step_option_names() {
  return {"model",          "data",        "head",
          "layers",         "heads",       "width",
          "context",        "vocab",       "num-classes",
          "in-channels",    "precision",   "device",
          "size",           "optimizer",   "activation-checkpointing",
          "channels-last",  "cuda-graphs", "memory-fraction",
          "threads",        "workers",     "resident",
          "augment-device", "shuffle",     "seed",
          "init",           "lora-rank",   "lora-targets"};
}

void add_run_flags(
    CLI::App* cmd,
    train::RunOptions& run,
    const std::vector<std::string>& only) {
  if (only.empty()) {
    for (const train::RunOption& o : train::run_options()) {
      add_flag(cmd, run, o);
    }
    return;
  }
  for (const std::string& name : only) {
    const train::RunOption* o = train::find_run_option(name);
    if (o == nullptr) {
      throw std::logic_error("add_run_flags: no option '" + name + "'");
    }
    add_flag(cmd, run, *o);
  }
}

} // namespace hotloop::cli
