#pragma once
// The option table: every training option declared once. An entry holds the
// option's name (the flag without its dashes, the TOML key of --config and
// --print-config, and its key in config.json), its --help text and section,
// the field it fills (as typed get and set functions made from member
// pointers, option_table.cpp), its range check, whether a model's recipe
// may set it and whether a resume must keep it. --help, the TOML config,
// --print-config, config.json, the resume check and the recipes all read the
// table; adding an option is one entry plus the code that uses the value.

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace hotloop::train {

struct TrainerOptions;

// How an option's text reads, for --help and the TOML writer.
enum class OptionKind { Integer, Real, Boolean, Text, Choice };

template <typename Owner>
struct Option {
  std::string name; // "label-smoothing"
  std::string section; // --help's group: "Optimizer", "Schedule", ...
  std::string help;
  OptionKind kind = OptionKind::Text;
  // Choice: the words it takes; another kind: words it takes besides a
  // value (--batch: auto).
  std::vector<std::string> choices;
  bool recipe = false; // a model's recipe may set it (train/recipe.h)
  bool must_match = false; // a resume with another value is refused
  // The value as config.json and --print-config write it: a number, a
  // boolean or a string.
  std::function<nlohmann::json(const Owner&)> get;
  // Parses `text` (as the command line gives it) into the field and checks
  // its range: a UsageError naming --name otherwise.
  std::function<void(Owner&, const std::string&)> set;
  // "" when the value is in range, else why not (validate(), for options
  // set in code rather than parsed).
  std::function<std::string(const Owner&)> check;

  Option& set_by_recipe() {
    recipe = true;
    return *this;
  }
  Option& kept_on_resume() {
    must_match = true;
    return *this;
  }
  // The value as the command line writes it: "0.1", "true", "cosine".
  std::string text(const Owner& o) const {
    const nlohmann::json v = get(o);
    return v.is_string() ? v.get<std::string>() : v.dump();
  }
};

// The entry of `table` named `name`; nullptr when there is none.
template <typename Owner>
const Option<Owner>* find_option(
    const std::vector<Option<Owner>>& table,
    std::string_view name) {
  for (const auto& o : table) {
    if (o.name == name) {
      return &o;
    }
  }
  return nullptr;
}

using TrainerOption = Option<TrainerOptions>;

// The training options (TrainerOptions and the model and loader options in
// it), in --help's order.
const std::vector<TrainerOption>& trainer_options();

// The entry named `name`; nullptr when there is none.
const TrainerOption* find_trainer_option(std::string_view name);

} // namespace hotloop::train
